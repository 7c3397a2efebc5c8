// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-append-loss{output-name=z}))'

// An unknown output name lists the outputs there are.
// expected-error @+1 {{no graph output named 'z' (outputs: y)}}
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  return %x : tensor<8x4xf32>
}

// -----

// A scalar output has no class dimension for cross-entropy.
// expected-error @+1 {{cross_entropy needs an output with a class dimension, got a scalar}}
func.func @main(%x: tensor<f32> {loom.input = "x"}) -> (tensor<f32> {loom.output = "z"}) {
  return %x : tensor<f32>
}
