// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-autodiff))'

// The function must end in a loss.
// expected-error @+1 {{loom-autodiff expects a function whose only result is the loss (run loom-append-loss first)}}
func.func @main(%p: tensor<4xf32> {loom.param = "p"}) -> (tensor<4xf32> {loom.output = "y"}) {
  return %p : tensor<4xf32>
}

// -----

// An op without a gradient rule on the path to the loss is an error.
func.func @main(%p: tensor<4xf32> {loom.param = "p"}, %l: tensor<f32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  // expected-error @+1 {{loom-autodiff: no gradient rule for 'loom.sum_to'}}
  %0 = loom.sum_to %p, %l : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Without parameters there is nothing to train.
// expected-error @+1 {{the model has no trainable parameters (no float initializers); there is nothing to train}}
func.func @main(%x: tensor<4xf32> {loom.input = "x"}, %t: tensor<4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %0 = loom.mse %x, %t : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
