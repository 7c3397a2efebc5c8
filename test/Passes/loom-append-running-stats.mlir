// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-append-running-stats))' | FileCheck %s

// Each named running statistic becomes an argument and its update a result
// with the same role, after the step's results; the batch norm drops the
// names. The variance is the unbiased one: N / (N - 1) = 8 / 7 of the
// biased variance, N = 4 * 2 elements per channel.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x3x2xf32> {loom.input = "x"}
// CHECK-SAME:    %[[RM:[^:]*]]: tensor<3xf32> {loom.running_mean = "bn.running_mean"}, %[[RV:[^:]*]]: tensor<3xf32> {loom.running_var = "bn.running_var"})
// CHECK-SAME:    -> (tensor<f32> {loom.loss}, tensor<3xf32> {loom.running_mean = "bn.running_mean"}, tensor<3xf32> {loom.running_var = "bn.running_var"})
// CHECK:         %[[Y:.*]] = loom.batch_norm %[[X]], %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} :
// CHECK-NEXT:    %[[S:.*]] = loom.reduce_sum %[[X]] axes [0, 2] {keep_dims} : tensor<4x3x2xf32> -> tensor<1x3x1xf32>
// CHECK-NEXT:    %[[M4:.*]] = loom.scale %[[S]] by 1.250000e-01
// CHECK-NEXT:    %[[C:.*]] = loom.sub %[[X]], %[[M4]]
// CHECK-NEXT:    %[[SQ:.*]] = loom.mul %[[C]], %[[C]]
// CHECK-NEXT:    %[[SS:.*]] = loom.reduce_sum %[[SQ]] axes [0, 2] {keep_dims}
// CHECK-NEXT:    %[[V4:.*]] = loom.scale %[[SS]] by 1.250000e-01
// CHECK-NEXT:    %[[M:.*]] = loom.reshape %[[M4]] [3] : tensor<1x3x1xf32> -> tensor<3xf32>
// CHECK-NEXT:    %[[VB:.*]] = loom.reshape %[[V4]] [3]
// CHECK-NEXT:    %[[VU:.*]] = loom.scale %[[VB]] by 1.1428571428571428
// CHECK-NEXT:    %[[KM:.*]] = loom.scale %[[RM]] by 9.000000e-01
// CHECK-NEXT:    %[[AM:.*]] = loom.scale %[[M]] by 0.099999999999999978
// CHECK-NEXT:    %[[NM:.*]] = loom.add %[[KM]], %[[AM]]
// CHECK-NEXT:    %[[KV:.*]] = loom.scale %[[RV]] by 9.000000e-01
// CHECK-NEXT:    %[[AV:.*]] = loom.scale %[[VU]] by 0.099999999999999978
// CHECK-NEXT:    %[[NV:.*]] = loom.add %[[KV]], %[[AV]]
// CHECK:         return %{{.*}}, %[[NM]], %[[NV]]
func.func @main(%x: tensor<4x3x2xf32> {loom.input = "x"}, %g: tensor<3xf32> {loom.param = "g"},
                %b: tensor<3xf32> {loom.param = "b"}) -> (tensor<f32> {loom.loss}) {
  %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64, momentum = 0.9 : f64, running_mean = "bn.running_mean", running_var = "bn.running_var"} : (tensor<4x3x2xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3x2xf32>
  %l = loom.reduce_sum %y axes [0, 1, 2] : tensor<4x3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// bf16 activations (mixed precision): the statistics are computed in f32
// from one conversion, the running statistics stay f32.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    tensor<2xf32> {loom.running_mean = "m"}, %{{[^:]*}}: tensor<2xf32> {loom.running_var = "v"})
// CHECK:         loom.batch_norm
// CHECK-NEXT:    %[[XF:.*]] = loom.convert %arg0 to f32 : tensor<4x2xbf16> -> tensor<4x2xf32>
// CHECK-NEXT:    loom.reduce_sum %[[XF]] axes [0] {keep_dims} : tensor<4x2xf32> -> tensor<1x2xf32>
// CHECK:         loom.add %{{.*}} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
func.func @main(%x: tensor<4x2xbf16> {loom.input = "x"}, %g: tensor<2xbf16> {loom.input = "g"},
                %b: tensor<2xbf16> {loom.input = "b"}) -> (tensor<f32> {loom.loss}) {
  %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64, momentum = 0.9 : f64, running_mean = "m", running_var = "v"} : (tensor<4x2xbf16>, tensor<2xbf16>, tensor<2xbf16>) -> tensor<4x2xbf16>
  %l = loom.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// A batch norm that names no statistics (a graph whose statistics are graph
// inputs) changes nothing.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    -> (tensor<f32> {loom.loss})
// CHECK-NOT:     loom.reduce_sum
func.func @main(%x: tensor<4x3x2xf32> {loom.input = "x"}, %g: tensor<3xf32> {loom.param = "g"},
                %b: tensor<3xf32> {loom.param = "b"}) -> (tensor<f32> {loom.loss}) {
  %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<4x3x2xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3x2xf32>
  %l = loom.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
