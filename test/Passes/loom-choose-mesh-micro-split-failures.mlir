// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-mesh{devices=2 micro=3})'

// The batch must split into dp x micro equal blocks.
// expected-error @+1 {{global batch 8 does not split into dp = 2 x 3 micro-batches; use a global batch that is a multiple of 6}}
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  return %x : tensor<8x4xf32>
}
