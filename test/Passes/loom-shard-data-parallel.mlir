// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(loom-shard-data-parallel)' | FileCheck %s
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(loom-shard-data-parallel,func.func(sharding-propagation{traversal=forward},shard-partition,loom-sink-all-reduces),canonicalize)' | FileCheck %s --check-prefix=LOWER

// The batch of the data splits over dp (mesh axis 1), parameters stay
// whole, and the returned values are asked for whole.
// CHECK-LABEL: func.func @main
// CHECK:         %[[R:.*]] = shard.sharding @mesh split_axes = [] : !shard.sharding
// CHECK-NEXT:    %[[B:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK-NEXT:    %[[X:.*]] = shard.shard %arg0 to %[[B]] : tensor<8x4xf32>
// CHECK-NEXT:    %[[W:.*]] = shard.shard %arg1 to %[[R]] : tensor<3x4xf32>
// CHECK-NEXT:    %[[T:.*]] = shard.shard %arg2 to %[[B]] : tensor<8xi64>
// CHECK-NEXT:    loom.matmul %[[X]], %[[W]]
// CHECK:         %[[P:.*]] = shard.shard %{{.*}} to %[[R]] annotate_for_users : tensor<3x4xf32>
// CHECK-NEXT:    return %{{.*}}, %[[P]]

// Lowered through propagation and partition: a quarter of the batch per
// rank, the loss and the weight gradient summed over dp; the losses divide
// by the global batch.
// LOWER-LABEL: func.func @main
// LOWER-SAME:    %[[X:[^:]*]]: tensor<2x4xf32> {loom.input = "x"}
// LOWER-SAME:    %[[T:[^:]*]]: tensor<2xi64> {loom.target}
// LOWER:         %[[L:.*]] = loom.cross_entropy %{{.*}}, %[[T]] {count = 8 : i64}
// LOWER-NEXT:    %[[LS:.*]] = shard.all_reduce %[[L]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// LOWER-NEXT:    %[[DY:.*]] = loom.cross_entropy_grad %{{.*}}, %[[T]] {count = 8 : i64}
// LOWER-NEXT:    %[[G:.*]] = loom.matmul %[[DY]], %[[X]] {transpose_lhs} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// LOWER-NEXT:    %[[GS:.*]] = shard.all_reduce %[[G]] on @mesh grid_axes = [1] : tensor<3x4xf32> -> tensor<3x4xf32>
// LOWER-NEXT:    %[[W2:.*]] = loom.sgd %{{.*}}, %[[GS]]
// LOWER-NEXT:    return %[[LS]], %[[W2]] : tensor<f32>, tensor<3x4xf32>
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %w: tensor<3x4xf32> {loom.param = "w"},
                %t: tensor<8xi64> {loom.target}) -> (tensor<f32> {loom.loss}, tensor<3x4xf32> {loom.param = "w"}) {
  %y = loom.matmul %x, %w {transpose_rhs} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %l = loom.cross_entropy %y, %t : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  %dy = loom.cross_entropy_grad %y, %t : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<8x3xf32>
  %dw = loom.matmul %dy, %x {transpose_lhs} : (tensor<8x3xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %w2 = loom.sgd %w, %dw {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<3x4xf32>
  return %l, %w2 : tensor<f32>, tensor<3x4xf32>
}
shard.grid @mesh(shape = 1x4x1)

// -----

// A one-rank mesh leaves the step unchanged.
// CHECK-LABEL: func.func @main
// CHECK-NOT:     shard.shard
// LOWER-LABEL: func.func @main
// LOWER-SAME:    tensor<8x4xf32> {loom.input = "x"}
// LOWER-NOT:     shard.all_reduce
shard.grid @mesh(shape = 1x1x1)
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %t: tensor<8xi64> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %l = loom.cross_entropy %x, %t : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A constant used twice becomes two, so each use may take its own block:
// here the added one splits with the batch, the returned one stays whole.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-2: loom.constant dense<1.000000e+00> : tensor<8x4xf32>
// LOWER-LABEL: func.func @main
// LOWER-DAG:     loom.constant dense<1.000000e+00> : tensor<2x4xf32>
// LOWER-DAG:     loom.constant dense<1.000000e+00> : tensor<8x4xf32>
shard.grid @mesh(shape = 1x4x1)
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}) -> (tensor<8x4xf32> {loom.output = "y"}, tensor<8x4xf32> {loom.output = "c"}) {
  %c = loom.constant dense<1.0> : tensor<8x4xf32>
  %y = loom.add %x, %c : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y, %c : tensor<8x4xf32>, tensor<8x4xf32>
}
