// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(loom-unroll-micro-batches{written-micro-batches=3})' | FileCheck %s

// The memory estimate's shortened step: of 5 micro-batches of 2 samples,
// the first two and the last are written out, each with its own sample
// offset and its own block of a value sliced over the micro-batches; the
// sums accumulate the three. The mesh still says 5 micro-batches.
// CHECK:       shard.grid @mesh(shape = 1x1x1) {{.*}}loom.num_micro_batches = 5
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X0:[^:]*]]: tensor<2x8xf32> {loom.input = "x", loom.sample_offset = 0 : i64}
// CHECK-SAME:    %[[X1:[^:]*]]: tensor<2x8xf32> {loom.input = "x", loom.sample_offset = 2 : i64}
// CHECK-SAME:    %[[X4:[^:]*]]: tensor<2x8xf32> {loom.input = "x", loom.sample_offset = 8 : i64}
// CHECK-SAME:    %{{[^:]*}}: tensor<8xf32> {loom.param = "w"}
// CHECK-NOT:     loom.sample_offset
// CHECK:         %[[M0:.*]] = loom.micro_batch %{{.*}} axis 0 index 0 of 5
// CHECK-NEXT:    %[[Y0:.*]] = loom.mul %[[X0]], %[[M0]]
// CHECK:         %[[M1:.*]] = loom.micro_batch %{{.*}} axis 0 index 1 of 5
// CHECK-NEXT:    %[[Y1:.*]] = loom.mul %[[X1]], %[[M1]]
// CHECK:         %[[S1:.*]] = loom.add %{{.*}}, %{{.*}}
// CHECK:         %[[M4:.*]] = loom.micro_batch %{{.*}} axis 0 index 4 of 5
// CHECK-NEXT:    %[[Y4:.*]] = loom.mul %[[X4]], %[[M4]]
// CHECK:         %[[S4:.*]] = loom.add %[[S1]], %{{.*}}
// CHECK-NEXT:    return %[[S4]]
// CHECK-NOT:     loom.micro_batch
shard.grid @mesh(shape = 1x1x1x5) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}, %w: tensor<8xf32> {loom.param = "w"}) -> (tensor<f32> {loom.loss}) {
  %c = loom.constant dense<1.0> : tensor<10x8xf32>
  %m = shard.all_slice %c on @mesh grid_axes = [3] slice_axis = 0 : tensor<10x8xf32> -> tensor<2x8xf32>
  %y = loom.mul %x, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = loom.reduce_sum %y axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
  %s = shard.all_reduce %r on @mesh grid_axes = [3] : tensor<f32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A value gathered from every micro-batch needs them all: the step is
// written out whole.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    loom.sample_offset = 0
// CHECK-SAME:    loom.sample_offset = 2
// CHECK-SAME:    loom.sample_offset = 4
// CHECK-SAME:    loom.sample_offset = 6
// CHECK:         loom.concat %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} axis 0
shard.grid @mesh(shape = 1x1x1x4) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<8x8xf32> {loom.output = "y"}) {
  %y = loom.relu %x : tensor<2x8xf32>
  %all = shard.all_gather %y on @mesh grid_axes = [3] gather_axis = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  return %all : tensor<8x8xf32>
}
