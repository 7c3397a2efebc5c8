// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-mesh{devices=2 micro=3 micro-batch=2})'

// A micro-batch size and a count that disagree are refused, not reconciled.
// expected-error @+1 {{3 micro-batches of 2 sample(s) do not make the 4 samples of each dp rank; give only one of micro-batch and micro}}
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  return %x : tensor<8x4xf32>
}

// -----

// The micro-batch size must divide each rank's block of the batch.
// expected-error @+1 {{a micro-batch of 2 sample(s) does not divide the 5 samples of each dp rank (global batch 10 / dp = 2); use a micro-batch that divides 5}}
func.func @main(%x: tensor<10x4xf32> {loom.input = "x"}) -> (tensor<10x4xf32> {loom.output = "y"}) {
  return %x : tensor<10x4xf32>
}
