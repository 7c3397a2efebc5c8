// RUN: loom-opt %s -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-mixed-precision))'

// The pass rewrites the forward graph; gradients derive from it afterwards.
// expected-error @+1 {{loom-mixed-precision runs before loom-autodiff; result #1 is already a gradient}}
func.func @main(%p: tensor<4xf32> {loom.param = "p"}, %t: tensor<4xf32> {loom.target}) -> (tensor<f32> {loom.loss}, tensor<4xf32> {loom.grad = "p"}) {
  %l = loom.mse %p, %t : tensor<4xf32> -> tensor<f32>
  %g = loom.mse_grad %p, %t : tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

