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

// Two micro-batches: each pass over the layers (micro-batch 0's forward,
// its backward, micro-batch 1's forward, its backward) gathers the weight
// for itself, so no whole copy lives from one micro-batch to the next.
// CHECK-LABEL: func.func @micro_batches
// CHECK:         %[[W0:.*]] = shard.all_gather %arg4
// CHECK-NEXT:    loom.matmul %arg0, %[[W0]]
// CHECK:         %[[W1:.*]] = shard.all_gather %arg4
// CHECK-NEXT:    loom.matmul %{{.*}}, %[[W1]] {transpose_rhs}
// CHECK:         %[[W2:.*]] = shard.all_gather %arg4
// CHECK-NEXT:    loom.matmul %arg1, %[[W2]]
// CHECK:         %[[W3:.*]] = shard.all_gather %arg4
// CHECK-NEXT:    loom.matmul %{{.*}}, %[[W3]] {transpose_rhs}
// CHECK-NOT:     shard.all_gather
shard.grid @mesh(shape = 1x2x1)
func.func @micro_batches(%x0: tensor<2x4xf32> {loom.input = "x", loom.sample_offset = 0 : i64},
                         %x1: tensor<2x4xf32> {loom.input = "x", loom.sample_offset = 2 : i64},
                         %t0: tensor<2x4xf32> {loom.target, loom.sample_offset = 0 : i64},
                         %t1: tensor<2x4xf32> {loom.target, loom.sample_offset = 2 : i64},
                         %w: tensor<2x4xf32>) -> (tensor<f32> {loom.loss}, tensor<2x4xf32>, tensor<2x4xf32>) {
  %wf = shard.all_gather %w on @mesh grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  %y0 = loom.matmul %x0, %wf : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l0 = loom.mse %y0, %t0 {count = 16 : i64} : tensor<2x4xf32> -> tensor<f32>
  %g0 = loom.mse_grad %y0, %t0 {count = 16 : i64} : tensor<2x4xf32>
  %d0 = loom.matmul %g0, %wf {transpose_rhs} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y1 = loom.matmul %x1, %wf : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l1 = loom.mse %y1, %t1 {count = 16 : i64} : tensor<2x4xf32> -> tensor<f32>
  %l = loom.add %l0, %l1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g1 = loom.mse_grad %y1, %t1 {count = 16 : i64} : tensor<2x4xf32>
  %d1 = loom.matmul %g1, %wf {transpose_rhs} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %l, %d0, %d1 : tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>
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

// -----

// A pipeline device's program (loom-split-stages: no loss, its passes
// interleaved as 1F1B runs them, F0 F1 B0 B1): each micro-batch's forward
// and backward, known by the ops' marks, gathers the weight for itself.
// CHECK-LABEL: func.func @stage
// CHECK:         %[[F0:.*]] = shard.all_gather %arg2
// CHECK-NEXT:    loom.matmul %arg0, %[[F0]] {loom.micro_batch = 0 : i64}
// CHECK-NEXT:    %[[F1:.*]] = shard.all_gather %arg2
// CHECK-NEXT:    loom.matmul %arg1, %[[F1]] {loom.micro_batch = 1 : i64}
// CHECK-NEXT:    %[[B0:.*]] = shard.all_gather %arg2
// CHECK-NEXT:    loom.matmul %{{.*}}, %[[B0]] {loom.backward, loom.micro_batch = 0 : i64, transpose_rhs}
// CHECK-NEXT:    %[[B1:.*]] = shard.all_gather %arg2
// CHECK-NEXT:    loom.matmul %{{.*}}, %[[B1]] {loom.backward, loom.micro_batch = 1 : i64, transpose_rhs}
// CHECK-NOT:     shard.all_gather
shard.grid @mesh(shape = 1x2x1)
func.func @stage(%x0: tensor<2x4xf32>, %x1: tensor<2x4xf32>, %w: tensor<2x4xf32>,
                 %g0: tensor<2x4xf32>, %g1: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %wf = shard.all_gather %w on @mesh grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  %y0 = loom.matmul %x0, %wf {loom.micro_batch = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y1 = loom.matmul %x1, %wf {loom.micro_batch = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %d0 = loom.matmul %g0, %wf {loom.backward, loom.micro_batch = 0 : i64, transpose_rhs} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %d1 = loom.matmul %g1, %wf {loom.backward, loom.micro_batch = 1 : i64, transpose_rhs} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y0, %y1, %d0, %d1 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
