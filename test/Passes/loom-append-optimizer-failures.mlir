// RUN: not loom-opt %s --pass-pipeline='builtin.module(func.func(loom-append-optimizer{optimizer=adam}))' 2>&1 | FileCheck %s

// The optimizer is an enum option: an unknown one is refused when the
// pipeline is parsed, before any IR is touched.
// CHECK: for the --optimizer option: Cannot find option named 'adam'!
func.func @main(%w: tensor<3xf32> {loom.param = "w"}) -> (tensor<f32> {loom.loss}, tensor<3xf32> {loom.grad = "w"}) {
  %l = loom.constant dense<1.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<3xf32>
}
