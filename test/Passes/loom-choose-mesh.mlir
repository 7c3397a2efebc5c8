// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-choose-mesh{devices=4})' | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-choose-mesh{devices=1})' | FileCheck %s --check-prefix=ONE

// All devices go to data parallelism; the mesh is pp x dp x tp.
// CHECK: shard.grid @mesh(shape = 1x4x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
// ONE:   shard.grid @mesh(shape = 1x1x1)
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %t: tensor<8xi64> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %l = loom.cross_entropy %x, %t : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
