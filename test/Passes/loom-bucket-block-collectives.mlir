// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-bucket-block-collectives{bucket-bytes=512}))' | FileCheck %s --check-prefix=SIZED
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-bucket-block-collectives{bucket-bytes=256}))' | FileCheck %s --check-prefix=SMALL
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-bucket-block-collectives{cluster=cpu:2}))' | FileCheck %s --check-prefix=AUTO
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-bucket-block-collectives{bucket-bytes=-1}))' | FileCheck %s --check-prefix=OFF

// ZeRO-2: three weight gradients made in the backward pass, each
// reduce-scattered over dp (the second along its dim 1) and read by the
// update of its shard. 512-byte buckets (of whole gradients, 256 bytes
// each): the first two are one bucket, started where the second's
// collective was and waited for before the first update that reads one of
// its blocks; the ops after the start run while it is reduced. The last
// gradient, read right after its collective, stays blocking.
// SIZED-LABEL: func.func @zero2
// SIZED:         %[[G3:.*]] = loom.matmul %arg0, %arg3 {transpose_lhs}
// SIZED-NEXT:    %[[D2:.*]] = loom.matmul %arg3, %arg2 {transpose_rhs}
// SIZED-NEXT:    %[[G2:.*]] = loom.matmul %arg0, %[[D2]] {transpose_lhs}
// SIZED-NEXT:    %[[F:.*]]:2 = loom.reduce_scatter_start %[[G3]], %[[G2]] on @mesh grid_axes = [1] dims = [0, 1] bucket 0 : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>, tensor<8x4xf32>
// SIZED-NEXT:    %[[D1:.*]] = loom.matmul %[[D2]], %arg1 {transpose_rhs}
// SIZED-NEXT:    %[[G1:.*]] = loom.matmul %arg0, %[[D1]] {transpose_lhs}
// SIZED-NEXT:    %[[S1:.*]] = shard.reduce_scatter %[[G1]] on @mesh grid_axes = [1] scatter_axis = 0
// SIZED-NEXT:    loom.sgd %arg4, %[[S1]]
// SIZED-NEXT:    %[[S:.*]]:2 = loom.reduce_scatter_wait %[[F]]#0, %[[F]]#1 bucket 0 : tensor<4x8xf32>, tensor<8x4xf32>
// SIZED-NEXT:    loom.sgd %arg5, %[[S]]#1
// SIZED-NEXT:    loom.sgd %arg6, %[[S]]#0

// The cluster's link asks for more bytes than the step has: one bucket,
// started after the last gradient.
// AUTO-LABEL: func.func @zero2
// AUTO-COUNT-5: loom.matmul
// AUTO-NEXT:    %[[F:.*]]:3 = loom.reduce_scatter_start %{{.*}}, %{{.*}}, %{{.*}} on @mesh grid_axes = [1] dims = [0, 1, 0] bucket 0
// AUTO-NEXT:    %[[S:.*]]:3 = loom.reduce_scatter_wait %[[F]]#0, %[[F]]#1, %[[F]]#2 bucket 0
// AUTO-NOT:     shard.reduce_scatter

// OFF-LABEL: func.func @zero2
// OFF-COUNT-3:  shard.reduce_scatter
// OFF-NOT:      loom.reduce_scatter_start
// SMALL-LABEL: func.func @zero2
shard.grid @mesh(shape = 1x2x1)
func.func @zero2(%x: tensor<4x8xf32>, %w2: tensor<8x8xf32>, %w3: tensor<8x8xf32>, %dy: tensor<4x8xf32>, %p1: tensor<4x8xf32>, %p2: tensor<8x4xf32>, %p3: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>) {
  %g3 = loom.matmul %x, %dy {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %s3 = shard.reduce_scatter %g3 on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  %d2 = loom.matmul %dy, %w3 {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g2 = loom.matmul %x, %d2 {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %s2 = shard.reduce_scatter %g2 on @mesh grid_axes = [1] scatter_axis = 1 : tensor<8x8xf32> -> tensor<8x4xf32>
  %d1 = loom.matmul %d2, %w2 {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g1 = loom.matmul %x, %d1 {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %s1 = shard.reduce_scatter %g1 on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  %n1 = loom.sgd %p1, %s1 {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<4x8xf32>
  %n2 = loom.sgd %p2, %s2 {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<8x4xf32>
  %n3 = loom.sgd %p3, %s3 {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<4x8xf32>
  return %n1, %n2, %n3 : tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>
}

// -----

// ZeRO-3: each layer's weight is gathered from its shards (arguments) just
// before the layer reads it. The gathers are prefetched in the order the
// step reads them. 512 bytes: w1 and w2 are the first bucket, started
// where the first gather was; w3's bucket starts as soon as it is waited
// for, and travels while both layers before it compute.
// SIZED-LABEL: func.func @zero3
// SIZED-NEXT:    %[[F:.*]]:2 = loom.all_gather_start %arg1, %arg2 on @mesh grid_axes = [1] dims = [0, 0] bucket 0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>, tensor<8x8xf32>
// SIZED-NEXT:    %[[W:.*]]:2 = loom.all_gather_wait %[[F]]#0, %[[F]]#1 bucket 0
// SIZED-NEXT:    %[[F3:.*]] = loom.all_gather_start %arg3 on @mesh grid_axes = [1] dims = [0] bucket 1
// SIZED-NEXT:    %[[H1:.*]] = loom.matmul %arg0, %[[W]]#0
// SIZED-NEXT:    %[[H2:.*]] = loom.matmul %[[H1]], %[[W]]#1
// SIZED-NEXT:    %[[W3:.*]] = loom.all_gather_wait %[[F3]] bucket 1
// SIZED-NEXT:    loom.matmul %[[H2]], %[[W3]]

// 256 bytes, one gather a bucket: the first has nothing to overlap and
// stays blocking; each next one starts when the one before it is waited
// for, so w2 travels while layer 1 computes, and w3 while layer 2 does.
// SMALL-LABEL: func.func @zero3
// SMALL-NEXT:    %[[A1:.*]] = shard.all_gather %arg1 on @mesh grid_axes = [1] gather_axis = 0
// SMALL-NEXT:    %[[F2:.*]] = loom.all_gather_start %arg2 on @mesh grid_axes = [1] dims = [0] bucket 0
// SMALL-NEXT:    %[[H1:.*]] = loom.matmul %arg0, %[[A1]]
// SMALL-NEXT:    %[[W2:.*]] = loom.all_gather_wait %[[F2]] bucket 0
// SMALL-NEXT:    %[[F3:.*]] = loom.all_gather_start %arg3 on @mesh grid_axes = [1] dims = [0] bucket 1
// SMALL-NEXT:    %[[H2:.*]] = loom.matmul %[[H1]], %[[W2]]
// SMALL-NEXT:    %[[W3:.*]] = loom.all_gather_wait %[[F3]] bucket 1
// SMALL-NEXT:    loom.matmul %[[H2]], %[[W3]]
// AUTO-LABEL: func.func @zero3
// OFF-LABEL: func.func @zero3
// OFF-COUNT-3:  shard.all_gather
shard.grid @mesh(shape = 1x2x1)
func.func @zero3(%x: tensor<4x8xf32>, %w1: tensor<4x8xf32>, %w2: tensor<4x8xf32>, %w3: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a1 = shard.all_gather %w1 on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %h1 = loom.matmul %x, %a1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a2 = shard.all_gather %w2 on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %h2 = loom.matmul %h1, %a2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a3 = shard.all_gather %w3 on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %h3 = loom.matmul %h2, %a3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h3 : tensor<4x8xf32>
}

// -----

// ZeRO-1 and 2 gather each updated block back into the whole parameter.
// 256 bytes: the first gather starts right after its update and travels
// while the second update runs; the second travels while the step waits
// for the first. Bucket ids follow the sums' buckets already in the step.
// SMALL-LABEL: func.func @gather_updates
// SMALL:         loom.all_reduce_start
// SMALL:         %[[N1:.*]] = loom.sgd %arg0
// SMALL-NEXT:    %[[F:.*]] = loom.all_gather_start %[[N1]] on @mesh grid_axes = [1] dims = [0] bucket 1
// SMALL-NEXT:    %[[N2:.*]] = loom.sgd %arg2
// SMALL-NEXT:    %[[F2:.*]] = loom.all_gather_start %[[N2]] on @mesh grid_axes = [1] dims = [0] bucket 2
// SMALL-NEXT:    %[[W:.*]] = loom.all_gather_wait %[[F]] bucket 1
// SMALL-NEXT:    %[[W2:.*]] = loom.all_gather_wait %[[F2]] bucket 2
// SMALL-NEXT:    return %[[W]], %[[W2]]
// SIZED-LABEL: func.func @gather_updates
// AUTO-LABEL: func.func @gather_updates
// OFF-LABEL: func.func @gather_updates
shard.grid @mesh(shape = 1x2x1)
func.func @gather_updates(%p1: tensor<4x8xf32>, %g1: tensor<4x8xf32>, %p2: tensor<4x8xf32>, %g2: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %f = loom.all_reduce_start %g1 on @mesh grid_axes = [1] bucket 0 : tensor<4x8xf32>
  %s = loom.all_reduce_wait %f bucket 0 : tensor<4x8xf32>
  %n1 = loom.sgd %p1, %s {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<4x8xf32>
  %a1 = shard.all_gather %n1 on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %n2 = loom.sgd %p2, %g2 {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<4x8xf32>
  %a2 = shard.all_gather %n2 on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  return %a1, %a2 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A gather recomputation placed late (loom.recomputed: the forward's
// gathered copy is freed in between) is started where it was, never
// hoisted back to where its operand is made; the forward's gather, read
// right after it, stays blocking.
// SIZED-LABEL: func.func @recomputed
// SIZED:         %[[H:.*]] = loom.relu %arg0
// SIZED-NEXT:    %[[A:.*]] = shard.all_gather %[[H]]
// SIZED-NEXT:    %[[Y:.*]] = loom.relu %[[A]]
// SIZED-NEXT:    %[[T:.*]] = loom.relu %[[Y]]
// SIZED-NEXT:    %[[F:.*]] = loom.all_gather_start %[[H]] on @mesh grid_axes = [1] dims = [0] bucket 0
// SIZED-NEXT:    %[[V:.*]] = loom.relu %[[T]]
// SIZED-NEXT:    %[[B:.*]] = loom.all_gather_wait %[[F]] bucket 0
// SIZED-NEXT:    loom.add %[[B]], %[[V]]
// SMALL-LABEL: func.func @recomputed
// AUTO-LABEL: func.func @recomputed
// OFF-LABEL: func.func @recomputed
shard.grid @mesh(shape = 1x2x1)
func.func @recomputed(%x: tensor<4x8xf32>) -> tensor<8x8xf32> {
  %h = loom.relu %x : tensor<4x8xf32>
  %a = shard.all_gather %h on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y = loom.relu %a : tensor<8x8xf32>
  %t = loom.relu %y : tensor<8x8xf32>
  %b = shard.all_gather %h on @mesh grid_axes = [1] gather_axis = 0 {loom.recomputed} : tensor<4x8xf32> -> tensor<8x8xf32>
  %v = loom.relu %t : tensor<8x8xf32>
  %z = loom.add %b, %v : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %z : tensor<8x8xf32>
}

// -----

// Left as they are: a reduce-scatter of an argument (nothing to start it
// after), of bf16 (the buckets sum f32) and of a max; a gather of i64.
// SIZED-LABEL: func.func @kept
// SIZED-NOT:     loom.reduce_scatter_start
// SIZED-NOT:     loom.all_gather_start
// SIZED:         return
// SMALL-LABEL: func.func @kept
// AUTO-LABEL: func.func @kept
// OFF-LABEL: func.func @kept
shard.grid @mesh(shape = 1x2x1)
func.func @kept(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf32>, %d: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<8xi64>, tensor<8xf32>) {
  %ra = shard.reduce_scatter %a on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8xf32> -> tensor<4xf32>
  %hb = loom.relu %b : tensor<8xbf16>
  %rb = shard.reduce_scatter %hb on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8xbf16> -> tensor<4xbf16>
  %hc = loom.relu %c : tensor<8xf32>
  %rc = shard.reduce_scatter %hc on @mesh grid_axes = [1] reduction = max scatter_axis = 0 : tensor<8xf32> -> tensor<4xf32>
  %gd = shard.all_gather %d on @mesh grid_axes = [1] gather_axis = 0 : tensor<4xi64> -> tensor<8xi64>
  %t = loom.relu %c : tensor<8xf32>
  return %ra, %rb, %rc, %gd, %t : tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<8xi64>, tensor<8xf32>
}
