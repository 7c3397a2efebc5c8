// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-sink-all-reduces))' | FileCheck %s

// A bf16 partial sum is widened before it is summed.
// CHECK-LABEL: func.func @sum_after_widening
// CHECK:         %[[C:.*]] = loom.convert %arg0 to f32 : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[S:.*]] = shard.all_reduce %[[C]] on @mesh grid_axes = [1] : tensor<4x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    return %[[S]]
shard.grid @mesh(shape = 1x2x1)
func.func @sum_after_widening(%g: tensor<4x3xbf16>) -> tensor<4x3xf32> {
  %r = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<4x3xbf16> -> tensor<4x3xbf16>
  %f = loom.convert %r to f32 : tensor<4x3xbf16> -> tensor<4x3xf32>
  return %f : tensor<4x3xf32>
}

// -----

// Two gradients of a weight used twice (transposed once) meet in one sum.
// CHECK-LABEL: func.func @tied_weight_gradients
// CHECK:         %[[T:.*]] = loom.transpose %arg1 [1, 0]
// CHECK-NEXT:    %[[A:.*]] = loom.add %arg0, %[[T]]
// CHECK-NEXT:    %[[S:.*]] = shard.all_reduce %[[A]] on @mesh grid_axes = [1]
// CHECK-NEXT:    return %[[S]]
shard.grid @mesh(shape = 1x2x1)
func.func @tied_weight_gradients(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %ra = shard.all_reduce %a on @mesh grid_axes = [1] : tensor<4x3xf32> -> tensor<4x3xf32>
  %rb = shard.all_reduce %b on @mesh grid_axes = [1] : tensor<3x4xf32> -> tensor<3x4xf32>
  %t = loom.transpose %rb [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
  %s = loom.add %ra, %t : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %s : tensor<4x3xf32>
}

// -----

// An all-reduce with another user, or one that is not a sum, stays put.
// CHECK-LABEL: func.func @shared_or_max_stays
// CHECK:         %[[R:.*]] = shard.all_reduce %arg0
// CHECK-NEXT:    %[[S:.*]] = loom.scale %[[R]]
// CHECK:         %[[M:.*]] = shard.all_reduce %arg1 on @mesh grid_axes = [1] reduction = max
// CHECK-NEXT:    loom.scale %[[M]]
shard.grid @mesh(shape = 1x2x1)
func.func @shared_or_max_stays(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %r = shard.all_reduce %a on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
  %s = loom.scale %r by 2.0 : tensor<4xf32>
  %m = shard.all_reduce %b on @mesh grid_axes = [1] reduction = max : tensor<4xf32> -> tensor<4xf32>
  %t = loom.scale %m by 2.0 : tensor<4xf32>
  return %r, %s, %t : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A bf16 gradient that ZeRO updates block by block is widened before it is
// summed: the sum and its slice happen in f32.
// CHECK-LABEL: func.func @widen_sliced_sum
// CHECK-NEXT:    %[[C:.*]] = loom.convert %arg0 to f32 : tensor<8x4xbf16> -> tensor<8x4xf32>
// CHECK-NEXT:    %[[R:.*]] = shard.all_reduce %[[C]] on @mesh grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %[[S:.*]] = shard.all_slice %[[R]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    return %[[S]]
shard.grid @mesh(shape = 1x2x1)
func.func @widen_sliced_sum(%g: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  %r = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<8x4xbf16> -> tensor<8x4xbf16>
  %s = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x4xbf16> -> tensor<4x4xbf16>
  %c = loom.convert %s to f32 : tensor<4x4xbf16> -> tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}
