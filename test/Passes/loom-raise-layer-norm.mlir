// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-raise-layer-norm))' | FileCheck %s

// A hand-written layer norm as PyTorch exports it: Pow 2, Sqrt, Div, then
// * gamma + beta, over the last axis.
// CHECK-LABEL: func.func @torch_affine(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK-SAME:    %[[G:[^:]*]]: tensor<8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<8xf32>
// CHECK:         %[[Y:.*]] = loom.layer_norm %[[X]], %[[G]], %[[B]] axis 2 {epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT:     loom.reduce_mean
// CHECK-NOT:     loom.sqrt
// CHECK-NOT:     loom.add
// CHECK:         return %[[Y]]
func.func @torch_affine(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.param = "g"}, %arg2: tensor<8xf32> {loom.param = "b"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %4 = loom.reduce_mean %3 axes [2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %7 = loom.sqrt %6 : tensor<2x4x1xf32>
  %8 = loom.div %1, %7 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %9 = loom.mul %8, %arg1 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %10 = loom.add %9, %arg2 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %10 : tensor<2x4x8xf32>
}

// -----

// Without gamma and beta: a ones scale is created and there is no bias.
// CHECK-LABEL: func.func @no_affine(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK:         %[[ONES:.*]] = loom.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK:         %[[Y:.*]] = loom.layer_norm %[[X]], %[[ONES]] axis 1 {epsilon = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NOT:     loom.div
// CHECK:         return %[[Y]]
func.func @no_affine(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
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

// -----

// The square as d * d, the division as d * reciprocal(sqrt(v)), eps added on
// the left, gamma and beta on the left.
// CHECK-LABEL: func.func @mul_self_reciprocal_commuted(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME:    %[[G:[^:]*]]: tensor<8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<8xf32>
// CHECK:         %[[Y:.*]] = loom.layer_norm %[[X]], %[[G]], %[[B]] axis 1 {epsilon = 9.9999999999999995E-7 : f64}
// CHECK-NOT:     loom.reciprocal
// CHECK:         return %[[Y]]
func.func @mul_self_reciprocal_commuted(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.param = "g"}, %arg2: tensor<8xf32> {loom.param = "b"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.mul %1, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = loom.reduce_mean %2 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %4 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %5 = loom.add %4, %3 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %6 = loom.sqrt %5 : tensor<4x1xf32>
  %7 = loom.reciprocal %6 : tensor<4x1xf32>
  %8 = loom.mul %1, %7 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %9 = loom.mul %arg1, %8 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %10 = loom.add %arg2, %9 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %10 : tensor<4x8xf32>
}

// -----

// rsqrt(v) * d, and beta without gamma: a ones scale and the bias.
// CHECK-LABEL: func.func @rsqrt_bias_only(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<8xf32>
// CHECK:         %[[ONES:.*]] = loom.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK:         %[[Y:.*]] = loom.layer_norm %[[X]], %[[ONES]], %[[B]] axis 1 {epsilon = 1.000000e-03 : f64}
// CHECK-NOT:     loom.rsqrt
// CHECK:         return %[[Y]]
func.func @rsqrt_bias_only(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.param = "b"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %5 = loom.constant dense<1.000000e-03> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %7 = loom.rsqrt %6 : tensor<4x1xf32>
  %8 = loom.mul %7, %1 : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %9 = loom.add %8, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %9 : tensor<4x8xf32>
}

// -----

// Over the two trailing axes, with 1 / sqrt(v) as a division of one, the
// difference computed twice (no CSE) and gamma / beta shaped [1, 4, 8],
// which are reshaped to [4, 8].
// CHECK-LABEL: func.func @two_axes_duplicate_sub(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK-SAME:    %[[G:[^:]*]]: tensor<1x4x8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<1x4x8xf32>
// CHECK-DAG:     %[[GR:.*]] = loom.reshape %[[G]] [4, 8] : tensor<1x4x8xf32> -> tensor<4x8xf32>
// CHECK-DAG:     %[[BR:.*]] = loom.reshape %[[B]] [4, 8] : tensor<1x4x8xf32> -> tensor<4x8xf32>
// CHECK:         %[[Y:.*]] = loom.layer_norm %[[X]], %[[GR]], %[[BR]] axis 1 {epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT:     loom.sub
// CHECK:         return %[[Y]]
func.func @two_axes_duplicate_sub(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<1x4x8xf32> {loom.param = "g"}, %arg2: tensor<1x4x8xf32> {loom.param = "b"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1, 2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %2 = loom.sub %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %3 = loom.mul %2, %1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %4 = loom.reduce_mean %3 axes [1, 2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %7 = loom.sqrt %6 : tensor<2x1x1xf32>
  %8 = loom.constant dense<1.000000e+00> : tensor<f32>
  %9 = loom.div %8, %7 : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %10 = loom.mul %1, %9 : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %11 = loom.mul %10, %arg1 : (tensor<2x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
  %12 = loom.add %11, %arg2 : (tensor<2x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
  return %12 : tensor<2x4x8xf32>
}

// -----

// Negative: the means are over axis 1 of a rank-3 tensor, not trailing axes.
// CHECK-LABEL: func.func @non_trailing_axes(
// CHECK-NOT:     loom.layer_norm
// CHECK:         loom.sqrt
func.func @non_trailing_axes(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
  %1 = loom.sub %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %7 = loom.sqrt %6 : tensor<2x1x8xf32>
  %8 = loom.div %1, %7 : (tensor<2x4x8xf32>, tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  return %8 : tensor<2x4x8xf32>
}

// -----

// Negative: the variance is reduced over other axes than the mean.
// CHECK-LABEL: func.func @variance_other_axes(
// CHECK-NOT:     loom.layer_norm
// CHECK:         loom.sqrt
func.func @variance_other_axes(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %4 = loom.reduce_mean %3 axes [1, 2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %7 = loom.sqrt %6 : tensor<2x1x1xf32>
  %8 = loom.div %1, %7 : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  return %8 : tensor<2x4x8xf32>
}

// -----

// Negative: the variance is also returned (an intermediate with a second use).
// CHECK-LABEL: func.func @intermediate_second_use(
// CHECK-NOT:     loom.layer_norm
// CHECK:         loom.sqrt
func.func @intermediate_second_use(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}, tensor<4x1xf32> {loom.output = "var"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %7 = loom.sqrt %6 : tensor<4x1xf32>
  %8 = loom.div %1, %7 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %8, %4 : tensor<4x8xf32>, tensor<4x1xf32>
}

// -----

// Negative: (x - mean)^3 is not a variance.
// CHECK-LABEL: func.func @cube_not_square(
// CHECK-NOT:     loom.layer_norm
// CHECK:         loom.sqrt
func.func @cube_not_square(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<3.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %7 = loom.sqrt %6 : tensor<4x1xf32>
  %8 = loom.div %1, %7 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %8 : tensor<4x8xf32>
}

// -----

// Negative: the mean subtracted is of another tensor than x.
// CHECK-LABEL: func.func @mean_of_other(
// CHECK-NOT:     loom.layer_norm
// CHECK:         loom.sqrt
func.func @mean_of_other(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<4x8xf32> {loom.input = "z"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg1 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
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

// -----

// Negative: eps is an argument, not a constant.
// CHECK-LABEL: func.func @eps_not_constant(
// CHECK-NOT:     loom.layer_norm
// CHECK:         loom.sqrt
func.func @eps_not_constant(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<f32> {loom.input = "eps"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %6 = loom.add %4, %arg1 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %7 = loom.sqrt %6 : tensor<4x1xf32>
  %8 = loom.div %1, %7 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %8 : tensor<4x8xf32>
}

// -----

// Partly: gamma shaped like all of x ([4, 8], not the normalized [8]) cannot
// be the scale; the normalization is raised and the multiplication stays.
// CHECK-LABEL: func.func @gamma_wrong_shape(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME:    %[[G:[^:]*]]: tensor<4x8xf32>
// CHECK:         %[[ONES:.*]] = loom.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK:         %[[N:.*]] = loom.layer_norm %[[X]], %[[ONES]] axis 1
// CHECK:         %[[Y:.*]] = loom.mul %[[N]], %[[G]]
// CHECK:         return %[[Y]]
func.func @gamma_wrong_shape(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<4x8xf32> {loom.param = "g"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %7 = loom.sqrt %6 : tensor<4x1xf32>
  %8 = loom.div %1, %7 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %9 = loom.mul %8, %arg1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %9 : tensor<4x8xf32>
}

// -----

// Partly: with a bias already folded in, a later * gamma does not fold, since
// (n + beta) * gamma is not n * gamma + beta.
// CHECK-LABEL: func.func @scale_after_bias(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME:    %[[G:[^:]*]]: tensor<8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<8xf32>
// CHECK:         %[[N:.*]] = loom.layer_norm %[[X]], %{{.*}}, %[[B]] axis 1
// CHECK:         %[[Y:.*]] = loom.mul %[[N]], %[[G]]
// CHECK:         return %[[Y]]
func.func @scale_after_bias(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.param = "g"}, %arg2: tensor<8xf32> {loom.param = "b"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.reduce_mean %3 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %7 = loom.sqrt %6 : tensor<4x1xf32>
  %8 = loom.div %1, %7 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %9 = loom.add %8, %arg2 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %10 = loom.mul %9, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %10 : tensor<4x8xf32>
}
