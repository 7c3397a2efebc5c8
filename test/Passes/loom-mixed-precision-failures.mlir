// RUN: not loom-opt %s --pass-pipeline='builtin.module(func.func(loom-mixed-precision{precision=fp16}))' 2>&1 | FileCheck %s

// Only fp32 and bf16 are precisions (an enum option, checked when the
// pipeline is parsed).
// CHECK: for the --precision option: Cannot find option named 'fp16'!
func.func @main(%p: tensor<4xf32> {loom.param = "p"}) -> (tensor<4xf32> {loom.output = "y"}) {
  %y = loom.relu %p : tensor<4xf32>
  return %y : tensor<4xf32>
}
