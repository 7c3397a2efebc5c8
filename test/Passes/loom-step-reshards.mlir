// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-step-reshards))' | FileCheck %s

// A replicated constant read split over dp and micro: one axis a step.
// CHECK-LABEL: func.func @main
// CHECK:         %[[R:.*]] = shard.sharding @mesh split_axes = {{\[\[\]\]}}
// CHECK:         %[[S:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1, 3]]
// CHECK:         %[[C:.*]] = shard.shard %{{.*}} to %[[R]]
// CHECK-NEXT:    %[[ONE:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1]]
// CHECK-NEXT:    %[[A:.*]] = shard.shard %[[C]] to %[[ONE]] annotate_for_users
// CHECK-NEXT:    %[[B:.*]] = shard.shard %[[A]] to %[[ONE]] :
// CHECK-NEXT:    shard.shard %[[B]] to %[[S]] annotate_for_users
shard.grid @mesh(shape = 1x2x1x2)
func.func @main(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %s = shard.sharding @mesh split_axes = [[1, 3]] : !shard.sharding
  %c = loom.constant dense<1.0> : tensor<8x4xf32>
  %0 = shard.shard %c to %r : tensor<8x4xf32>
  %1 = shard.shard %0 to %s annotate_for_users : tensor<8x4xf32>
  %y = loom.add %x, %1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// One axis more, a change of axes or a gather are for shard-partition.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-3: = shard.sharding @mesh
// CHECK-NOT:     = shard.sharding @mesh
shard.grid @mesh(shape = 1x2x2x2)
func.func @main(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %r = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %d = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %t = shard.sharding @mesh split_axes = [[2, 3]] : !shard.sharding
  %0 = shard.shard %x to %r : tensor<8x4xf32>
  %1 = shard.shard %0 to %d annotate_for_users : tensor<8x4xf32>
  %2 = shard.shard %x to %d : tensor<8x4xf32>
  %3 = shard.shard %2 to %t annotate_for_users : tensor<8x4xf32>
  %4 = shard.shard %x to %t : tensor<8x4xf32>
  %5 = shard.shard %4 to %r annotate_for_users : tensor<8x4xf32>
  return %1, %3, %5 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}
