// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-mixed-precision{precision=fp16}))'

// Only fp32 and bf16 are precisions.
// expected-error @+1 {{unknown precision 'fp16'; expected fp32 or bf16}}
func.func @main(%p: tensor<4xf32> {loom.param = "p"}) -> (tensor<4xf32> {loom.output = "y"}) {
  %y = loom.relu %p : tensor<4xf32>
  return %y : tensor<4xf32>
}
