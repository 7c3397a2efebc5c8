// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-fold-slice-grads))' | FileCheck %s

// Sums that are not a tiling stay as they are, without diagnostics.

// A gap: only two of three windows are read.
// CHECK-LABEL: func.func @gap(
// CHECK-NOT:     loom.concat
// CHECK:         loom.add
func.func @gap(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>, %like: tensor<2x12xf32>) -> tensor<2x12xf32> {
  %0 = loom.slice_grad %a, %like axes [1] starts [0] ends [4] steps [1] : (tensor<2x4xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
  %1 = loom.slice_grad %b, %like axes [1] starts [8] ends [12] steps [1] : (tensor<2x4xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
  %2 = loom.add %0, %1 : (tensor<2x12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
  return %2 : tensor<2x12xf32>
}

// -----

// Overlapping windows (the same piece read twice) must be added.
// CHECK-LABEL: func.func @overlap(
// CHECK-NOT:     loom.concat
// CHECK:         loom.add
func.func @overlap(%a: tensor<2x4xf32>, %b: tensor<2x6xf32>, %like: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = loom.slice_grad %a, %like axes [1] starts [0] ends [4] steps [1] : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = loom.slice_grad %b, %like axes [1] starts [2] ends [8] steps [1] : (tensor<2x6xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = loom.add %0, %1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %2 : tensor<2x8xf32>
}

// -----

// Windows along different axes.
// CHECK-LABEL: func.func @two_axes(
// CHECK-NOT:     loom.concat
// CHECK:         loom.add
func.func @two_axes(%a: tensor<1x4xf32>, %b: tensor<2x2xf32>, %like: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = loom.slice_grad %a, %like axes [0] starts [0] ends [1] steps [1] : (tensor<1x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = loom.slice_grad %b, %like axes [1] starts [2] ends [4] steps [1] : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = loom.add %0, %1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}

// -----

// Strided windows interleave: not a concat.
// CHECK-LABEL: func.func @strided(
// CHECK-NOT:     loom.concat
// CHECK:         loom.add
func.func @strided(%a: tensor<2xf32>, %b: tensor<2xf32>, %like: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.slice_grad %a, %like axes [0] starts [0] ends [4] steps [2] : (tensor<2xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = loom.slice_grad %b, %like axes [0] starts [1] ends [4] steps [2] : (tensor<2xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = loom.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
