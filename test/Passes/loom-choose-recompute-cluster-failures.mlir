// RUN: loom-opt %s -verify-diagnostics --pass-pipeline='builtin.module(loom-choose-recompute{mode=auto cluster=tpu:4})'

// The recomputation is costed on the cluster's device: a spec that does
// not parse is an error.
// expected-error @+1 {{loom-choose-recompute: bad cluster spec 'tpu:4': unknown preset 'tpu'}}
module {
  func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.loss}) {
    %l = loom.reduce_sum %x axes [0, 1] : tensor<8x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
