// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-raise-gelu))' | FileCheck %s

// PyTorch's nn.GELU() as exported: Div by sqrt(2), Erf, Add 1, Mul x, Mul 0.5.
// CHECK-LABEL: func.func @exact_torch(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK:         %[[G:.*]] = loom.gelu %[[X]] : tensor<2x4x8xf32>
// CHECK-NOT:     loom.erf
// CHECK-NOT:     loom.mul
// CHECK:         return %[[G]]
func.func @exact_torch(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<1.41421354> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %2 = loom.erf %1 : tensor<2x4x8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %5 = loom.mul %arg0, %4 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %6 = loom.constant dense<5.000000e-01> : tensor<f32>
  %7 = loom.mul %5, %6 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  return %7 : tensor<2x4x8xf32>
}

// -----

// 0.5 applied first, x * (1/sqrt(2)) instead of the division, and every
// commutative op with its operands swapped.
// CHECK-LABEL: func.func @exact_half_first_commuted(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK:         %[[G:.*]] = loom.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NOT:     loom.erf
// CHECK-NOT:     loom.mul
// CHECK:         return %[[G]]
func.func @exact_half_first_commuted(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<5.000000e-01> : tensor<f32>
  %1 = loom.mul %0, %arg0 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = loom.constant dense<0.707106769> : tensor<f32>
  %3 = loom.mul %2, %arg0 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = loom.erf %3 : tensor<4x8xf32>
  %5 = loom.constant dense<1.000000e+00> : tensor<f32>
  %6 = loom.add %5, %4 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = loom.mul %6, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %7 : tensor<4x8xf32>
}

// -----

// 0.5 grouped with (1 + erf) rather than with x; constants as splats of
// other shapes that do not broadcast the result beyond x.
// CHECK-LABEL: func.func @exact_half_inside_splats(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK:         %[[G:.*]] = loom.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NOT:     loom.erf
// CHECK:         return %[[G]]
func.func @exact_half_inside_splats(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<1.41421354> : tensor<1xf32>
  %1 = loom.div %arg0, %0 : (tensor<4x8xf32>, tensor<1xf32>) -> tensor<4x8xf32>
  %2 = loom.erf %1 : tensor<4x8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<4x8xf32>
  %4 = loom.add %2, %3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = loom.constant dense<5.000000e-01> : tensor<1x8xf32>
  %6 = loom.mul %5, %4 : (tensor<1x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = loom.mul %arg0, %6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %7 : tensor<4x8xf32>
}

// -----

// nn.GELU(approximate='tanh') as exported: x^3 as x * (x * x), 0.5 last.
// CHECK-LABEL: func.func @tanh_torch(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK:         %[[G:.*]] = loom.gelu %[[X]] {approximate} : tensor<2x4x8xf32>
// CHECK-NOT:     loom.tanh
// CHECK-NOT:     loom.mul
// CHECK:         return %[[G]]
func.func @tanh_torch(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.mul %arg0, %arg0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %1 = loom.mul %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %2 = loom.constant dense<4.471500e-02> : tensor<f32>
  %3 = loom.mul %2, %1 : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %4 = loom.add %arg0, %3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %5 = loom.constant dense<0.797884583> : tensor<f32>
  %6 = loom.mul %5, %4 : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %7 = loom.tanh %6 : tensor<2x4x8xf32>
  %8 = loom.constant dense<1.000000e+00> : tensor<f32>
  %9 = loom.add %8, %7 : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %10 = loom.mul %arg0, %9 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %11 = loom.constant dense<5.000000e-01> : tensor<f32>
  %12 = loom.mul %11, %10 : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %12 : tensor<2x4x8xf32>
}

// -----

// Hugging Face GPT-2 gelu_new as exported: x^3 as Pow, 0.5 applied first.
// CHECK-LABEL: func.func @tanh_gelu_new(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK:         %[[G:.*]] = loom.gelu %[[X]] {approximate} : tensor<2x4x8xf32>
// CHECK-NOT:     loom.pow
// CHECK-NOT:     loom.tanh
// CHECK:         return %[[G]]
func.func @tanh_gelu_new(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<5.000000e-01> : tensor<f32>
  %1 = loom.mul %arg0, %0 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %2 = loom.constant dense<3.000000e+00> : tensor<f32>
  %3 = loom.pow %arg0, %2 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %4 = loom.constant dense<4.471500e-02> : tensor<f32>
  %5 = loom.mul %3, %4 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %6 = loom.add %arg0, %5 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %7 = loom.constant dense<0.797884583> : tensor<f32>
  %8 = loom.mul %6, %7 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %9 = loom.tanh %8 : tensor<2x4x8xf32>
  %10 = loom.constant dense<1.000000e+00> : tensor<f32>
  %11 = loom.add %9, %10 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %12 = loom.mul %1, %11 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %12 : tensor<2x4x8xf32>
}

// -----

// x^3 as (x * x) * x, the cubic term added on the left, 0.5 with (1 + tanh).
// CHECK-LABEL: func.func @tanh_cube_left(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<8xf32>
// CHECK:         %[[G:.*]] = loom.gelu %[[X]] {approximate} : tensor<8xf32>
// CHECK-NOT:     loom.tanh
// CHECK:         return %[[G]]
func.func @tanh_cube_left(%arg0: tensor<8xf32> {loom.input = "x"}) -> (tensor<8xf32> {loom.output = "y"}) {
  %0 = loom.mul %arg0, %arg0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = loom.mul %0, %arg0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = loom.constant dense<4.471500e-02> : tensor<f32>
  %3 = loom.mul %1, %2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %4 = loom.add %3, %arg0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = loom.constant dense<0.797884583> : tensor<f32>
  %6 = loom.mul %4, %5 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %7 = loom.tanh %6 : tensor<8xf32>
  %8 = loom.constant dense<1.000000e+00> : tensor<f32>
  %9 = loom.add %7, %8 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %10 = loom.constant dense<5.000000e-01> : tensor<f32>
  %11 = loom.mul %9, %10 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %12 = loom.mul %11, %arg0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %12 : tensor<8xf32>
}

// -----

// Two GELUs in a row: each one is raised, the second on the first's result.
// CHECK-LABEL: func.func @chained(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<8xf32>
// CHECK:         %[[G1:.*]] = loom.gelu %[[X]] : tensor<8xf32>
// CHECK:         %[[G2:.*]] = loom.gelu %[[G1]] : tensor<8xf32>
// CHECK:         return %[[G2]]
func.func @chained(%arg0: tensor<8xf32> {loom.input = "x"}) -> (tensor<8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<1.41421354> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = loom.erf %1 : tensor<8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = loom.mul %arg0, %4 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %6 = loom.constant dense<5.000000e-01> : tensor<f32>
  %7 = loom.mul %5, %6 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %8 = loom.div %7, %0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %9 = loom.erf %8 : tensor<8xf32>
  %10 = loom.add %9, %3 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %11 = loom.mul %7, %10 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %12 = loom.mul %11, %6 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %12 : tensor<8xf32>
}

// -----

// Negative: 0.6 instead of 0.5 is not GELU.
// CHECK-LABEL: func.func @wrong_half(
// CHECK-NOT:     loom.gelu
// CHECK:         loom.erf
func.func @wrong_half(%arg0: tensor<8xf32> {loom.input = "x"}) -> (tensor<8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<1.41421354> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = loom.erf %1 : tensor<8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = loom.mul %arg0, %4 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %6 = loom.constant dense<6.000000e-01> : tensor<f32>
  %7 = loom.mul %5, %6 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %7 : tensor<8xf32>
}

// -----

// Negative: dividing by 1.4142 is off sqrt(2) by more than the relative 1e-6.
// CHECK-LABEL: func.func @imprecise_sqrt2(
// CHECK-NOT:     loom.gelu
// CHECK:         loom.erf
func.func @imprecise_sqrt2(%arg0: tensor<8xf32> {loom.input = "x"}) -> (tensor<8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<1.414200e+00> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = loom.erf %1 : tensor<8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = loom.mul %arg0, %4 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %6 = loom.constant dense<5.000000e-01> : tensor<f32>
  %7 = loom.mul %5, %6 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %7 : tensor<8xf32>
}

// -----

// Negative: a cubic coefficient of 0.05 instead of 0.044715.
// CHECK-LABEL: func.func @wrong_cubic_coefficient(
// CHECK-NOT:     loom.gelu
// CHECK:         loom.tanh
func.func @wrong_cubic_coefficient(%arg0: tensor<8xf32> {loom.input = "x"}) -> (tensor<8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<3.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = loom.constant dense<5.000000e-02> : tensor<f32>
  %3 = loom.mul %1, %2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %4 = loom.add %arg0, %3 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = loom.constant dense<0.797884583> : tensor<f32>
  %6 = loom.mul %4, %5 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %7 = loom.tanh %6 : tensor<8xf32>
  %8 = loom.constant dense<1.000000e+00> : tensor<f32>
  %9 = loom.add %7, %8 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %10 = loom.mul %arg0, %9 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %11 = loom.constant dense<5.000000e-01> : tensor<f32>
  %12 = loom.mul %10, %11 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %12 : tensor<8xf32>
}

// -----

// Negative: the erf result is also returned, so the ops cannot all go.
// CHECK-LABEL: func.func @intermediate_second_use(
// CHECK-NOT:     loom.gelu
// CHECK:         loom.erf
func.func @intermediate_second_use(%arg0: tensor<8xf32> {loom.input = "x"}) -> (tensor<8xf32> {loom.output = "y"}, tensor<8xf32> {loom.output = "e"}) {
  %0 = loom.constant dense<1.41421354> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = loom.erf %1 : tensor<8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = loom.mul %arg0, %4 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %6 = loom.constant dense<5.000000e-01> : tensor<f32>
  %7 = loom.mul %5, %6 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %7, %2 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Negative: the erf is of x but the product is of another value y.
// CHECK-LABEL: func.func @different_x(
// CHECK-NOT:     loom.gelu
// CHECK:         loom.erf
func.func @different_x(%arg0: tensor<8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.input = "y"}) -> (tensor<8xf32> {loom.output = "z"}) {
  %0 = loom.constant dense<1.41421354> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = loom.erf %1 : tensor<8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = loom.mul %arg1, %4 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %6 = loom.constant dense<5.000000e-01> : tensor<f32>
  %7 = loom.mul %5, %6 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %7 : tensor<8xf32>
}

// -----

// Negative: a 0.5 splat of shape 4x8 broadcasts the result beyond x (8).
// CHECK-LABEL: func.func @broadcast_beyond_x(
// CHECK-NOT:     loom.gelu
// CHECK:         loom.erf
func.func @broadcast_beyond_x(%arg0: tensor<8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<1.41421354> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = loom.erf %1 : tensor<8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = loom.mul %arg0, %4 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %6 = loom.constant dense<5.000000e-01> : tensor<4x8xf32>
  %7 = loom.mul %5, %6 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %7 : tensor<4x8xf32>
}

// -----

// Negative: a 0.5 that is not a splat (one element differs).
// CHECK-LABEL: func.func @not_a_splat(
// CHECK-NOT:     loom.gelu
// CHECK:         loom.erf
func.func @not_a_splat(%arg0: tensor<2xf32> {loom.input = "x"}) -> (tensor<2xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<1.41421354> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %2 = loom.erf %1 : tensor<2xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %5 = loom.mul %arg0, %4 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %6 = loom.constant dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf32>
  %7 = loom.mul %5, %6 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %7 : tensor<2xf32>
}
