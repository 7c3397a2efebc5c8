// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-append-loss{loss=cross_entropy output-name=b}))' | FileCheck %s

// `output-name` picks which graph output the loss is computed from; the other
// outputs are dropped from the results.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[T:[^:]*]]: tensor<8xi64> {loom.target}
// CHECK:         %[[B:.*]] = loom.relu
// CHECK:         loom.cross_entropy %[[B]], %[[T]] : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %y: tensor<8x3xf32> {loom.input = "y"})
    -> (tensor<8x4xf32> {loom.output = "a"}, tensor<8x3xf32> {loom.output = "b"}) {
  %b = loom.relu %y : tensor<8x3xf32>
  return %x, %b : tensor<8x4xf32>, tensor<8x3xf32>
}
