// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-record-arg-shardings))' | FileCheck %s

// A split parameter, its optimizer state and a running statistic keep their
// axes per dimension; a replicated parameter and the data get nothing (the
// plan places data by the rank's dp coordinate).
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %{{[^:]*}}: tensor<8x4xf32> {loom.input = "x"}
// CHECK-SAME:    %{{[^:]*}}: tensor<4x6xf32> {loom.param = "w", loom.split_axes = [array<i64>, array<i64: 2>]}
// CHECK-SAME:    %{{[^:]*}}: tensor<4x6xf32> {loom.param = "w", loom.split_axes = [array<i64>, array<i64: 2>], loom.state = "exp_avg"}
// CHECK-SAME:    %{{[^:]*}}: tensor<6xf32> {loom.param = "b"}
// CHECK-SAME:    %{{[^:]*}}: tensor<6xf32> {loom.running_mean = "m", loom.split_axes = [array<i64: 1, 2>]}
shard.grid @mesh(shape = 1x2x2)
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %w: tensor<4x6xf32> {loom.param = "w"},
                %m1: tensor<4x6xf32> {loom.param = "w", loom.state = "exp_avg"},
                %b: tensor<6xf32> {loom.param = "b"},
                %rm: tensor<6xf32> {loom.running_mean = "m"}) {
  %batch = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %col = shard.sharding @mesh split_axes = [[], [2]] : !shard.sharding
  %rep = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %both = shard.sharding @mesh split_axes = [[1, 2]] : !shard.sharding
  %0 = shard.shard %x to %batch : tensor<8x4xf32>
  %1 = shard.shard %w to %col : tensor<4x6xf32>
  %2 = shard.shard %m1 to %col : tensor<4x6xf32>
  %3 = shard.shard %b to %rep : tensor<6xf32>
  %4 = shard.shard %rm to %both : tensor<6xf32>
  return
}

// -----

// Left alone: an argument without a shard.shard (a step not annotated) and
// one read by more than its annotation.
// CHECK-LABEL: func.func @unannotated
// CHECK-NOT:     loom.split_axes
shard.grid @mesh(shape = 1x2x2)
func.func @unannotated(%w: tensor<4x6xf32> {loom.param = "w"},
                       %v: tensor<4x6xf32> {loom.param = "v"}) -> tensor<4x6xf32> {
  %col = shard.sharding @mesh split_axes = [[], [2]] : !shard.sharding
  %0 = shard.shard %v to %col : tensor<4x6xf32>
  return %v : tensor<4x6xf32>
}
