// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(loom-plan{devices=2})' | FileCheck %s

// A constant expanded to the batch (a causal mask, exported at batch 8) has
// no split operand to propagate from: the op it feeds asks for its batch
// split, and the expansion is made at the local batch.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x4xf32> {loom.input = "x"}
// CHECK:         %[[C:.*]] = loom.constant {{.*}} : tensor<1x4xf32>
// CHECK-NEXT:    %[[M:.*]] = loom.expand %[[C]] [4, 4] : tensor<1x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    loom.add %[[X]], %[[M]]
// CHECK-NOT:     shard.all_slice
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %t: tensor<8xi64> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %c = loom.constant dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>
  %m = loom.expand %c [8, -1] : tensor<1x4xf32> -> tensor<8x4xf32>
  %y = loom.add %x, %m : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %l = loom.cross_entropy %y, %t : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
