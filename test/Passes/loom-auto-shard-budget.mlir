// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse}, loom-plan{devices=2 tp=2 cluster=cpu:2 lower=false})' | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse}, loom-plan{devices=2 tp=2 cluster=cpu:2 memory-budget-gib=0.00001 lower=false})' | FileCheck %s --check-prefix=TIGHT
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse}, loom-plan{devices=2 tp=2 cluster=cpu:2 memory-budget-gib=0.000001 searched=true lower=false})' | FileCheck %s --check-prefix=LEAST

// A small MLP on two CPU ranks: splitting it saves less compute than the
// collectives cost, so everything stays replicated...
// CHECK-LABEL: func.func @main
// CHECK-NOT:     split_axes = {{\[\[}}
// CHECK:         return

// ...until its parameters and AdamW state (12.6 KiB replicated) must fit in
// 10.5 KiB: the first linear splits its output features, which halves the
// largest weight and its state at the least cost.
// TIGHT-LABEL: func.func @main
// TIGHT:         %[[S1:.*]] = shard.sharding @mesh split_axes = {{\[\[}}], [2]] : !shard.sharding
// TIGHT-NEXT:    shard.shard %arg1 to %[[S1]] : tensor<16x32xf32>
// TIGHT:         %[[S2:.*]] = shard.sharding @mesh split_axes = {{\[\[}}2]] : !shard.sharding
// TIGHT-NEXT:    shard.shard %arg2 to %[[S2]] : tensor<32xf32>
//
// Nothing fits 1 KiB (loom-auto-shard-failures.mlir); where a plan search
// that weighed the whole plan's memory chose the mesh (`searched`), the
// sharding of least memory instead: every parameter split.
// LEAST-LABEL: func.func @main
// LEAST:         %[[W1:.*]] = shard.sharding @mesh split_axes = {{\[\[}}], [2]] : !shard.sharding
// LEAST-NEXT:    shard.shard %arg1 to %[[W1]] : tensor<16x32xf32>
// LEAST:         %[[B1:.*]] = shard.sharding @mesh split_axes = {{\[\[}}2]] : !shard.sharding
// LEAST-NEXT:    shard.shard %arg2 to %[[B1]] : tensor<32xf32>
// LEAST:         %[[W2:.*]] = shard.sharding @mesh split_axes = {{\[\[}}], [2]] : !shard.sharding
// LEAST-NEXT:    shard.shard %arg3 to %[[W2]] : tensor<32x16xf32>
// LEAST:         %[[B2:.*]] = shard.sharding @mesh split_axes = {{\[\[}}2]] : !shard.sharding
// LEAST-NEXT:    shard.shard %arg4 to %[[B2]] : tensor<16xf32>
func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
    %w1: tensor<16x32xf32> {loom.param = "fc1.weight"}, %b1: tensor<32xf32> {loom.param = "fc1.bias"},
    %w2: tensor<32x16xf32> {loom.param = "fc2.weight"}, %b2: tensor<16xf32> {loom.param = "fc2.bias"})
    -> (tensor<8x16xf32> {loom.output = "y"}) {
  %h = loom.linear %x, %w1, %b1 : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = loom.relu %h : tensor<8x32xf32>
  %y = loom.linear %r, %w2, %b2 : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
