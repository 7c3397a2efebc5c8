// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(loom-partition-data-parallel)' | FileCheck %s

// The batch of inputs and target shrinks by dp, types are re-inferred through
// the graph, and the gradient and loss are averaged over the dp axis before
// the optimizer and the return.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x4xf32> {loom.input = "x"}
// CHECK-SAME:    %[[T:[^:]*]]: tensor<2xi64> {loom.target}
// CHECK:         %[[Y:.*]] = loom.matmul %[[X]], %{{.*}} {transpose_rhs} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
// CHECK:         %[[R:.*]] = loom.reshape %[[Y]] [0, -1] : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK:         %[[G:.*]] = loom.matmul %{{.*}}, %[[X]] {transpose_lhs} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK:         %[[S:.*]] = shard.all_reduce %[[G]] on @mesh grid_axes = [1] : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK:         %[[A:.*]] = loom.scale %[[S]] by 2.500000e-01 : tensor<3x4xf32>
// CHECK:         loom.sgd %{{.*}}, %[[A]]
// CHECK:         %[[LS:.*]] = shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// CHECK:         %[[L:.*]] = loom.scale %[[LS]] by 2.500000e-01 : tensor<f32>
// CHECK:         return %[[L]]
shard.grid @mesh(shape = 1x4x1)
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %w: tensor<3x4xf32> {loom.param = "w"},
                %t: tensor<8xi64> {loom.target}) -> (tensor<f32> {loom.loss}, tensor<3x4xf32> {loom.param = "w"}) {
  %y = loom.matmul %x, %w {transpose_rhs} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %r = loom.reshape %y [0, -1] : tensor<8x3xf32> -> tensor<8x3xf32>
  %l = loom.cross_entropy %r, %t : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  %dy = loom.cross_entropy_grad %r, %t : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<8x3xf32>
  %dw = loom.matmul %dy, %x {transpose_lhs} : (tensor<8x3xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %w2 = loom.sgd %w, %dw {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<3x4xf32>
  return %l, %w2 : tensor<f32>, tensor<3x4xf32>
}

// -----

// A one-rank mesh leaves the step unchanged.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    tensor<8x4xf32> {loom.input = "x"}
// CHECK-NOT:     shard.all_reduce
shard.grid @mesh(shape = 1x1x1)
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %t: tensor<8xi64> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %l = loom.cross_entropy %x, %t : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
