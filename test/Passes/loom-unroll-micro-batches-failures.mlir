// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-unroll-micro-batches)'

// Statistics of the whole batch read back by each sample (a synchronized
// batch norm) would need every micro-batch's forward before any can go on.
shard.grid @mesh(shape = 1x1x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
  %r = loom.reduce_sum %x axes [0] : tensor<2x8xf32> -> tensor<8xf32>
  %s = shard.all_reduce %r on @mesh grid_axes = [3] : tensor<8xf32> -> tensor<8xf32>
  // expected-error @+1 {{'loom.sub' reads a value of one micro-batch and a value combined over all of them (statistics of the whole batch, such as a batch norm's), so the micro-batches cannot run one after another; train without micro-batches (micro=1)}}
  %y = loom.sub %x, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %l = loom.reduce_sum %y axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
  %ls = shard.all_reduce %l on @mesh grid_axes = [3] : tensor<f32> -> tensor<f32>
  return %ls : tensor<f32>
}

// -----

// Only sums accumulate.
shard.grid @mesh(shape = 1x1x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
  %l = loom.reduce_sum %x axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
  // expected-error @+1 {{only sums accumulate over micro-batches, got a max all-reduce}}
  %m = shard.all_reduce %l on @mesh grid_axes = [3] reduction = max : tensor<f32> -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// The micro axis is the innermost of the batch's axes.
shard.grid @mesh(shape = 1x2x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
  %l = loom.reduce_sum %x axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
  // expected-error @+1 {{a collective over the micro-batch axis must have it last (innermost), got grid_axes = [3, 1]}}
  %s = shard.all_reduce %l on @mesh grid_axes = [3, 1] : tensor<f32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A collective the pass cannot write out as local work is refused.
shard.grid @mesh(shape = 1x1x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
  // expected-error @+1 {{'shard.reduce_scatter' over the micro-batch axis is not supported; train without micro-batches (micro=1)}}
  %r = shard.reduce_scatter %x on @mesh grid_axes = [3] scatter_axis = 1 : tensor<2x8xf32> -> tensor<2x4xf32>
  %l = loom.reduce_sum %r axes [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A step must return what is whole over the micro-batches.
shard.grid @mesh(shape = 1x1x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<2x8xf32> {loom.output = "y"}) {
  // expected-error @+1 {{the step returns a value of one micro-batch (a result that is not summed over the batch); train without micro-batches (micro=1)}}
  return %x : tensor<2x8xf32>
}
