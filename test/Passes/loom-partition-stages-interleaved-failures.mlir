// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-partition-stages{schedule=interleaved virtual-stages=2})'

// Interleaving needs a multiple of the pipeline devices in micro-batches.
// expected-error @+1 {{pp = 2, 3 micro-batch(es): the interleaved schedule needs a number of micro-batches that is a multiple of the 2 pipeline devices, got 3}}
module {
  shard.grid @mesh(shape = 2x1x1x3) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
  func.func @main(%x: tensor<6x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
    %l = loom.reduce_sum %x axes [0, 1] : tensor<6x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Each of the pp x chunks stages needs a layer, found in the op names.
module {
  shard.grid @mesh(shape = 2x1x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
  // expected-error @+1 {{pp = 2 x 2 chunks needs at least 4 stages' worth of layers: the op names show 2 numbered layers (such as '/h.0/Tanh'); use a smaller pp}}
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
    %0 = loom.tanh %x : tensor<8x4xf32> loc("/h.0/Tanh")
    %1 = loom.tanh %0 : tensor<8x4xf32> loc("/h.1/Tanh")
    %l = loom.reduce_sum %1 axes [0, 1] : tensor<8x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
