// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=2 pp=2 micro=2})' | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=2 pp=2 micro=2 schedule=zb-h1})' | FileCheck %s --check-prefix=ZB
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=2 pp=2 micro=2 schedule=gpipe})' | FileCheck %s --check-prefix=GPIPE

// The 4-layer model of loom-partition-stages.mlir as 2 pipeline stages of 2
// layers in 2 micro-batches, lowered: one function per pp device, each op
// in its device's turn, activations and their gradients sent between them.

// 1F1B: device 0 runs F0 F1 B0 B1. It holds the embedding and layers 0-1
// (and the data x), sends each micro-batch's activation after its forward,
// receives its gradient before its backward, updates its own weights, and
// returns the loss it receives from the last stage.
// CHECK-LABEL: func.func @main_stage0(
// CHECK-SAME:    {loom.input = "x", loom.sample_offset = 0 : i64}
// CHECK-SAME:    {loom.input = "x", loom.sample_offset = 16 : i64}
// CHECK-SAME:    {loom.param = "embed.w"}
// CHECK-SAME:    {loom.param = "h.1.w"}
// CHECK-NOT:     h.2.w
// CHECK-SAME:    -> (tensor<f32> {loom.loss}
// CHECK-SAME:    attributes {loom.pipeline_device = 0 : i64}
// The micro-batch and backward marks stay, for the plan's instructions.
// CHECK:         loom.matmul %arg0, %arg2 {loom.micro_batch = 0 : i64}
// CHECK:         loom.tanh
// CHECK:         %[[A0:.*]] = loom.tanh
// CHECK-NEXT:    shard.send %[[A0]] on @mesh grid_axes = [0] destination = [1] {loom.tag = 0 : i64}
// CHECK:         loom.matmul %arg1, %arg2
// CHECK:         loom.tanh
// CHECK:         %[[A1:.*]] = loom.tanh
// CHECK-NEXT:    shard.send %[[A1]] on @mesh grid_axes = [0] destination = [1] {loom.tag = 1 : i64}
// CHECK:         %[[G0:.*]] = shard.recv %{{.*}} on @mesh grid_axes = [0] source = [1] {loom.tag = 2 : i64}
// CHECK:         loom.tanh_grad %[[G0]], %[[A0]]
// Transfers between two devices are received in the order they were sent:
// the loss, sent after micro-batch 1's forward, before micro-batch 1's
// gradient.
// CHECK:         %[[L:.*]] = shard.recv %{{.*}} source = [1] {loom.tag = 3 : i64} : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:    %[[LOSS:.*]] = loom.reshape %[[L]] [] : tensor<1xf32> -> tensor<f32>
// CHECK-NEXT:    %[[G1:.*]] = shard.recv %{{.*}} on @mesh grid_axes = [0] source = [1] {loom.tag = 4 : i64}
// CHECK:         loom.tanh_grad %[[G1]], %[[A1]]
// CHECK:         loom.sgd %arg2
// CHECK:         return %[[LOSS]],

// Device 1 runs F0 B0 F1 B1: the last stage's backward of micro-batch 0
// sends its input gradient before micro-batch 1's forward is received; the
// loss, summed over the micro-batches, goes to device 0 as one element.
// CHECK-LABEL: func.func @main_stage1(
// CHECK-SAME:    {loom.param = "h.2.w"}
// CHECK-SAME:    {loom.sample_offset = 0 : i64, loom.target}
// CHECK-SAME:    attributes {loom.pipeline_device = 1 : i64}
// CHECK:         %[[X0:.*]] = shard.recv %{{.*}} on @mesh grid_axes = [0] source = [0] {loom.tag = 0 : i64}
// CHECK:         loom.matmul %[[X0]], %arg0
// CHECK:         loom.mse_grad
// CHECK:         shard.send %{{.*}} destination = [0] {loom.tag = 2 : i64}
// CHECK:         %[[X1:.*]] = shard.recv %{{.*}} source = [0] {loom.tag = 1 : i64}
// CHECK:         loom.matmul %[[X1]], %arg0
// CHECK:         %[[SUM:.*]] = shard.all_reduce
// CHECK:         %[[ONE:.*]] = loom.reshape %[[SUM]] [1] : tensor<f32> -> tensor<1xf32>
// CHECK:         shard.send %[[ONE]] on @mesh grid_axes = [0] destination = [0] {loom.tag = 3 : i64}
// CHECK:         loom.mse_grad
// CHECK:         shard.send %{{.*}} destination = [0] {loom.tag = 4 : i64}
// CHECK:         loom.sgd %arg0
// CHECK:         return %[[SUM]],
// CHECK-NOT:   loom.stage

// ZB-H1, device 1: F0 B0 F1 B1 W0 W1. B is what makes the input gradient
// sent to device 0; the weight gradients (W) of micro-batch 0 wait until
// after micro-batch 1's backward.
// ZB-LABEL: func.func @main_stage1(
// ZB:         %[[X0:.*]] = shard.recv %{{.*}} {loom.tag = 0 : i64}
// ZB:         %[[D0:.*]] = loom.mse_grad
// ZB-NOT:     transpose_lhs
// ZB:         shard.send %{{.*}} {loom.tag = 2 : i64}
// ZB-NOT:     transpose_lhs
// ZB:         shard.recv %{{.*}} {loom.tag = 1 : i64}
// ZB-NOT:     transpose_lhs
// ZB:         shard.send %{{.*}} {loom.tag = 4 : i64}
// ZB:         loom.matmul %{{.*}}, %[[D0]] {loom.backward, loom.micro_batch = 0 : i64, transpose_lhs}
// ZB:         loom.matmul %[[X0]], %{{.*}} {loom.backward, loom.micro_batch = 0 : i64, transpose_lhs}

// GPipe, device 1: F0 F1 B0 B1, both losses before either backward.
// GPIPE-LABEL: func.func @main_stage1(
// GPIPE:         loom.mse
// GPIPE:         loom.mse
// GPIPE:         loom.mse_grad
// GPIPE:         loom.mse_grad
func.func @main(%x: tensor<32x64xf32> {loom.input = "x"}, %e: tensor<64x64xf32> {loom.param = "embed.w"},
                %w0: tensor<64x64xf32> {loom.param = "h.0.w"},
                %w1: tensor<64x64xf32> {loom.param = "h.1.w"},
                %w2: tensor<64x64xf32> {loom.param = "h.2.w"},
                %w3: tensor<64x64xf32> {loom.param = "h.3.w"},
                %wh: tensor<64x4xf32> {loom.param = "head.w"}) -> (tensor<32x4xf32> {loom.output = "y"}) {
  %e0 = loom.matmul %x, %e : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/embed/MatMul")
  %m0 = loom.matmul %e0, %w0 : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/h.0/MatMul")
  %t0 = loom.tanh %m0 : tensor<32x64xf32> loc("/h.0/Tanh")
  %m1 = loom.matmul %t0, %w1 : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/h.1/MatMul")
  %t1 = loom.tanh %m1 : tensor<32x64xf32> loc("/h.1/Tanh")
  %m2 = loom.matmul %t1, %w2 : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/h.2/MatMul")
  %t2 = loom.tanh %m2 : tensor<32x64xf32> loc("/h.2/Tanh")
  %m3 = loom.matmul %t2, %w3 : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/h.3/MatMul")
  %t3 = loom.tanh %m3 : tensor<32x64xf32> loc("/h.3/Tanh")
  %h = loom.matmul %t3, %wh : (tensor<32x64xf32>, tensor<64x4xf32>) -> tensor<32x4xf32> loc("/head/MatMul")
  return %h : tensor<32x4xf32>
}