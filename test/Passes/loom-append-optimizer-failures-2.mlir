// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-append-optimizer))'

// Without gradients there is nothing to update.
// expected-error @+1 {{loom-append-optimizer expects the loss and parameter gradients as results (run loom-autodiff first)}}
func.func @main(%w: tensor<3xf32> {loom.param = "w"}) -> (tensor<f32> {loom.loss}) {
  %l = loom.constant dense<1.0> : tensor<f32>
  return %l : tensor<f32>
}
