// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-append-running-stats))'

// The statistics are state of a training step.
// expected-error @+1 {{loom-append-running-stats expects a training step (run loom-append-optimizer first)}}
func.func @main(%x: tensor<4x3xf32> {loom.input = "x"}) -> (tensor<4x3xf32> {loom.output = "y"}) {
  return %x : tensor<4x3xf32>
}

// -----

// One value per channel has no unbiased variance.
func.func @main(%x: tensor<1x3xf32> {loom.input = "x"}, %g: tensor<3xf32> {loom.param = "g"},
                %b: tensor<3xf32> {loom.param = "b"}) -> (tensor<f32> {loom.loss}) {
  // expected-error @+1 {{'loom.batch_norm' op cannot update the running variance from 1 value per channel (the unbiased variance needs two, as torch.nn.BatchNorm says); train with a larger batch}}
  %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64, momentum = 0.9 : f64, running_mean = "m", running_var = "v"} : (tensor<1x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3xf32>
  %l = loom.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Two batch norms cannot update one statistic.
func.func @main(%x: tensor<4x3xf32> {loom.input = "x"}, %g: tensor<3xf32> {loom.param = "g"},
                %b: tensor<3xf32> {loom.param = "b"}) -> (tensor<f32> {loom.loss}) {
  %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64, momentum = 0.9 : f64, running_mean = "m", running_var = "v"} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  // expected-error @+1 {{'loom.batch_norm' op running statistic 'm' is also updated by another batch norm; give each its own}}
  %z = loom.batch_norm %y, %g, %b {epsilon = 1.0e-05 : f64, momentum = 0.9 : f64, running_mean = "m", running_var = "v2"} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = loom.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
