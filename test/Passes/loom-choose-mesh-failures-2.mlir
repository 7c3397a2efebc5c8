// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-mesh{devices=4 pp=2})'

// Pipeline parallelism is not planned yet and says so.
// expected-error @+1 {{pipeline parallelism is not supported yet (pp = 2); use pp=1}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
    return %x : tensor<8x4xf32>
  }
}
