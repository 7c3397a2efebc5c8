// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(loom-unroll-micro-batches)' | FileCheck %s

// Two micro-batches of 2 samples on each of 2 dp ranks. Each data argument
// becomes one a micro-batch, placed in the rank's share of the batch by
// `loom.sample_offset`; each micro-batch's forward and backward run in turn;
// the transposed weight, which reads no data, is made once; the loss and
// the gradient are accumulated as each micro-batch makes them and
// all-reduced over dp only; the update runs once, after the last
// micro-batch. The micro axis is gone from the mesh.
// CHECK:       shard.grid @mesh(shape = 1x2x1) {loom.mesh_axes = ["pp", "dp", "tp"], loom.num_micro_batches = 2 : i64}
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X0:.*]]: tensor<2x8xf32> {loom.input = "x", loom.sample_offset = 0 : i64}
// CHECK-SAME:    %[[X1:.*]]: tensor<2x8xf32> {loom.input = "x", loom.sample_offset = 2 : i64}
// CHECK-SAME:    %[[T0:.*]]: tensor<2x8xf32> {loom.sample_offset = 0 : i64, loom.target}
// CHECK-SAME:    %[[T1:.*]]: tensor<2x8xf32> {loom.sample_offset = 2 : i64, loom.target}
// CHECK-SAME:    %[[W:.*]]: tensor<8x8xf32> {loom.param = "w"}
// CHECK-NEXT:    %[[WT:.*]] = loom.transpose %[[W]]
// CHECK-NEXT:    %[[Y0:.*]] = loom.matmul %[[X0]], %[[WT]]
// CHECK-NEXT:    %[[L0:.*]] = loom.mse %[[Y0]], %[[T0]]
// CHECK-NEXT:    %[[D0:.*]] = loom.mse_grad %[[Y0]], %[[T0]]
// CHECK-NEXT:    %[[G0:.*]] = loom.matmul %[[X0]], %[[D0]] {transpose_lhs}
// CHECK-NEXT:    %[[Y1:.*]] = loom.matmul %[[X1]], %[[WT]]
// CHECK-NEXT:    %[[L1:.*]] = loom.mse %[[Y1]], %[[T1]]
// CHECK-NEXT:    %[[L:.*]] = loom.add %[[L0]], %[[L1]]
// CHECK-NEXT:    %[[LS:.*]] = shard.all_reduce %[[L]] on @mesh grid_axes = [1]
// CHECK-NEXT:    %[[D1:.*]] = loom.mse_grad %[[Y1]], %[[T1]]
// CHECK-NEXT:    %[[G1:.*]] = loom.matmul %[[X1]], %[[D1]] {transpose_lhs}
// CHECK-NEXT:    %[[G:.*]] = loom.add %[[G0]], %[[G1]]
// CHECK-NEXT:    %[[GS:.*]] = shard.all_reduce %[[G]] on @mesh grid_axes = [1]
// CHECK-NEXT:    %[[P:.*]] = loom.sgd %[[W]], %[[GS]]
// CHECK-NEXT:    return %[[LS]], %[[P]]
// CHECK-NOT:     grid_axes = [1, 3]
shard.grid @mesh(shape = 1x2x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}, %t: tensor<2x8xf32> {loom.target}, %w: tensor<8x8xf32> {loom.param = "w"}) -> (tensor<f32> {loom.loss}, tensor<8x8xf32> {loom.param = "w"}) {
  %wt = loom.transpose %w [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = loom.matmul %x, %wt : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %l = loom.mse %y, %t {count = 32 : i64} : tensor<2x8xf32> -> tensor<f32>
  %ls = shard.all_reduce %l on @mesh grid_axes = [1, 3] : tensor<f32> -> tensor<f32>
  %dy = loom.mse_grad %y, %t {count = 32 : i64} : tensor<2x8xf32>
  %g = loom.matmul %x, %dy {transpose_lhs} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %gs = shard.all_reduce %g on @mesh grid_axes = [1, 3] : tensor<8x8xf32> -> tensor<8x8xf32>
  %p = loom.sgd %w, %gs {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<8x8xf32>
  return %ls, %p : tensor<f32>, tensor<8x8xf32>
}

// -----

// A value that reads no data but is split along the batch (a constant mask)
// is sliced over dp once and then taken block by block; a value gathered
// over the micro-batches is their blocks side by side, gathered over dp.
// Without dp, a sum over the micro axis alone is only the accumulation.
// CHECK:       shard.grid @mesh(shape = 1x2x1) {{.*}}loom.num_micro_batches = 2
// CHECK-LABEL: func.func @main
// CHECK:         %[[M:.*]] = shard.all_slice %{{.*}} on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[M0:.*]] = loom.micro_batch %[[M]] axis 0 index 0 of 2 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK:         %[[M1:.*]] = loom.micro_batch %[[M]] axis 0 index 1 of 2
// CHECK:         %[[C:.*]] = loom.concat %{{.*}}, %{{.*}} axis 0 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    shard.all_gather %[[C]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK:         %[[S:.*]] = loom.add
// CHECK-NOT:     shard.all_reduce %[[S]]
// CHECK:         return
shard.grid @mesh(shape = 1x2x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<8x8xf32> {loom.output = "y"}, tensor<f32> {loom.loss}) {
  %c = loom.constant dense<1.0> : tensor<8x8xf32>
  %m = shard.all_slice %c on @mesh grid_axes = [1, 3] slice_axis = 0 : tensor<8x8xf32> -> tensor<2x8xf32>
  %y = loom.mul %x, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %all = shard.all_gather %y on @mesh grid_axes = [1, 3] gather_axis = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %r = loom.reduce_sum %y axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
  %s = shard.all_reduce %r on @mesh grid_axes = [3] : tensor<f32> -> tensor<f32>
  return %all, %s : tensor<8x8xf32>, tensor<f32>
}

// -----

// Without a micro axis the pass changes nothing.
// CHECK:       shard.grid @mesh(shape = 1x2x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
// CHECK-LABEL: func.func @main
// CHECK-NOT:     loom.micro_batch
shard.grid @mesh(shape = 1x2x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}) -> (tensor<2x8xf32> {loom.output = "y"}) {
  return %x : tensor<2x8xf32>
}
