// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-mesh{devices=4 tp=2})'

// Tensor parallelism is not planned yet and says so.
// expected-error @+1 {{tensor and pipeline parallelism are not supported yet (tp = 2, pp = 1); use tp=1,pp=1}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
    return %x : tensor<8x4xf32>
  }
}
