// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-fuse-reduce-scatter))' | FileCheck %s
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-fuse-reduce-scatter{data-parallel=false}))' | FileCheck %s --check-prefix=KEEPDP

// A sum that only a slice over the same axes reads is a reduce-scatter.
// CHECK-LABEL: func.func @fused
// CHECK-NEXT:    %[[S:.*]] = shard.reduce_scatter %arg0 on @mesh grid_axes = [1] scatter_axis = 1 : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT:    return %[[S]]
shard.grid @mesh(shape = 1x2x1)
func.func @fused(%g: tensor<8x4xf32>) -> tensor<8x2xf32> {
  %r = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
  %s = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x2xf32>
  return %s : tensor<8x2xf32>
}

// -----

// Left alone: the sum is read whole as well, and a slice over other axes.
// CHECK-LABEL: func.func @kept
// CHECK:         shard.all_reduce
// CHECK:         shard.all_slice
// CHECK:         shard.all_reduce
// CHECK:         shard.all_slice
// CHECK-NOT:     shard.reduce_scatter
shard.grid @mesh(shape = 1x2x2)
func.func @kept(%g: tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x4xf32>, tensor<4x4xf32>) {
  %r = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
  %s = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x2xf32>
  %r2 = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
  %s2 = shard.all_slice %r2 on @mesh grid_axes = [2] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  return %s, %r, %s2 : tensor<8x2xf32>, tensor<8x4xf32>, tensor<4x4xf32>
}

// -----

// Sums over dp stay whole with data-parallel=false (ZeRO-1 keeps whole
// gradients); sums over tp are fused all the same.
// CHECK-LABEL:  func.func @axes
// CHECK-COUNT-2:  shard.reduce_scatter
// KEEPDP-LABEL: func.func @axes
// KEEPDP:         shard.all_reduce %arg0 on @mesh grid_axes = [1]
// KEEPDP:         shard.all_slice
// KEEPDP:         shard.reduce_scatter %arg0 on @mesh grid_axes = [2]
shard.grid @mesh(shape = 1x2x2)
func.func @axes(%g: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<8x2xf32>) {
  %r = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
  %s = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %r2 = shard.all_reduce %g on @mesh grid_axes = [2] : tensor<8x4xf32> -> tensor<8x4xf32>
  %s2 = shard.all_slice %r2 on @mesh grid_axes = [2] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x2xf32>
  return %s, %s2 : tensor<4x4xf32>, tensor<8x2xf32>
}
