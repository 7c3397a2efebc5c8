// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation{traversal=forward}))' | FileCheck %s --check-prefixes=CHECK,FWD
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation{traversal=backward}))' | FileCheck %s --check-prefixes=CHECK,BWD
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation))' | FileCheck %s --check-prefixes=CHECK,BWD

// Split rows flow through a matmul (its weight replicated) and a softmax
// over the columns.
// CHECK-LABEL: func.func @rows_through_matmul_and_softmax
// FWD:         %[[W:.*]] = shard.sharding @mesh split_axes = {{\[\[}}]]
// FWD-NEXT:    shard.shard %arg1 to %[[W]] annotate_for_users
// FWD:         %[[Y:.*]] = loom.matmul
// FWD-NEXT:    %[[S:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1]]
// FWD-NEXT:    shard.shard %[[Y]] to %[[S]] : tensor<4x6xf32>
// FWD:         %[[P:.*]] = loom.softmax
// FWD-NEXT:    %[[SP:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1]]
// FWD-NEXT:    shard.shard %[[P]] to %[[SP]] : tensor<4x6xf32>
shard.grid @mesh(shape = 1x2x2)
func.func @rows_through_matmul_and_softmax(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>) -> tensor<4x6xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8xf32>
  %y = loom.matmul %xs, %w : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %p = loom.softmax %y axis 1 : tensor<4x6xf32>
  return %p : tensor<4x6xf32>
}

// -----

// A hidden dimension split over `tp` is a split of the heads once reshaped
// to `[.., heads, head_dim]` (the outer dimension of the group).
// CHECK-LABEL: func.func @hidden_split_becomes_heads_split
// FWD:         %[[Y:.*]] = loom.reshape
// FWD-NEXT:    %[[S:.*]] = shard.sharding @mesh split_axes = {{\[\[}}], [], [2]]
// FWD-NEXT:    shard.shard %[[Y]] to %[[S]] : tensor<2x8x4x4xf32>
shard.grid @mesh(shape = 1x2x2)
func.func @hidden_split_becomes_heads_split(%x: tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32> {
  %s = shard.sharding @mesh split_axes = [[], [], [2]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x8x16xf32>
  %y = loom.reshape %xs [2, 8, 4, 4] : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  return %y : tensor<2x8x4x4xf32>
}

// -----

// A normalised axis is never split: the norm asks for its input whole
// (resharding it) and produces a replicated result.
// CHECK-LABEL: func.func @normalised_axis_stays_whole
// FWD:         %[[R:.*]] = shard.sharding @mesh split_axes = {{\[\[}}]]
// FWD-NEXT:    %[[X:.*]] = shard.shard %{{.*}} to %[[R]] annotate_for_users : tensor<4x8xf32>
// FWD:         %[[Y:.*]] = loom.rms_norm %[[X]]
// FWD-NEXT:    %[[S:.*]] = shard.sharding @mesh split_axes = {{\[\[}}]]
// FWD-NEXT:    shard.shard %[[Y]] to %[[S]]
shard.grid @mesh(shape = 1x2x2)
func.func @normalised_axis_stays_whole(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @mesh split_axes = [[], [2]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8xf32>
  %y = loom.rms_norm %xs, %g axis 1 {epsilon = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// An embedding lookup of split token ids gives split rows; the table stays
// whole.
// CHECK-LABEL: func.func @embedding_rows
// FWD:         %[[T:.*]] = shard.sharding @mesh split_axes = {{\[\[}}]]
// FWD-NEXT:    shard.shard %arg0 to %[[T]] annotate_for_users : tensor<16x8xf32>
// FWD:         %[[E:.*]] = loom.gather
// FWD-NEXT:    %[[S:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1]]
// FWD-NEXT:    shard.shard %[[E]] to %[[S]] : tensor<4x3x8xf32>
shard.grid @mesh(shape = 1x2x2)
func.func @embedding_rows(%table: tensor<16x8xf32>, %ids: tensor<4x3xi64>) -> tensor<4x3x8xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %is = shard.shard %ids to %s : tensor<4x3xi64>
  %e = loom.gather %table, %is axis 0 : (tensor<16x8xf32>, tensor<4x3xi64>) -> tensor<4x3x8xf32>
  return %e : tensor<4x3x8xf32>
}

// -----

// A split result asks its producer's operands to be split alike, in every
// traversal order (the annotation is the op's own); the broadcast operand
// stays whole.
// CHECK-LABEL: func.func @split_result_reaches_operands
// CHECK:       %[[S:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1]]
// CHECK-NEXT:  shard.shard %arg0 to %[[S]] annotate_for_users : tensor<4x8xf32>
// CHECK-NEXT:  %[[R:.*]] = shard.sharding @mesh split_axes = {{\[\[}}]]
// CHECK-NEXT:  shard.shard %arg1 to %[[R]] annotate_for_users : tensor<8xf32>
// CHECK-NEXT:  loom.mul
shard.grid @mesh(shape = 1x2x2)
func.func @split_result_reaches_operands(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = loom.mul %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %ys = shard.shard %y to %s : tensor<4x8xf32>
  return %ys : tensor<4x8xf32>
}

// -----

// Backward traversal carries a result's split up a chain of ops; forward
// alone cannot reach the first op, whose operand stays unannotated.
// CHECK-LABEL: func.func @split_flows_back_up_a_chain
// BWD:         %[[S:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1]]
// BWD-NEXT:    %[[A:.*]] = shard.shard %arg0 to %[[S]] annotate_for_users : tensor<4x8xf32>
// BWD-NEXT:    loom.relu %[[A]]
// FWD:         loom.relu %arg0
shard.grid @mesh(shape = 1x2x2)
func.func @split_flows_back_up_a_chain(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = loom.relu %a : tensor<4x8xf32>
  %y = loom.mul %r, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %ys = shard.shard %y to %s : tensor<4x8xf32>
  return %ys : tensor<4x8xf32>
}
