// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(loom-sync-batch-norm)' | FileCheck %s

// On two data-parallel ranks the forward is written out: the mean and the
// biased variance are sums over every dimension but the channels, scaled by
// 1/N with N = 8 * 3 * 3 the whole batch's elements per channel; the
// backward is the closed form with the same N and reuses the forward's
// normalised input.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:[^:]*]]: tensor<8x4x3x3xf32> {loom.input = "x"}, %[[DY:[^:]*]]: tensor<8x4x3x3xf32> {loom.input = "dy"}
// CHECK-SAME:    %[[G:[^:]*]]: tensor<4xf32> {loom.param = "g"}, %[[B:[^:]*]]: tensor<4xf32> {loom.param = "b"}
// CHECK-NOT:     loom.batch_norm
// CHECK:         %[[S:.*]] = loom.reduce_sum %[[X]] axes [0, 2, 3] {keep_dims} : tensor<8x4x3x3xf32> -> tensor<1x4x1x1xf32>
// CHECK-NEXT:    %[[MEAN:.*]] = loom.scale %[[S]] by 0.013888888888888888
// CHECK-NEXT:    %[[XC:.*]] = loom.sub %[[X]], %[[MEAN]]
// CHECK-NEXT:    %[[SQ:.*]] = loom.mul %[[XC]], %[[XC]]
// CHECK-NEXT:    %[[SS:.*]] = loom.reduce_sum %[[SQ]] axes [0, 2, 3] {keep_dims}
// CHECK-NEXT:    %[[VAR:.*]] = loom.scale %[[SS]] by 0.013888888888888888
// CHECK-NEXT:    %[[EPS:.*]] = loom.constant dense<9.99999974E-6> : tensor<f32>
// CHECK-NEXT:    %[[VE:.*]] = loom.add %[[VAR]], %[[EPS]]
// CHECK-NEXT:    %[[RSTD:.*]] = loom.rsqrt %[[VE]]
// CHECK-NEXT:    %[[XHAT:.*]] = loom.mul %[[XC]], %[[RSTD]]
// CHECK-NEXT:    %[[G4:.*]] = loom.reshape %[[G]] [1, 4, 1, 1]
// CHECK-NEXT:    %[[SCALED:.*]] = loom.mul %[[XHAT]], %[[G4]]
// CHECK-NEXT:    %[[B4:.*]] = loom.reshape %[[B]] [1, 4, 1, 1]
// CHECK-NEXT:    %[[Y:.*]] = loom.add %[[SCALED]], %[[B4]]
// CHECK-NEXT:    %[[SDY:.*]] = loom.reduce_sum %[[DY]] axes [0, 2, 3] {keep_dims}
// CHECK-NEXT:    %[[DB:.*]] = loom.reshape %[[SDY]] [4] : tensor<1x4x1x1xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[MDY:.*]] = loom.scale %[[SDY]] by 0.013888888888888888
// CHECK-NEXT:    %[[T0:.*]] = loom.sub %[[DY]], %[[MDY]]
// CHECK-NEXT:    %[[DYX:.*]] = loom.mul %[[DY]], %[[XHAT]]
// CHECK-NEXT:    %[[SDYX:.*]] = loom.reduce_sum %[[DYX]] axes [0, 2, 3] {keep_dims}
// CHECK-NEXT:    %[[DG:.*]] = loom.reshape %[[SDYX]] [4] : tensor<1x4x1x1xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[MDYX:.*]] = loom.scale %[[SDYX]] by 0.013888888888888888
// CHECK-NEXT:    %[[P:.*]] = loom.mul %[[XHAT]], %[[MDYX]]
// CHECK-NEXT:    %[[T1:.*]] = loom.sub %[[T0]], %[[P]]
// CHECK-NEXT:    %[[G4B:.*]] = loom.reshape %[[G]] [1, 4, 1, 1]
// CHECK-NEXT:    %[[K:.*]] = loom.mul %[[G4B]], %[[RSTD]]
// CHECK-NEXT:    %[[DX:.*]] = loom.mul %[[T1]], %[[K]]
// CHECK-NEXT:    return %[[Y]], %[[DX]], %[[DG]], %[[DB]]
shard.grid @mesh(shape = 1x2x1)
func.func @main(%x: tensor<8x4x3x3xf32> {loom.input = "x"}, %dy: tensor<8x4x3x3xf32> {loom.input = "dy"},
                %g: tensor<4xf32> {loom.param = "g"}, %b: tensor<4xf32> {loom.param = "b"})
    -> (tensor<8x4x3x3xf32> {loom.output = "y"}, tensor<8x4x3x3xf32> {loom.output = "dx"},
        tensor<4xf32> {loom.output = "dg"}, tensor<4xf32> {loom.output = "db"}) {
  %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<8x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4x3x3xf32>
  %dx, %dg, %db = loom.batch_norm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64} : (tensor<8x4x3x3xf32>, tensor<8x4x3x3xf32>, tensor<4xf32>) -> (tensor<8x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %y, %dx, %dg, %db : tensor<8x4x3x3xf32>, tensor<8x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// bf16 operands are converted once and the statistics kept in f32; results
// go back to bf16. Only the used gradient is built (here the scale's: no
// input or bias gradient, whose ops propagation would leave unannotated).
// CHECK-LABEL: func.func @main
// CHECK:         %[[XF:.*]] = loom.convert %arg0 to f32 : tensor<4x2x2xbf16> -> tensor<4x2x2xf32>
// CHECK-NEXT:    loom.reduce_sum %[[XF]] axes [0, 2] {keep_dims} : tensor<4x2x2xf32> -> tensor<1x2x1xf32>
// CHECK:         %[[XHAT:.*]] = loom.mul %{{.*}}, %{{.*}} : (tensor<4x2x2xf32>, tensor<1x2x1xf32>) -> tensor<4x2x2xf32>
// CHECK:         %[[Y:.*]] = loom.convert %{{.*}} to bf16 : tensor<4x2x2xf32> -> tensor<4x2x2xbf16>
// CHECK-NEXT:    %[[DYF:.*]] = loom.convert %arg1 to f32
// CHECK-NEXT:    %[[DYX:.*]] = loom.mul %[[DYF]], %[[XHAT]]
// CHECK-NEXT:    %[[S:.*]] = loom.reduce_sum %[[DYX]] axes [0, 2] {keep_dims}
// CHECK-NEXT:    %[[DG:.*]] = loom.reshape %[[S]] [2]
// CHECK-NEXT:    %[[DGB:.*]] = loom.convert %[[DG]] to bf16 : tensor<2xf32> -> tensor<2xbf16>
// CHECK-NEXT:    return %[[Y]], %[[DGB]]
shard.grid @mesh(shape = 1x2x1)
func.func @main(%x: tensor<4x2x2xbf16> {loom.input = "x"}, %dy: tensor<4x2x2xbf16> {loom.input = "dy"},
                %g: tensor<2xbf16> {loom.input = "g"}, %b: tensor<2xbf16> {loom.input = "b"})
    -> (tensor<4x2x2xbf16> {loom.output = "y"}, tensor<2xbf16> {loom.output = "dg"}) {
  %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<4x2x2xbf16>, tensor<2xbf16>, tensor<2xbf16>) -> tensor<4x2x2xbf16>
  %dx, %dg, %db = loom.batch_norm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64} : (tensor<4x2x2xbf16>, tensor<4x2x2xbf16>, tensor<2xbf16>) -> (tensor<4x2x2xbf16>, tensor<2xbf16>, tensor<2xbf16>)
  return %y, %dg : tensor<4x2x2xbf16>, tensor<2xbf16>
}

// -----

// A backward without its forward builds the statistics itself, before it.
// CHECK-LABEL: func.func @main
// CHECK:         loom.reduce_sum %arg1 axes [0, 2, 3] {keep_dims}
// CHECK:         loom.rsqrt
// CHECK:         loom.reduce_sum %arg0 axes [0, 2, 3] {keep_dims}
// CHECK-NOT:     loom.batch_norm_grad
shard.grid @mesh(shape = 1x2x1)
func.func @main(%dy: tensor<8x4x3x3xf32> {loom.input = "dy"}, %x: tensor<8x4x3x3xf32> {loom.input = "x"},
                %g: tensor<4xf32> {loom.param = "g"}) -> (tensor<4xf32> {loom.output = "db"}) {
  %dx, %dg, %db = loom.batch_norm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64} : (tensor<8x4x3x3xf32>, tensor<8x4x3x3xf32>, tensor<4xf32>) -> (tensor<8x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %db : tensor<4xf32>
}

// -----

// One data-parallel rank keeps the fused ops.
// CHECK-LABEL: func.func @main
// CHECK-NEXT:    loom.batch_norm %arg0, %arg1, %arg2
// CHECK-NOT:     loom.reduce_sum
shard.grid @mesh(shape = 1x1x1)
func.func @main(%x: tensor<8x4x3x3xf32> {loom.input = "x"}, %g: tensor<4xf32> {loom.param = "g"},
                %b: tensor<4xf32> {loom.param = "b"}) -> (tensor<8x4x3x3xf32> {loom.output = "y"}) {
  %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<8x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4x3x3xf32>
  return %y : tensor<8x4x3x3xf32>
}
