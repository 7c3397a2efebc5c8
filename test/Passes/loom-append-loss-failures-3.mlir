// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-append-loss))'

// An output with no elements has no loss.
// expected-error @+1 {{the output the loss is computed from has no elements (shape 'tensor<8x0xf32>')}}
func.func @main(%x: tensor<8x0xf32> {loom.input = "x"}) -> (tensor<8x0xf32> {loom.output = "y"}) {
  return %x : tensor<8x0xf32>
}

// -----

// Integer outputs have no loss.
// expected-error @+1 {{the loss needs a static-shaped f32 output, got 'tensor<8x2xi64>'}}
func.func @main(%x: tensor<8x2xi64> {loom.input = "x"}) -> (tensor<8x2xi64> {loom.output = "y"}) {
  return %x : tensor<8x2xi64>
}
