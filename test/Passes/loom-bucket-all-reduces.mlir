// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-bucket-all-reduces{bucket-bytes=512}))' | FileCheck %s --check-prefix=SIZED
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-bucket-all-reduces{cluster=cpu:2}))' | FileCheck %s --check-prefix=AUTO
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-bucket-all-reduces{bucket-bytes=-1}))' | FileCheck %s --check-prefix=OFF

// Three weight gradients made in the backward pass, summed over dp and read
// by the optimizer. 512-byte buckets: the first two gradients (256 bytes
// each) are one bucket, started right after the second is made and waited
// for before the first update that reads one of its sums; the ops after the
// start run while it is reduced. The last gradient, read right after it is
// made, stays a blocking all-reduce.
// SIZED-LABEL: func.func @step
// SIZED:         %[[G3:.*]] = loom.matmul %arg0, %arg4 {transpose_lhs}
// SIZED-NEXT:    %[[D2:.*]] = loom.matmul %arg4, %arg3 {transpose_rhs}
// SIZED-NEXT:    %[[G2:.*]] = loom.matmul %arg0, %[[D2]] {transpose_lhs}
// SIZED-NEXT:    %[[F:.*]]:2 = loom.all_reduce_start %[[G3]], %[[G2]] on @mesh grid_axes = [1] bucket 0 : tensor<8x8xf32>, tensor<8x8xf32>
// SIZED-NEXT:    %[[D1:.*]] = loom.matmul %[[D2]], %arg2 {transpose_rhs}
// SIZED-NEXT:    %[[G1:.*]] = loom.matmul %arg0, %[[D1]] {transpose_lhs}
// SIZED-NEXT:    %[[S1:.*]] = shard.all_reduce %[[G1]] on @mesh grid_axes = [1]
// SIZED-NEXT:    loom.sgd %arg1, %[[S1]]
// SIZED-NEXT:    %[[S:.*]]:2 = loom.all_reduce_wait %[[F]]#0, %[[F]]#1 bucket 0 : tensor<8x8xf32>, tensor<8x8xf32>
// SIZED-NEXT:    loom.sgd %arg2, %[[S]]#1
// SIZED-NEXT:    loom.sgd %arg3, %[[S]]#0
// SIZED-NOT:     shard.all_reduce

// The cluster's link asks for more bytes than the step has: one bucket,
// started after the last gradient.
// AUTO-LABEL: func.func @step
// AUTO-COUNT-5: loom.matmul
// AUTO-NEXT:    %[[F:.*]]:3 = loom.all_reduce_start %{{.*}}, %{{.*}}, %{{.*}} on @mesh grid_axes = [1] bucket 0
// AUTO-NEXT:    %[[S:.*]]:3 = loom.all_reduce_wait %[[F]]#0, %[[F]]#1, %[[F]]#2 bucket 0
// AUTO-NEXT:    loom.sgd %arg1, %[[S]]#2
// AUTO-NOT:     shard.all_reduce

// OFF-LABEL: func.func @step
// OFF-COUNT-3:  shard.all_reduce
// OFF-NOT:      loom.all_reduce_start
shard.grid @mesh(shape = 1x2x1)
func.func @step(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>, %w3: tensor<8x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %g3 = loom.matmul %x, %dy {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %s3 = shard.all_reduce %g3 on @mesh grid_axes = [1] : tensor<8x8xf32> -> tensor<8x8xf32>
  %d2 = loom.matmul %dy, %w3 {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g2 = loom.matmul %x, %d2 {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %s2 = shard.all_reduce %g2 on @mesh grid_axes = [1] : tensor<8x8xf32> -> tensor<8x8xf32>
  %d1 = loom.matmul %d2, %w2 {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g1 = loom.matmul %x, %d1 {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %s1 = shard.all_reduce %g1 on @mesh grid_axes = [1] : tensor<8x8xf32> -> tensor<8x8xf32>
  %p1 = loom.sgd %w1, %s1 {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<8x8xf32>
  %p2 = loom.sgd %w2, %s2 {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<8x8xf32>
  %p3 = loom.sgd %w3, %s3 {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<8x8xf32>
  return %p1, %p2, %p3 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Left as they are: a sum of an argument, a sum whose operand is read
// again (a bucket is reduced in place), a sum over other mesh axes read
// right after it is made. A sum read a few ops after it is made is a
// bucket of its own, reduced while those ops run.
// SIZED-LABEL: func.func @kept
// SIZED:         shard.all_reduce %arg0 on @mesh grid_axes = [1]
// SIZED:         %[[G:.*]] = loom.relu %arg1
// SIZED-NEXT:    shard.all_reduce %[[G]] on @mesh grid_axes = [1]
// SIZED-NEXT:    loom.mul %[[G]]
// SIZED:         %[[E:.*]] = loom.relu %arg2
// SIZED-NEXT:    %[[FE:.*]] = loom.all_reduce_start %[[E]] on @mesh grid_axes = [1] bucket 0
// SIZED-NEXT:    %[[T:.*]] = loom.relu %arg3
// SIZED-NEXT:    %[[SE:.*]] = loom.all_reduce_wait %[[FE]] bucket 0
// SIZED-NEXT:    loom.add %[[SE]], %[[T]]
// SIZED:         %[[H:.*]] = loom.relu %arg3
// SIZED-NEXT:    shard.all_reduce %[[H]] on @mesh grid_axes = [2]
// AUTO-LABEL: func.func @kept
// OFF-LABEL: func.func @kept
shard.grid @mesh(shape = 1x2x2)
func.func @kept(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %sa = shard.all_reduce %a on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
  %g = loom.relu %b : tensor<4xf32>
  %sg = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
  %m = loom.mul %g, %sg : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = loom.relu %c : tensor<4xf32>
  %se = shard.all_reduce %e on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
  %t = loom.relu %d : tensor<4xf32>
  %u = loom.add %se, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %h = loom.relu %d : tensor<4xf32>
  %sh = shard.all_reduce %h on @mesh grid_axes = [2] : tensor<4xf32> -> tensor<4xf32>
  %v = loom.relu %sh : tensor<4xf32>
  return %sa, %m, %u, %v, %t : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
