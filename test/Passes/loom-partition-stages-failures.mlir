// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-partition-stages{schedule=zb-h2})'

// The schedule is one the planner knows.
// expected-error @+1 {{unknown pipeline schedule 'zb-h2'; expected gpipe, 1f1b, interleaved or zb-h1}}
module {
  shard.grid @mesh(shape = 2x1x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
    %l = loom.reduce_sum %x axes [0, 1] : tensor<8x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
