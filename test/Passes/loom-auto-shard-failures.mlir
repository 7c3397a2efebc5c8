// RUN: loom-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(loom-train{loss=mse}, loom-plan{devices=2 tp=2 cluster=cpu:2 memory-budget-gib=0.000001 lower=false})'
// RUN: not loom-opt %s --pass-pipeline='builtin.module(loom-choose-mesh{devices=2 tp=2}, loom-auto-shard{cluster=tpu:9})' 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not loom-opt %s --pass-pipeline='builtin.module(loom-auto-shard)' 2>&1 | FileCheck %s --check-prefix=NOMESH

// CLUSTER: error: loom-auto-shard: bad cluster spec 'tpu:9': unknown preset 'tpu'
// NOMESH: error: loom-auto-shard needs a pp x dp x tp mesh and the entry function (run loom-choose-mesh first)

// Parameters and state that cannot fit however they are split.
// expected-error @below {{loom-auto-shard: no sharding fits the memory budget of 0.001 MiB per device}}
func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
    %w: tensor<16x16xf32> {loom.param = "w"}) -> (tensor<8x16xf32> {loom.output = "y"}) {
  %y = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
