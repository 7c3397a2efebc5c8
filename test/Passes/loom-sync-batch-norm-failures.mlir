// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-sync-batch-norm)'

// The rewrite needs the planned mesh to know the data-parallel degree.
// expected-error @+1 {{loom-sync-batch-norm needs a planned mesh and the entry function (run loom-choose-mesh first)}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
    return %x : tensor<8x4xf32>
  }
}

// -----

// The mesh must be pp x dp x tp.
module {
  // expected-error @+1 {{expected a pp x dp x tp mesh, got rank 1}}
  shard.grid @mesh(shape = 2)
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
    return %x : tensor<8x4xf32>
  }
}

// -----

// A batch with no elements per channel has no statistics to share.
module {
  shard.grid @mesh(shape = 1x2x1)
  func.func @main(%x: tensor<8x4x0xf32> {loom.input = "x"}, %g: tensor<4xf32> {loom.param = "g"},
                  %b: tensor<4xf32> {loom.param = "b"}) -> (tensor<8x4x0xf32> {loom.output = "y"}) {
    // expected-error @+1 {{'loom.batch_norm' op cannot synchronise the statistics of an empty batch (input 'tensor<8x4x0xf32>'); use loomc --local-batchnorm}}
    %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<8x4x0xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4x0xf32>
    return %y : tensor<8x4x0xf32>
  }
}
