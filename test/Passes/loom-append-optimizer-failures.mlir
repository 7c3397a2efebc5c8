// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-append-optimizer{optimizer=adam}))'

// An unknown optimizer names the accepted ones.
// expected-error @+1 {{unknown optimizer 'adam'; expected adamw or sgd}}
func.func @main(%w: tensor<3xf32> {loom.param = "w"}) -> (tensor<f32> {loom.loss}, tensor<3xf32> {loom.grad = "w"}) {
  %l = loom.constant dense<1.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<3xf32>
}
