// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-append-loss))' | FileCheck %s
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-append-loss{loss=mse}))' | FileCheck %s --check-prefix=MSE

// Cross-entropy adds an i64 class-id target shaped like the output minus its
// class dimension; mse adds a target shaped like the output.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:[^:]*]]: tensor<8x4xf32> {loom.input = "x"}
// CHECK-SAME:    %[[T:[^:]*]]: tensor<8xi64> {loom.target}
// CHECK-SAME:    -> (tensor<f32> {loom.loss})
// CHECK:         %[[L:.*]] = loom.cross_entropy %[[X]], %[[T]]
// CHECK-NEXT:    return %[[L]] : tensor<f32>
// MSE-LABEL:   func.func @main
// MSE-SAME:      %[[T:[^:]*]]: tensor<8x4xf32> {loom.target}
// MSE:           loom.mse %{{.*}}, %[[T]] : tensor<8x4xf32> -> tensor<f32>
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}) {
  return %x : tensor<8x4xf32>
}

// -----

// Functions other than @main are left alone.
// CHECK-LABEL: func.func @helper
// CHECK-SAME:    -> tensor<8x4xf32>
// CHECK-NOT:     loom.cross_entropy
func.func @helper(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  return %x : tensor<8x4xf32>
}
