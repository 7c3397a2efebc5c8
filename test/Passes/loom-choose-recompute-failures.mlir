// RUN: loom-opt %s -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-recompute{mode=some})'

// The mode is one of the four.
// expected-error @+1 {{loom-choose-recompute: unknown mode 'some'; expected none, selective, full or auto}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
    %l = loom.reduce_sum %x axes [0, 1] : tensor<8x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
