// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-mesh{devices=3})'

// The batch must split evenly over the data-parallel ranks.
// expected-error @+1 {{global batch 8 of input 'x' is not divisible by dp = 3; use a global batch that is a multiple of 3}}
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  return %x : tensor<8x4xf32>
}
