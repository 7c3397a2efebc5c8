// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-regather-parameters))' | FileCheck %s

// A ZeRO-3 weight gathered over dp for the forward matmul is gathered again
// just before the backward's first use; its bf16 copy is made again too.
// CHECK-LABEL: func.func @step
// CHECK:         %[[W:.*]] = shard.all_gather %arg1 on @mesh grid_axes = [1] gather_axis = 0
// CHECK-NEXT:    %[[WB:.*]] = loom.convert %[[W]]
// CHECK-NEXT:    %[[Y:.*]] = loom.matmul %arg0, %[[WB]]
// CHECK:         loom.mse
// CHECK-NEXT:    %[[G:.*]] = loom.mul
// CHECK-NEXT:    %[[W2:.*]] = shard.all_gather %arg1 on @mesh grid_axes = [1] gather_axis = 0
// CHECK-NEXT:    %[[WB2:.*]] = loom.convert %[[W2]]
// CHECK-NEXT:    loom.matmul %[[G]], %[[WB2]] {transpose_rhs}
shard.grid @mesh(shape = 1x2x1)
func.func @step(%x: tensor<4x4xbf16>, %w: tensor<2x4xf32>, %t: tensor<4x4xbf16>) -> (tensor<f32> {loom.loss}, tensor<4x4xbf16>) {
  %wf = shard.all_gather %w on @mesh grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  %wb = loom.convert %wf to bf16 : tensor<4x4xf32> -> tensor<4x4xbf16>
  %y = loom.matmul %x, %wb : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %l = loom.mse %y, %t : tensor<4x4xbf16> -> tensor<f32>
  %g = loom.mul %y, %t : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %dx = loom.matmul %g, %wb {transpose_rhs} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  return %l, %dx : tensor<f32>, tensor<4x4xbf16>
}

// -----

// Left alone: a gather only the backward reads, one over tp (a split that
// the ILP costs as one gather a step), and a function without a loss.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-2: shard.all_gather
// CHECK-NOT:     shard.all_gather
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-1: shard.all_gather
// CHECK-NOT:     shard.all_gather
shard.grid @mesh(shape = 1x2x2)
func.func @kept(%x: tensor<4x4xf32>, %w: tensor<2x4xf32>, %v: tensor<2x4xf32>, %t: tensor<4x4xf32>) -> (tensor<f32> {loom.loss}, tensor<4x4xf32>) {
  %vf = shard.all_gather %v on @mesh grid_axes = [2] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  %y = loom.matmul %x, %vf : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = loom.mse %y, %t : tensor<4x4xf32> -> tensor<f32>
  %wf = shard.all_gather %w on @mesh grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  %d = loom.matmul %y, %wf : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %dv = loom.matmul %d, %vf : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %l, %dv : tensor<f32>, tensor<4x4xf32>
}
func.func @forward(%x: tensor<4x4xf32>, %w: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %wf = shard.all_gather %w on @mesh grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  %y = loom.matmul %x, %wf : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %z = loom.matmul %y, %wf : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y, %z : tensor<4x4xf32>, tensor<4x4xf32>
}
