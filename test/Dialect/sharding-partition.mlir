// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation{traversal=forward},shard-partition),canonicalize)' | FileCheck %s

// Partition of loom ops whose leading (batch) dimension is split over mesh
// axis 1 of 2 devices: local shapes, and the all-reduces of partial sums.
shard.grid @mesh(shape = 1x2x1)

// A linear layer keeps its weight and bias whole; only the rows split.
// CHECK-LABEL: func.func @linear_rows
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<16xf32>
// CHECK-NEXT:    %[[Y:.*]] = loom.linear %[[X]], %[[W]], %[[B]] {transpose_weight} : {{.*}} -> tensor<2x3x16xf32>
// CHECK-NOT:     shard.all_reduce
// CHECK:         return %[[Y]]
func.func @linear_rows(%x: tensor<4x3x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x3x16xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x3x8xf32>
  %y = loom.linear %xs, %w, %b {transpose_weight} : (tensor<4x3x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x3x16xf32>
  return %y : tensor<4x3x16xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// The weight gradient contracts the split rows: a partial sum, all-reduced.
// CHECK-LABEL: func.func @weight_gradient
// CHECK:         %[[G:.*]] = loom.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<2x3x16xf32>, tensor<2x3x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT:    %[[S:.*]] = shard.all_reduce %[[G]] on @mesh grid_axes = [1] : tensor<16x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT:    return %[[S]]
func.func @weight_gradient(%dy: tensor<4x3x16xf32>, %x: tensor<4x3x8xf32>) -> tensor<16x8xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %dys = shard.shard %dy to %s : tensor<4x3x16xf32>
  %xs = shard.shard %x to %s : tensor<4x3x8xf32>
  %g = loom.matmul %dys, %xs {transpose_lhs} : (tensor<4x3x16xf32>, tensor<4x3x8xf32>) -> tensor<16x8xf32>
  return %g : tensor<16x8xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// Attention splits over batch and heads, never over the sequence of keys.
// CHECK-LABEL: func.func @attention_batch
// CHECK:         loom.attention {{.*}} -> tensor<2x2x8x16xf32>
// CHECK-NOT:     shard.all_reduce
func.func @attention_batch(%q: tensor<4x2x8x16xf32>, %k: tensor<4x2x8x16xf32>, %v: tensor<4x2x8x16xf32>) -> tensor<4x2x8x16xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %qs = shard.shard %q to %s : tensor<4x2x8x16xf32>
  %ks = shard.shard %k to %s : tensor<4x2x8x16xf32>
  %vs = shard.shard %v to %s : tensor<4x2x8x16xf32>
  %o = loom.attention %qs, %ks, %vs {causal, scale = 0.25 : f64} : (tensor<4x2x8x16xf32>, tensor<4x2x8x16xf32>, tensor<4x2x8x16xf32>) -> tensor<4x2x8x16xf32>
  return %o : tensor<4x2x8x16xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// Layer norm normalises each row locally; its backward sums the scale and
// bias gradients over the rows.
// CHECK-LABEL: func.func @layer_norm_and_grad
// CHECK:         loom.layer_norm {{.*}} -> tensor<2x8xf32>
// CHECK-NEXT:    %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = loom.layer_norm_grad {{.*}} -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT:    shard.all_reduce %[[DG]] on @mesh grid_axes = [1]
// CHECK-NEXT:    shard.all_reduce %[[DB]] on @mesh grid_axes = [1]
// CHECK-NOT:     shard.all_reduce %[[DX]]
func.func @layer_norm_and_grad(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8xf32>
  %dys = shard.shard %dy to %s : tensor<4x8xf32>
  %y = loom.layer_norm %xs, %g, %b axis 1 {epsilon = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %dx, %dg, %db = loom.layer_norm_grad %dys, %xs, %g axis 1 {epsilon = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %y, %dx, %dg, %db : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// The losses divide by the whole batch's rows (`count`), so the summed
// shards are the global mean and its gradient.
// CHECK-LABEL: func.func @cross_entropy_mean
// CHECK:         %[[L:.*]] = loom.cross_entropy %{{.*}}, %{{.*}} {count = 12 : i64} : (tensor<2x3x10xf32>, tensor<2x3xi64>) -> tensor<f32>
// CHECK-NEXT:    %[[S:.*]] = shard.all_reduce %[[L]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// CHECK-NEXT:    %[[G:.*]] = loom.cross_entropy_grad %{{.*}}, %{{.*}} {count = 12 : i64} : {{.*}} -> tensor<2x3x10xf32>
// CHECK-NEXT:    return %[[S]], %[[G]]
func.func @cross_entropy_mean(%logits: tensor<4x3x10xf32>, %t: tensor<4x3xi64>) -> (tensor<f32>, tensor<4x3x10xf32>) {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %ls = shard.shard %logits to %s : tensor<4x3x10xf32>
  %ts = shard.shard %t to %s : tensor<4x3xi64>
  %l = loom.cross_entropy %ls, %ts : (tensor<4x3x10xf32>, tensor<4x3xi64>) -> tensor<f32>
  %g = loom.cross_entropy_grad %ls, %ts : (tensor<4x3x10xf32>, tensor<4x3xi64>) -> tensor<4x3x10xf32>
  return %l, %g : tensor<f32>, tensor<4x3x10xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// A mean over the split batch is a sum of the local means, scaled.
// CHECK-LABEL: func.func @mean_over_batch
// CHECK:         %[[M:.*]] = loom.reduce_mean %{{.*}} axes [0] : tensor<2x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %[[S:.*]] = shard.all_reduce %[[M]] on @mesh grid_axes = [1]
// CHECK-NEXT:    loom.scale %[[S]] by 5.000000e-01
func.func @mean_over_batch(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8xf32>
  %m = loom.reduce_mean %xs axes [0] : tensor<4x8xf32> -> tensor<8xf32>
  return %m : tensor<8xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// A reshape that merges the batch with the sequence splits the merged
// dimension; its shape is rewritten to the local one.
// CHECK-LABEL: func.func @reshape_merges_batch
// CHECK:         loom.reshape %{{.*}} [6, 8] : tensor<2x3x8xf32> -> tensor<6x8xf32>
func.func @reshape_merges_batch(%x: tensor<4x3x8xf32>) -> tensor<12x8xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x3x8xf32>
  %y = loom.reshape %xs [12, 8] : tensor<4x3x8xf32> -> tensor<12x8xf32>
  return %y : tensor<12x8xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// A convolution's filter gradient sums over the split batch.
// CHECK-LABEL: func.func @conv_filter_gradient
// CHECK:         %[[G:.*]] = loom.conv2d_grad_filter {{.*}} : (tensor<2x8x6x6xf32>, tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf32>
// CHECK-NEXT:    shard.all_reduce %[[G]] on @mesh grid_axes = [1]
func.func @conv_filter_gradient(%dy: tensor<4x8x6x6xf32>, %x: tensor<4x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %dys = shard.shard %dy to %s : tensor<4x8x6x6xf32>
  %xs = shard.shard %x to %s : tensor<4x3x8x8xf32>
  %dw = loom.conv2d_grad_filter %dys, %xs, %w strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 : (tensor<4x8x6x6xf32>, tensor<4x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf32>
  return %dw : tensor<8x3x3x3xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// A uniform constant split by its user shrinks to the local shape.
// CHECK-LABEL: func.func @constant_uniform
// CHECK:         loom.constant dense<3.000000e+00> : tensor<1x2xf32>
func.func @constant_uniform(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x2xf32>
  %c = loom.constant dense<3.0> : tensor<2x2xf32>
  %y = loom.add %xs, %c : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----
shard.grid @mesh(shape = 1x2x1)

// A constant with different values per row (a mask baked at the export
// batch) is whole on every device, which keeps its block.
// CHECK-LABEL: func.func @constant_not_uniform
// CHECK:         %[[C:.*]] = loom.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    %[[B:.*]] = shard.all_slice %[[C]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<2x2xf32> -> tensor<1x2xf32>
// CHECK-NEXT:    loom.add %{{.*}}, %[[B]]
func.func @constant_not_uniform(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x2xf32>
  %c = loom.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %y = loom.add %xs, %c : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
