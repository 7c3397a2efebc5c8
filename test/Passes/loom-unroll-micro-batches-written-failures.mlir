// RUN: loom-opt %s -verify-diagnostics --pass-pipeline='builtin.module(loom-unroll-micro-batches{written-micro-batches=1})'

// A shortened step keeps the first micro-batch and the last at least.
// expected-error @+1 {{written-micro-batches must be 0 (all) or at least 2, got 1}}
module {
  shard.grid @mesh(shape = 1x1x1x4) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
  func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
    %l = loom.reduce_sum %x axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
    %s = shard.all_reduce %l on @mesh grid_axes = [3] : tensor<f32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
