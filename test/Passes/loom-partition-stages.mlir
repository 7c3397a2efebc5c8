// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=2 pp=2 micro=2}, loom-partition-stages)' | FileCheck %s --check-prefix=TWO
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=4 pp=4 micro=4}, loom-partition-stages)' | FileCheck %s --check-prefix=FOUR
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=4 pp=4 micro=8}, loom-partition-stages)' | FileCheck %s --check-prefix=1F1B
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=2 pp=2 micro=4}, loom-partition-stages{schedule=interleaved virtual-stages=2})' | FileCheck %s --check-prefix=INTERLEAVED
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=4 pp=4 micro=8}, loom-partition-stages{schedule=zb-h1})' | FileCheck %s --check-prefix=ZB
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=2 pp=2 micro=4}, loom-partition-stages{schedule=gpipe})' | FileCheck %s --check-prefix=GPIPE
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=2 micro=2}, loom-partition-stages)' | FileCheck %s --check-prefix=NONE

// A 4-layer model (layers numbered in the node names, an embedding before
// them, a head and the loss after) of equal layers.

// Two stages of two layers: the embedding with the first, the head and the
// loss with the last. Backward ops have their forward op's stage (and
// loom.backward), updates their parameter's.
// TWO:       loom.pipeline = {layers = [array<i64: 0, 1>, array<i64: 2, 3>], order = ["F0 F1 B0 B1", "F0 B0 F1 B1"], schedule = "1f1b"
// TWO-LABEL: func.func @main
// TWO:         loom.matmul %arg0, %arg1 {loom.stage = 0 : i64}
// TWO:         loom.matmul %{{.*}}, %arg3 {loom.stage = 0 : i64}
// TWO:         loom.matmul %{{.*}}, %arg4 {loom.stage = 1 : i64}
// TWO:         loom.matmul %{{.*}}, %arg6 {loom.stage = 1 : i64}
// TWO:         loom.mse %{{.*}} {loom.stage = 1 : i64}
// TWO:         loom.mse_grad %{{.*}} {loom.backward, loom.stage = 1 : i64}
// TWO:         loom.matmul %{{.*}}, %arg4 {loom.backward, loom.stage = 1 : i64, transpose_rhs}
// TWO:         loom.matmul %{{.*}}, %arg3 {loom.backward, loom.stage = 0 : i64, transpose_rhs}
// TWO:         loom.sgd %arg1, %{{.*}} {{{.*}}loom.stage = 0 : i64
// TWO:         loom.sgd %arg3, %{{.*}} {{{.*}}loom.stage = 0 : i64
// TWO:         loom.sgd %arg4, %{{.*}} {{{.*}}loom.stage = 1 : i64
// TWO:         loom.sgd %arg6, %{{.*}} {{{.*}}loom.stage = 1 : i64

// Four stages of one layer each.
// FOUR: layers = [array<i64: 0, 0>, array<i64: 1, 1>, array<i64: 2, 2>, array<i64: 3, 3>]

// 1F1B for 4 devices and 8 micro-batches: p - d - 1 warm-up forwards, then
// one forward and one backward in turn.
// 1F1B: order = ["F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7", "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7", "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7", "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"], schedule = "1f1b"

// Interleaved, 2 devices with 2 chunks each: 4 stages of one layer, stage s
// on device s mod 2; `.c` is the chunk.
// INTERLEAVED: layers = [array<i64: 0, 0>, array<i64: 1, 1>, array<i64: 2, 2>, array<i64: 3, 3>], order = ["F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0", "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0"], schedule = "interleaved"
// INTERLEAVED-SAME: virtual_stages = 2

// ZB-H1: device d holds back its first d weight gradients (W) and runs them
// in the cool-down's waits and at the end.
// ZB: order = ["F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7", "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7", "F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 B7 W5 W6 W7", "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7"], schedule = "zb-h1"

// GPipe: every forward, then every backward.
// GPIPE: order = ["F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3"], schedule = "gpipe"

// Without pipeline stages the pass marks nothing.
// NONE-NOT: loom.stage
// NONE-NOT: loom.pipeline
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