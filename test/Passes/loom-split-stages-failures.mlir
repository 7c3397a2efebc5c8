// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-split-stages)'

// Stages without a schedule: loom-partition-stages did not run.
// expected-error @+1 {{pp = 2 but the mesh has no loom.pipeline schedule (run loom-partition-stages first)}}
shard.grid @mesh(shape = 2x1x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
func.func @main(%x: tensor<4x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
  %l = loom.mse %x, %x {count = 16 : i64} : tensor<4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The micro-batch axis is still there: loom-unroll-micro-batches did not run.
// expected-error @+1 {{loom-split-stages needs a pp x dp x tp mesh and a single-block @main (run it after loom-unroll-micro-batches)}}
module {
  shard.grid @mesh(shape = 2x1x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
  func.func @main(%x: tensor<4x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
    %l = loom.mse %x, %x {count = 16 : i64} : tensor<4x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A stage the pipeline does not have.
shard.grid @mesh(shape = 2x1x1) {loom.mesh_axes = ["pp", "dp", "tp"], loom.pipeline = {layers = [array<i64: 0, 0>, array<i64: 1, 1>], order = ["F0 B0", "F0 B0"], schedule = "1f1b", virtual_stages = 1 : i64}}
func.func @main(%x: tensor<4x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
  // expected-error @+1 {{loom.stage = 3 but the pipeline has 2 stages}}
  %l = loom.mse %x, %x {count = 16 : i64, loom.stage = 3 : i64} : tensor<4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A step without a loss.
shard.grid @mesh(shape = 2x1x1) {loom.mesh_axes = ["pp", "dp", "tp"], loom.pipeline = {layers = [array<i64: 0, 0>, array<i64: 1, 1>], order = ["F0 B0", "F0 B0"], schedule = "1f1b", virtual_stages = 1 : i64}}
// expected-error @+1 {{pipeline stages need a training step (its first result the loss)}}
func.func @main(%x: tensor<4x4xf32> {loom.input = "x"}) -> (tensor<4x4xf32> {loom.output = "y"}) {
  %y = loom.relu %x {loom.stage = 1 : i64} : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// A transfer's tag belongs on a send or a receive.
shard.grid @mesh(shape = 2x1x1)
func.func @tagged(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.tag' belongs on a shard.send or shard.recv, as an integer in [0, 32767], got 3 : i64}}
  %y = loom.relu %x {loom.tag = 3 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}
