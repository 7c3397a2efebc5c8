// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-autodiff))' | FileCheck %s

// A linear layer with bias and relu: the weight gradient contracts over the
// batch, the bias gradient sums the broadcast batch away, and relu's backward
// masks with the forward input. The input x gets no gradient.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:[^:]*]]: tensor<8x4xf32> {loom.input = "x"}
// CHECK-SAME:    %[[W:[^:]*]]: tensor<3x4xf32> {loom.param = "w"}
// CHECK-SAME:    %[[B:[^:]*]]: tensor<3xf32> {loom.param = "b"}
// CHECK-SAME:    %[[T:[^:]*]]: tensor<8xi64> {loom.target}
// CHECK-SAME:    -> (tensor<f32> {loom.loss}, tensor<3x4xf32> {loom.grad = "w"}, tensor<3xf32> {loom.grad = "b"})
// CHECK:         %[[MM:.*]] = loom.matmul %[[X]], %[[W]] {transpose_rhs}
// CHECK:         %[[H:.*]] = loom.add %[[MM]], %[[B]]
// CHECK:         %[[Y:.*]] = loom.relu %[[H]]
// CHECK:         %[[L:.*]] = loom.cross_entropy %[[Y]], %[[T]]
// CHECK:         %[[DY:.*]] = loom.cross_entropy_grad %[[Y]], %[[T]]
// CHECK-NOT:     loom.mul
// CHECK:         %[[DH:.*]] = loom.relu_grad %[[DY]], %[[H]]
// CHECK:         %[[DB:.*]] = loom.sum_to %[[DH]], %[[B]] : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK:         %[[DW:.*]] = loom.matmul %[[DH]], %[[X]] {transpose_lhs} : (tensor<8x3xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
// CHECK-NOT:     loom.matmul
// CHECK:         return %[[L]], %[[DW]], %[[DB]]
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %w: tensor<3x4xf32> {loom.param = "w"},
                %b: tensor<3xf32> {loom.param = "b"}, %t: tensor<8xi64> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %0 = loom.matmul %x, %w {transpose_rhs} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %1 = loom.add %0, %b : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %2 = loom.relu %1 : tensor<8x3xf32>
  %3 = loom.cross_entropy %2, %t : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// A parameter used twice accumulates both gradients; tanh and sigmoid use
// their forward outputs; an unused parameter gets a zero gradient.
// CHECK-LABEL: func.func @main
// CHECK:         %[[TH:.*]] = loom.tanh %[[P:[^ ]*]]
// CHECK:         %[[SG:.*]] = loom.sigmoid %[[P]]
// CHECK-NOT:     loom.constant dense<1.0
// CHECK:         %[[D2:.*]] = loom.sigmoid_grad %{{.*}}, %[[SG]]
// CHECK:         %[[D1:.*]] = loom.tanh_grad %{{.*}}, %[[TH]]
// CHECK:         %[[ACC:.*]] = loom.add %[[D2]], %[[D1]]
// CHECK:         %[[ZERO:.*]] = loom.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK:         return %{{.*}}, %[[ACC]], %[[ZERO]]
func.func @main(%p: tensor<4xf32> {loom.param = "p"}, %unused: tensor<2xf32> {loom.param = "u"},
                %t: tensor<4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %0 = loom.tanh %p : tensor<4xf32>
  %1 = loom.sigmoid %p : tensor<4xf32>
  %2 = loom.mul %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = loom.mse %2, %t : tensor<4xf32> -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// Reshapes are undone on the way back, keeping the batch dimension flexible.
// CHECK-LABEL: func.func @main
// CHECK:         loom.reshape %{{.*}} [0, -1] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK:         loom.reshape %{{.*}} [0, -1, 4] : tensor<2x12xf32> -> tensor<2x3x4xf32>
func.func @main(%p: tensor<2x3x4xf32> {loom.param = "p"}, %t: tensor<2x12xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %0 = loom.reshape %p [0, -1] : tensor<2x3x4xf32> -> tensor<2x12xf32>
  %1 = loom.mse %0, %t : tensor<2x12xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// The gradient of a conversion converts back to the source precision (an
// f32 parameter read in bf16 gets an f32 gradient); integer sources have
// none.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    -> (tensor<f32> {loom.loss}, tensor<3xf32> {loom.grad = "w"})
// CHECK:         %[[M:.*]] = loom.convert %arg0 to bf16 : tensor<2x3xi64> -> tensor<2x3xbf16>
// CHECK:         %[[G:.*]] = loom.mse_grad
// CHECK:         %[[DW:.*]] = loom.mul %[[G]], %[[M]] : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK:         %[[S:.*]] = loom.sum_to %[[DW]], %{{.*}} : (tensor<2x3xbf16>, tensor<3xbf16>) -> tensor<3xbf16>
// CHECK:         %[[DWF:.*]] = loom.convert %[[S]] to f32 : tensor<3xbf16> -> tensor<3xf32>
// CHECK:         return %{{.*}}, %[[DWF]] : tensor<f32>, tensor<3xf32>
func.func @main(%ids: tensor<2x3xi64> {loom.input = "mask"}, %w: tensor<3xf32> {loom.param = "w"},
                %t: tensor<2x3xbf16> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %m = loom.convert %ids to bf16 : tensor<2x3xi64> -> tensor<2x3xbf16>
  %wb = loom.convert %w to bf16 : tensor<3xf32> -> tensor<3xbf16>
  %y = loom.mul %wb, %m : (tensor<3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
  %l = loom.mse %y, %t : tensor<2x3xbf16> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Rounding to float16 passes the gradient through (PyTorch's cast); sin's
// gradient multiplies by cos of its input.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[P:[^:]*]]: tensor<4xf32> {loom.param = "p"}
// CHECK:         %[[R:.*]] = loom.round_f16 %[[P]]
// CHECK:         %[[S:.*]] = loom.sin %[[R]]
// CHECK:         %[[DS:.*]] = loom.mse_grad
// CHECK:         %[[C:.*]] = loom.cos %[[R]]
// CHECK:         %[[DR:.*]] = loom.mul %[[DS]], %[[C]]
// CHECK-NOT:     loom.round_f16
// CHECK:         return %{{.*}}, %[[DR]]
func.func @main(%p: tensor<4xf32> {loom.param = "p"}, %t: tensor<4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %0 = loom.round_f16 %p : tensor<4xf32>
  %1 = loom.sin %0 : tensor<4xf32>
  %2 = loom.mse %1, %t : tensor<4xf32> -> tensor<f32>
  return %2 : tensor<f32>
}
