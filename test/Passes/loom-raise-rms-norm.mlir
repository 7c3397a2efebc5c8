// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-raise-rms-norm))' | FileCheck %s

// LLaMA's RMSNorm as PyTorch 1.13 exports it: rsqrt as Div(1, Sqrt), then
// x * r, then weight * (x * r).
// CHECK-LABEL: func.func @llama_torch(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK-SAME:    %[[W:[^:]*]]: tensor<8xf32>
// CHECK:         %[[Y:.*]] = loom.rms_norm %[[X]], %[[W]] axis 2 {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT:     loom.reduce_mean
// CHECK-NOT:     loom.mul
// CHECK:         return %[[Y]]
func.func @llama_torch(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.param = "weight"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %2 = loom.reduce_mean %1 axes [2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %5 = loom.sqrt %4 : tensor<2x4x1xf32>
  %6 = loom.constant dense<1.000000e+00> : tensor<f32>
  %7 = loom.div %6, %5 : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %8 = loom.mul %arg0, %7 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %9 = loom.mul %arg1, %8 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %9 : tensor<2x4x8xf32>
}

// -----

// rsqrt(v) on the left of x, the square as x * x, eps on the left, weight on
// the right.
// CHECK-LABEL: func.func @rsqrt_mul_self(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME:    %[[W:[^:]*]]: tensor<8xf32>
// CHECK:         %[[Y:.*]] = loom.rms_norm %[[X]], %[[W]] axis 1 {epsilon = 1.000000e-05 : f64}
// CHECK-NOT:     loom.rsqrt
// CHECK:         return %[[Y]]
func.func @rsqrt_mul_self(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.param = "weight"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.mul %arg0, %arg0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = loom.reduce_mean %0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %2 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %3 = loom.add %2, %1 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %4 = loom.rsqrt %3 : tensor<4x1xf32>
  %5 = loom.mul %4, %arg0 : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = loom.mul %5, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// -----

// reciprocal(sqrt(v)), and a weight shaped [1, 1, 8] reshaped to [8].
// CHECK-LABEL: func.func @reciprocal_weight_leading_ones(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK-SAME:    %[[W:[^:]*]]: tensor<1x1x8xf32>
// CHECK:         %[[WR:.*]] = loom.reshape %[[W]] [8] : tensor<1x1x8xf32> -> tensor<8xf32>
// CHECK:         %[[Y:.*]] = loom.rms_norm %[[X]], %[[WR]] axis 2
// CHECK-NOT:     loom.reciprocal
// CHECK:         return %[[Y]]
func.func @reciprocal_weight_leading_ones(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<1x1x8xf32> {loom.param = "weight"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %2 = loom.reduce_mean %1 axes [2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %5 = loom.sqrt %4 : tensor<2x4x1xf32>
  %6 = loom.reciprocal %5 : tensor<2x4x1xf32>
  %7 = loom.mul %arg0, %6 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %8 = loom.mul %7, %arg1 : (tensor<2x4x8xf32>, tensor<1x1x8xf32>) -> tensor<2x4x8xf32>
  return %8 : tensor<2x4x8xf32>
}

// -----

// x / sqrt(v) without a weight: a ones scale is created.
// CHECK-LABEL: func.func @div_no_weight(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK:         %[[ONES:.*]] = loom.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK:         %[[Y:.*]] = loom.rms_norm %[[X]], %[[ONES]] axis 1 {epsilon = 9.9999999999999995E-7 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NOT:     loom.div
// CHECK:         return %[[Y]]
func.func @div_no_weight(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = loom.reduce_mean %1 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = loom.sqrt %4 : tensor<4x1xf32>
  %6 = loom.div %arg0, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// -----

// Negative: the mean is over axis 0, not the trailing axes.
// CHECK-LABEL: func.func @non_trailing_axes(
// CHECK-NOT:     loom.rms_norm
// CHECK:         loom.sqrt
func.func @non_trailing_axes(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = loom.reduce_mean %1 axes [0] {keep_dims} : tensor<4x8xf32> -> tensor<1x8xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %5 = loom.sqrt %4 : tensor<1x8xf32>
  %6 = loom.div %arg0, %5 : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// -----

// Negative: the squared tensor (z) is not the normalized one (x).
// CHECK-LABEL: func.func @square_of_other(
// CHECK-NOT:     loom.rms_norm
// CHECK:         loom.sqrt
func.func @square_of_other(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<4x8xf32> {loom.input = "z"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg1, %0 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = loom.reduce_mean %1 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = loom.sqrt %4 : tensor<4x1xf32>
  %6 = loom.div %arg0, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// -----

// Negative: the reciprocal square root is also returned (a second use).
// CHECK-LABEL: func.func @intermediate_second_use(
// CHECK-NOT:     loom.rms_norm
// CHECK:         loom.rsqrt
func.func @intermediate_second_use(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}, tensor<4x1xf32> {loom.output = "r"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = loom.reduce_mean %1 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = loom.rsqrt %4 : tensor<4x1xf32>
  %6 = loom.mul %arg0, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %6, %5 : tensor<4x8xf32>, tensor<4x1xf32>
}

// -----

// Negative: a negative eps is not an epsilon.
// CHECK-LABEL: func.func @negative_eps(
// CHECK-NOT:     loom.rms_norm
// CHECK:         loom.rsqrt
func.func @negative_eps(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = loom.reduce_mean %1 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = loom.constant dense<-1.000000e-01> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = loom.rsqrt %4 : tensor<4x1xf32>
  %6 = loom.mul %arg0, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// -----

// Negative: x^3 is not a square.
// CHECK-LABEL: func.func @cube_not_square(
// CHECK-NOT:     loom.rms_norm
// CHECK:         loom.rsqrt
func.func @cube_not_square(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<3.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = loom.reduce_mean %1 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = loom.rsqrt %4 : tensor<4x1xf32>
  %6 = loom.mul %arg0, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// -----

// Partly: a weight shaped like all of x cannot be the scale; the
// normalization is raised and the multiplication stays.
// CHECK-LABEL: func.func @weight_wrong_shape(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME:    %[[W:[^:]*]]: tensor<4x8xf32>
// CHECK:         %[[N:.*]] = loom.rms_norm %[[X]], %{{.*}} axis 1
// CHECK:         %[[Y:.*]] = loom.mul %[[N]], %[[W]]
// CHECK:         return %[[Y]]
func.func @weight_wrong_shape(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<4x8xf32> {loom.param = "weight"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = loom.reduce_mean %1 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = loom.rsqrt %4 : tensor<4x1xf32>
  %6 = loom.mul %arg0, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %7 = loom.mul %6, %arg1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %7 : tensor<4x8xf32>
}

// -----

// Negative: normalizing x - mean(x) over the same axis is a layer norm, left
// to loom-raise-layer-norm.
// CHECK-LABEL: func.func @layer_norm_tail(
// CHECK-NOT:     loom.rms_norm
// CHECK:         loom.sqrt
func.func @layer_norm_tail(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %7 = loom.sqrt %6 : tensor<4x1xf32>
  %8 = loom.div %1, %7 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %8 : tensor<4x8xf32>
}
