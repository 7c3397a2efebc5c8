// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-choose-mesh{devices=2 micro=4})' | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-choose-mesh{devices=2 micro-batch=2})' | FileCheck %s --check-prefix=SIZE
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-choose-mesh{devices=2 micro-batch=4})' | FileCheck %s --check-prefix=WHOLE

// Micro-batches are a fourth, innermost mesh axis until they are unrolled.
// CHECK: shard.grid @mesh(shape = 1x2x1x4) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
// A micro-batch size gives the count: 4 samples a rank in blocks of 2.
// SIZE: shard.grid @mesh(shape = 1x2x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
// A micro-batch of the rank's whole block is no micro-batching.
// WHOLE: shard.grid @mesh(shape = 1x2x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %t: tensor<8xi64> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %l = loom.cross_entropy %x, %t : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
