// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-partition-data-parallel)'

// Partitioning needs a planned mesh.
// expected-error @+1 {{loom-partition-data-parallel needs a planned mesh and @main (run loom-choose-mesh first)}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
    return %x : tensor<8x4xf32>
  }
}

// -----

// A reshape that folds the batch into another dimension cannot follow a
// smaller batch.
module {
  shard.grid @mesh(shape = 1x4x1)
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<2x16xf32> {loom.output = "y"}) {
    // expected-error @+2 {{loom.reshape: shape has 32 elements but the input has 8}}
    // expected-error @+1 {{after splitting the batch, this op no longer type-checks; the model may mix the batch dimension into others}}
    %y = loom.reshape %x [2, 16] : tensor<8x4xf32> -> tensor<2x16xf32>
    return %y : tensor<2x16xf32>
  }
}
