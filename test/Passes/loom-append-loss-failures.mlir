// RUN: not loom-opt %s --pass-pipeline='builtin.module(func.func(loom-append-loss{loss=hinge}))' 2>&1 | FileCheck %s

// The loss is an enum option: an unknown one is refused when the pipeline
// is parsed.
// CHECK: for the --loss option: Cannot find option named 'hinge'!
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  return %x : tensor<8x4xf32>
}
