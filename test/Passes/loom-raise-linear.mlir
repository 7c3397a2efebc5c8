// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-raise-linear))' | FileCheck %s

// nn.Linear on a 3-D input as PyTorch exports it: MatMul by the transposed
// weight initializer, then Add(bias, product).
// CHECK-LABEL: func.func @torch_linear_3d(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<6xf32>
// CHECK-SAME:    %[[W:[^:]*]]: tensor<8x6xf32>
// CHECK:         %[[Y:.*]] = loom.linear %[[X]], %[[W]], %[[B]] : (tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
// CHECK-NOT:     loom.matmul
// CHECK-NOT:     loom.add
// CHECK:         return %[[Y]]
func.func @torch_linear_3d(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<6xf32> {loom.param = "bias"}, %arg2: tensor<8x6xf32> {loom.param = "onnx::MatMul_6"}) -> (tensor<2x4x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg2 : (tensor<2x4x8xf32>, tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %1 = loom.add %arg1, %0 : (tensor<6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %1 : tensor<2x4x6xf32>
}

// -----

// Gemm (transB = 1) as imported: the transpose becomes transpose_weight.
// CHECK-LABEL: func.func @gemm(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x8xf32>
// CHECK-SAME:    %[[W:[^:]*]]: tensor<6x8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<6xf32>
// CHECK:         %[[Y:.*]] = loom.linear %[[X]], %[[W]], %[[B]] {transpose_weight} : (tensor<2x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<2x6xf32>
// CHECK-NOT:     loom.matmul
// CHECK:         return %[[Y]]
func.func @gemm(%arg0: tensor<2x8xf32> {loom.input = "x"}, %arg1: tensor<6x8xf32> {loom.param = "weight"}, %arg2: tensor<6xf32> {loom.param = "bias"}) -> (tensor<2x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg1 {transpose_rhs} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
  %1 = loom.add %0, %arg2 : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  return %1 : tensor<2x6xf32>
}

// -----

// A bias shaped [1, 6] (Gemm's C of shape 1 x N) is reshaped to [6].
// CHECK-LABEL: func.func @bias_leading_one(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x8xf32>
// CHECK-SAME:    %[[W:[^:]*]]: tensor<6x8xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<1x6xf32>
// CHECK:         %[[BR:.*]] = loom.reshape %[[B]] [6] : tensor<1x6xf32> -> tensor<6xf32>
// CHECK:         %[[Y:.*]] = loom.linear %[[X]], %[[W]], %[[BR]] {transpose_weight}
// CHECK:         return %[[Y]]
func.func @bias_leading_one(%arg0: tensor<2x8xf32> {loom.input = "x"}, %arg1: tensor<6x8xf32> {loom.param = "weight"}, %arg2: tensor<1x6xf32> {loom.param = "bias"}) -> (tensor<2x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg1 {transpose_rhs} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
  %1 = loom.add %0, %arg2 : (tensor<2x6xf32>, tensor<1x6xf32>) -> tensor<2x6xf32>
  return %1 : tensor<2x6xf32>
}

// -----

// Negative: a matmul with transpose_lhs (Gemm transA = 1) has no linear form.
// CHECK-LABEL: func.func @transpose_lhs(
// CHECK-NOT:     loom.linear
// CHECK:         loom.matmul
func.func @transpose_lhs(%arg0: tensor<8x2xf32> {loom.input = "x"}, %arg1: tensor<8x6xf32> {loom.param = "w"}, %arg2: tensor<6xf32> {loom.param = "b"}) -> (tensor<2x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg1 {transpose_lhs} : (tensor<8x2xf32>, tensor<8x6xf32>) -> tensor<2x6xf32>
  %1 = loom.add %0, %arg2 : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  return %1 : tensor<2x6xf32>
}

// -----

// Negative: a bias per row and column ([2, 6]) is not a bias vector.
// CHECK-LABEL: func.func @bias_full_shape(
// CHECK-NOT:     loom.linear
// CHECK:         loom.matmul
func.func @bias_full_shape(%arg0: tensor<2x8xf32> {loom.input = "x"}, %arg1: tensor<8x6xf32> {loom.param = "w"}, %arg2: tensor<2x6xf32> {loom.param = "b"}) -> (tensor<2x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg1 : (tensor<2x8xf32>, tensor<8x6xf32>) -> tensor<2x6xf32>
  %1 = loom.add %0, %arg2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  return %1 : tensor<2x6xf32>
}

// -----

// Negative: a scalar-like bias [1] broadcast over 6 columns is not [N].
// CHECK-LABEL: func.func @bias_broadcast_scalar(
// CHECK-NOT:     loom.linear
// CHECK:         loom.matmul
func.func @bias_broadcast_scalar(%arg0: tensor<2x8xf32> {loom.input = "x"}, %arg1: tensor<8x6xf32> {loom.param = "w"}, %arg2: tensor<1xf32> {loom.param = "b"}) -> (tensor<2x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg1 : (tensor<2x8xf32>, tensor<8x6xf32>) -> tensor<2x6xf32>
  %1 = loom.add %0, %arg2 : (tensor<2x6xf32>, tensor<1xf32>) -> tensor<2x6xf32>
  return %1 : tensor<2x6xf32>
}

// -----

// Negative: the bias [3, 1, 6] broadcasts the result to another shape.
// CHECK-LABEL: func.func @bias_grows_result(
// CHECK-NOT:     loom.linear
// CHECK:         loom.matmul
func.func @bias_grows_result(%arg0: tensor<2x8xf32> {loom.input = "x"}, %arg1: tensor<8x6xf32> {loom.param = "w"}, %arg2: tensor<3x1x6xf32> {loom.param = "b"}) -> (tensor<3x2x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg1 : (tensor<2x8xf32>, tensor<8x6xf32>) -> tensor<2x6xf32>
  %1 = loom.add %0, %arg2 : (tensor<2x6xf32>, tensor<3x1x6xf32>) -> tensor<3x2x6xf32>
  return %1 : tensor<3x2x6xf32>
}

// -----

// Negative: the matmul result is also returned.
// CHECK-LABEL: func.func @matmul_second_use(
// CHECK-NOT:     loom.linear
// CHECK:         loom.matmul
func.func @matmul_second_use(%arg0: tensor<2x8xf32> {loom.input = "x"}, %arg1: tensor<8x6xf32> {loom.param = "w"}, %arg2: tensor<6xf32> {loom.param = "b"}) -> (tensor<2x6xf32> {loom.output = "y"}, tensor<2x6xf32> {loom.output = "p"}) {
  %0 = loom.matmul %arg0, %arg1 : (tensor<2x8xf32>, tensor<8x6xf32>) -> tensor<2x6xf32>
  %1 = loom.add %0, %arg2 : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  return %1, %0 : tensor<2x6xf32>, tensor<2x6xf32>
}

// -----

// Hugging Face's Conv1D flattens the tokens around the GEMM: the linear
// reads the 3-D input, so the sequence stays a dimension of its own.
// CHECK-LABEL: func.func @conv1d_flattened(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK-SAME:    %[[W:[^:]*]]: tensor<8x6xf32>
// CHECK-SAME:    %[[B:[^:]*]]: tensor<6xf32>
// CHECK:         %[[Y:.*]] = loom.linear %[[X]], %[[W]], %[[B]] : (tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
// CHECK-NOT:     loom.reshape
// CHECK:         return %[[Y]]
func.func @conv1d_flattened(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<8x6xf32> {loom.param = "weight"}, %arg2: tensor<6xf32> {loom.param = "bias"}) -> (tensor<2x4x6xf32> {loom.output = "y"}) {
  %0 = loom.reshape %arg0 [-1, 8] : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %1 = loom.matmul %0, %arg1 : (tensor<8x8xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %2 = loom.add %arg2, %1 : (tensor<6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %3 = loom.reshape %2 [2, 4, 6] : tensor<8x6xf32> -> tensor<2x4x6xf32>
  return %3 : tensor<2x4x6xf32>
}

// -----

// The flattened result has another user: the reshapes stay.
// CHECK-LABEL: func.func @flattened_result_used(
// CHECK:         %[[F:.*]] = loom.reshape %{{.*}} [-1, 8]
// CHECK:         %[[Y:.*]] = loom.linear %[[F]]
// CHECK:         loom.reshape %[[Y]] [2, 4, 6]
func.func @flattened_result_used(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<8x6xf32> {loom.param = "weight"}, %arg2: tensor<6xf32> {loom.param = "bias"}) -> (tensor<2x4x6xf32> {loom.output = "y"}, tensor<8x6xf32> {loom.output = "flat"}) {
  %0 = loom.reshape %arg0 [-1, 8] : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %1 = loom.matmul %0, %arg1 : (tensor<8x8xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %2 = loom.add %arg2, %1 : (tensor<6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %3 = loom.reshape %2 [2, 4, 6] : tensor<8x6xf32> -> tensor<2x4x6xf32>
  return %3, %2 : tensor<2x4x6xf32>, tensor<8x6xf32>
}
