// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-append-loss{loss=hinge}))'

// An unknown loss names the accepted ones.
// expected-error @+1 {{unknown loss 'hinge'; expected cross_entropy, mse or output}}
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  return %x : tensor<8x4xf32>
}
