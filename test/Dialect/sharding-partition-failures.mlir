// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(sharding-propagation{traversal=forward},shard-partition))'

// Two operands explicitly split over different mesh axes cannot meet.
shard.grid @mesh(shape = 1x2x2)
func.func @operands_split_differently(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s1 = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %s2 = shard.sharding @mesh split_axes = [[2]] : !shard.sharding
  %as = shard.shard %a to %s1 annotate_for_users : tensor<4x8xf32>
  %bs = shard.shard %b to %s2 annotate_for_users : tensor<4x8xf32>
  // expected-error @+1 {{'loom.add' op dimension 0 of operand 1 is split differently from the same dimension of operand 0}}
  %y = loom.add %as, %bs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

