// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-mesh{devices=3})'

// The batch must split evenly over the data-parallel ranks.
// expected-error @+1 {{global batch 8 of input 'x' is not divisible by dp = 3; use a global batch that is a multiple of 3}}
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  return %x : tensor<8x4xf32>
}

// -----

// A model whose output folds the batch into another dimension has a target
// whose dimension 0 is not the batch: refused rather than misaligned.
// expected-error @+1 {{the loss target has 4 samples in dimension 0 but the batch is 6; the model's output must keep the batch as its first dimension}}
func.func @main(%x: tensor<6x4xf32> {loom.input = "x"}, %t: tensor<4x6xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %l = loom.mse %t, %t : tensor<4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A scalar input has no batch to split.
// expected-error @+1 {{input 'x' has no batch dimension (a scalar); the model's inputs and loss target must have the batch as dimension 0}}
func.func @main(%x: tensor<f32> {loom.input = "x"}) -> (tensor<f32> {loom.output = "y"}) {
  return %x : tensor<f32>
}
