// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-shard-data-parallel)'

// The split needs a planned mesh.
// expected-error @+1 {{loom-shard-data-parallel needs a planned mesh and the entry function (run loom-choose-mesh first)}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
    return %x : tensor<8x4xf32>
  }
}

// -----

// A batch that does not split evenly over dp is refused at the boundary.
module {
  shard.grid @mesh(shape = 1x4x1)
  // expected-error @+1 {{the batch of input 'x' (6) does not split over dp = 4}}
  func.func @main(%x: tensor<6x4xf32> {loom.input = "x"}) -> (tensor<6x4xf32> {loom.output = "y"}) {
    return %x : tensor<6x4xf32>
  }
}
