// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-mesh{devices=4 pp=0})'

// The pipeline degree is at least 1.
// expected-error @+1 {{pp must be positive, got 0}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
    return %x : tensor<8x4xf32>
  }
}
