// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{optimizer=sgd lr=0.1}, loom-plan{devices=2 bucket-bytes=-1})' | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{optimizer=sgd lr=0.1}, loom-plan{devices=2 local-batch-norm=true bucket-bytes=-1})' | FileCheck %s --check-prefix=LOCAL
// (bucket-bytes=-1: the gradients' sums stay blocking all-reduces here;
// loom-bucket-all-reduces.mlir tests the buckets.)

// A batch norm in a two-rank training step: each rank holds 4 of the 8
// samples, and each of the four per-channel sums is one all-reduce: the mean
// and the centred sum of squares in the forward (scaled by 1/N with N = 8 * 3
// * 3, the whole batch's count, before they are summed), sum(dy) and
// sum(dy * xhat) in the backward, which are also the bias and scale
// gradients (no second all-reduce for them).
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x4x3x3xf32> {loom.input = "x"}
// CHECK-NOT:     loom.batch_norm
// CHECK:         %[[S:.*]] = loom.reduce_sum %{{.*}} axes [0, 2, 3] {keep_dims} : tensor<4x4x3x3xf32> -> tensor<1x4x1x1xf32>
// CHECK-NEXT:    %[[MS:.*]] = loom.scale %[[S]] by 0.013888888888888888
// CHECK-NEXT:    %[[MEAN:.*]] = shard.all_reduce %[[MS]] on @mesh grid_axes = [1] : tensor<1x4x1x1xf32>
// CHECK:         %[[VS:.*]] = loom.scale %{{.*}} by 0.013888888888888888
// CHECK-NEXT:    %[[VAR:.*]] = shard.all_reduce %[[VS]] on @mesh grid_axes = [1] : tensor<1x4x1x1xf32>
// CHECK:         loom.cross_entropy %{{.*}} {count = 8 : i64}
// CHECK-NEXT:    shard.all_reduce
// CHECK:         %[[SDY:.*]] = loom.reduce_sum %{{.*}} axes [0, 2, 3] {keep_dims} : tensor<4x4x3x3xf32>
// CHECK-NEXT:    %[[GSDY:.*]] = shard.all_reduce %[[SDY]] on @mesh grid_axes = [1] : tensor<1x4x1x1xf32>
// CHECK-NEXT:    %[[DB:.*]] = loom.reshape %[[GSDY]] [4]
// CHECK:         %[[SDYX:.*]] = loom.reduce_sum %{{.*}} axes [0, 2, 3] {keep_dims} : tensor<4x4x3x3xf32>
// CHECK-NEXT:    %[[GSDYX:.*]] = shard.all_reduce %[[SDYX]] on @mesh grid_axes = [1] : tensor<1x4x1x1xf32>
// CHECK-NEXT:    %[[DG:.*]] = loom.reshape %[[GSDYX]] [4]
// CHECK:         shard.all_reduce %{{.*}} : tensor<1x4x1x1xf32> -> tensor<1x4x1x1xf32>
// CHECK-NEXT:    loom.sgd
// CHECK-NEXT:    loom.sgd %arg2, %[[DG]]
// CHECK-NEXT:    loom.sgd %arg3, %[[DB]]

// With local-batch-norm the fused ops stay and normalise the local block;
// their scale and bias gradients are all-reduced like any other gradient.
// LOCAL-LABEL: func.func @main
// LOCAL:         loom.batch_norm %{{.*}} : (tensor<4x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x4x3x3xf32>
// LOCAL-NOT:     loom.reduce_sum
// LOCAL:         %{{.*}}, %[[DG:.*]], %[[DB:.*]] = loom.batch_norm_grad
// LOCAL-NEXT:    shard.all_reduce %[[DG]]
// LOCAL-NEXT:    shard.all_reduce %[[DB]]
func.func @main(%x: tensor<8x4x3x3xf32> {loom.input = "x"}, %w: tensor<1x4x1x1xf32> {loom.param = "w"},
                %g: tensor<4xf32> {loom.param = "g"}, %b: tensor<4xf32> {loom.param = "b"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  %h = loom.mul %x, %w : (tensor<8x4x3x3xf32>, tensor<1x4x1x1xf32>) -> tensor<8x4x3x3xf32>
  %y = loom.batch_norm %h, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<8x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4x3x3xf32>
  %r = loom.reduce_mean %y axes [2, 3] : tensor<8x4x3x3xf32> -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
