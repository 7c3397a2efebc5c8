// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(loom-verify-sharding))' | FileCheck %s

// A fully annotated step passes unchanged.
// CHECK-LABEL: func.func @annotated
// CHECK:         loom.relu
shard.grid @mesh(shape = 1x2x1)
func.func @annotated(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x4xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8x4xf32>
  %y = loom.relu %xu : tensor<8x4xf32>
  %ys = shard.shard %y to %s : tensor<8x4xf32>
  %yu = shard.shard %ys to %s annotate_for_users : tensor<8x4xf32>
  return %yu : tensor<8x4xf32>
}

// -----

// A result nobody reads needs no sharding: the input gradient of a layer
// norm over the data (the gradient is not wanted) is typed by partition
// like the operands it is computed from.
// CHECK-LABEL: func.func @unread_result
// CHECK:         loom.layer_norm_grad
shard.grid @mesh(shape = 1x2x1)
func.func @unread_result(%x: tensor<8x4xf32>, %dy: tensor<8x4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %r = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x4xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8x4xf32>
  %dys = shard.shard %dy to %s : tensor<8x4xf32>
  %dyu = shard.shard %dys to %s annotate_for_users : tensor<8x4xf32>
  %gs = shard.shard %g to %r : tensor<4xf32>
  %gu = shard.shard %gs to %r annotate_for_users : tensor<4xf32>
  %dx, %dg, %db = loom.layer_norm_grad %dyu, %xu, %gu axis 1 {epsilon = 1.0e-5 : f64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %dgs = shard.shard %dg to %r : tensor<4xf32>
  %dgu = shard.shard %dgs to %r annotate_for_users : tensor<4xf32>
  return %dgu : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 1x2x1)
func.func @unannotated_result(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x4xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8x4xf32>
  // expected-error @below {{sharding propagation left result 0 of 'loom.relu' without a sharding}}
  %y = loom.relu %xu : tensor<8x4xf32>
  %z = loom.relu %y : tensor<8x4xf32>
  return %z : tensor<8x4xf32>
}

// -----

shard.grid @mesh(shape = 1x2x1)
func.func @unannotated_operand() -> tensor<8x4xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %c = loom.constant dense<1.0> : tensor<1x4xf32>
  // expected-error @below {{sharding propagation left operand 0 of 'loom.expand' without a sharding}}
  %m = loom.expand %c [8, -1] : tensor<1x4xf32> -> tensor<8x4xf32>
  %ms = shard.shard %m to %s : tensor<8x4xf32>
  return %ms : tensor<8x4xf32>
}

// -----

shard.grid @mesh(shape = 1x2x1)
// expected-error @below {{argument 0 of 'twice' is not annotated by exactly one shard.shard}}
func.func @twice(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x4xf32>
  %b = shard.shard %x to %s : tensor<8x4xf32>
  return %a : tensor<8x4xf32>
}

// -----

// Without shard ops (one rank) nothing is partitioned, nothing checked.
// CHECK-LABEL: func.func @one_rank
shard.grid @mesh(shape = 1x1x1)
func.func @one_rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %y = loom.relu %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
