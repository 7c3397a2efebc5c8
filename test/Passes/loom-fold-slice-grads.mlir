// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-fold-slice-grads))' | FileCheck %s

// The q/k/v split of a fused projection: three windows tiling axis 2, summed
// in autodiff's order (last piece first), become one concat in window order.
// CHECK-LABEL: func.func @qkv(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<2x3x4xbf16>, %[[K:[^:]*]]: tensor<2x3x4xbf16>, %[[V:[^:]*]]: tensor<2x3x4xbf16>
// CHECK-NEXT:    %[[C:.*]] = loom.concat %[[Q]], %[[K]], %[[V]] axis 2 : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3x4xbf16>) -> tensor<2x3x12xbf16>
// CHECK-NEXT:    return %[[C]]
func.func @qkv(%dq: tensor<2x3x4xbf16>, %dk: tensor<2x3x4xbf16>, %dv: tensor<2x3x4xbf16>, %like: tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16> {
  %v = loom.slice_grad %dv, %like axes [2] starts [8] ends [12] steps [1] : (tensor<2x3x4xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  %k = loom.slice_grad %dk, %like axes [2] starts [4] ends [8] steps [1] : (tensor<2x3x4xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  %s = loom.add %v, %k : (tensor<2x3x12xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  %q = loom.slice_grad %dq, %like axes [2] starts [0] ends [4] steps [1] : (tensor<2x3x4xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  %t = loom.add %s, %q : (tensor<2x3x12xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  return %t : tensor<2x3x12xbf16>
}

// -----

// Two pieces of unequal size along axis 0; an end past the dim is clamped.
// CHECK-LABEL: func.func @two_pieces(
// CHECK-SAME:    %[[A:[^:]*]]: tensor<2x5xf32>, %[[B:[^:]*]]: tensor<4x5xf32>
// CHECK-NEXT:    %[[C:.*]] = loom.concat %[[A]], %[[B]] axis 0
// CHECK-NEXT:    return %[[C]]
func.func @two_pieces(%a: tensor<2x5xf32>, %b: tensor<4x5xf32>, %like: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %0 = loom.slice_grad %a, %like axes [0] starts [0] ends [2] steps [1] : (tensor<2x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  %1 = loom.slice_grad %b, %like axes [0] starts [2] ends [100] steps [1] : (tensor<4x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  %2 = loom.add %0, %1 : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  return %2 : tensor<6x5xf32>
}

// -----

// A tiling summed with another value (a residual branch): the tiling is a
// concat, the other addition stays.
// CHECK-LABEL: func.func @inside_other_sum(
// CHECK-SAME:    %[[A:[^:]*]]: tensor<2x4xf32>, %[[B:[^:]*]]: tensor<2x4xf32>, %[[R:[^:]*]]: tensor<2x8xf32>
// CHECK-NEXT:    %[[C:.*]] = loom.concat %[[A]], %[[B]] axis 1
// CHECK-NEXT:    %[[S:.*]] = loom.add %[[C]], %[[R]]
// CHECK-NEXT:    return %[[S]]
func.func @inside_other_sum(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>, %r: tensor<2x8xf32>, %like: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = loom.slice_grad %a, %like axes [1] starts [0] ends [4] steps [1] : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = loom.slice_grad %b, %like axes [1] starts [4] ends [8] steps [1] : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = loom.add %0, %1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = loom.add %2, %r : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %3 : tensor<2x8xf32>
}
