// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-recompute))' | FileCheck %s

// The GELU of group 0 runs again just before its first backward reader
// (the weight gradient of the second linear, after the loss gradient and
// the input gradient's matmul, which do not read it); that reader takes
// the clone, the forward linear keeps the original. The loss of group 1
// is read by no backward op: it is left alone. The marks are gone.
// CHECK-LABEL: func.func @main
// CHECK:         %[[H:.*]] = loom.linear %arg0
// CHECK-NEXT:    %[[A:.*]] = loom.gelu %[[H]] {approximate} :
// CHECK-NEXT:    %[[Y:.*]] = loom.linear %[[A]], %arg3, %arg4
// CHECK-NEXT:    %[[L:.*]] = loom.mse %[[Y]], %arg5 :
// CHECK-NEXT:    %[[GY:.*]] = loom.mse_grad %[[Y]], %arg5
// CHECK-NEXT:    %[[GA:.*]] = loom.matmul %[[GY]], %arg3 {transpose_rhs}
// CHECK-NEXT:    %[[A2:.*]] = loom.gelu %[[H]] {approximate, loom.recomputed} :
// CHECK-NEXT:    loom.matmul %[[A2]], %[[GY]] {transpose_lhs}
// CHECK-NOT:     loom.recompute =
// CHECK:         return %[[L]],
func.func @main(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<8x8xf32> {loom.param = "h.0.fc1.weight"}, %arg2: tensor<8xf32> {loom.param = "h.0.fc1.bias"}, %arg3: tensor<8x8xf32> {loom.param = "h.0.fc2.weight"}, %arg4: tensor<8xf32> {loom.param = "h.0.fc2.bias"}, %arg5: tensor<4x8xf32> {loom.target}) -> (tensor<f32> {loom.loss}, tensor<8x8xf32> {loom.param = "h.0.fc1.weight"}, tensor<8xf32> {loom.param = "h.0.fc1.bias"}, tensor<8x8xf32> {loom.param = "h.0.fc2.weight"}, tensor<8xf32> {loom.param = "h.0.fc2.bias"}) {
  %0 = loom.linear %arg0, %arg1, %arg2 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = loom.gelu %0 {approximate, loom.recompute = 0} : tensor<4x8xf32>
  %2 = loom.linear %1, %arg3, %arg4 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %3 = loom.mse %2, %arg5 {loom.recompute = 1} : tensor<4x8xf32> -> tensor<f32>
  %4 = loom.mse_grad %2, %arg5 : tensor<4x8xf32>
  %5 = loom.matmul %4, %arg3 {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %6 = loom.matmul %1, %4 {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %7 = loom.sum_to %4, %arg4 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %8 = loom.gelu_grad %5, %0 {approximate} : tensor<4x8xf32>
  %9 = loom.matmul %arg0, %8 {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %10 = loom.sum_to %8, %arg2 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %11 = loom.sgd %arg1, %9 {dampening = 0.000000e+00 : f64, lr = 1.000000e-03 : f64, momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64} : tensor<8x8xf32>
  %12 = loom.sgd %arg2, %10 {dampening = 0.000000e+00 : f64, lr = 1.000000e-03 : f64, momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64} : tensor<8xf32>
  %13 = loom.sgd %arg3, %6 {dampening = 0.000000e+00 : f64, lr = 1.000000e-03 : f64, momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64} : tensor<8x8xf32>
  %14 = loom.sgd %arg4, %7 {dampening = 0.000000e+00 : f64, lr = 1.000000e-03 : f64, momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64} : tensor<8xf32>
  return %3, %11, %12, %13, %14 : tensor<f32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>
}
