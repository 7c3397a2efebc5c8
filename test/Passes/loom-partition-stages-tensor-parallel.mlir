// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=8 pp=4 tp=2 micro=4}, loom-partition-stages{memory-budget-gib=0.00005})' | FileCheck %s --check-prefix=TP2
// RUN: not loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=4 pp=4 micro=4}, loom-partition-stages{memory-budget-gib=0.00005})' 2>&1 | FileCheck %s --check-prefix=TP1
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=4 pp=4 micro=4}, loom-partition-stages{memory-budget-gib=-1})' | FileCheck %s --check-prefix=NOLIMIT

// The 4-layer model of loom-partition-stages.mlir in 4 stages on a device
// of 53687 bytes: a layer's weight and gradient (32 KiB) and its
// micro-batches' activations do not fit one device, but split over tp = 2
// devices they do (the stage partition takes the tp split as even).
// TP2: layers = [array<i64: 0, 0>, array<i64: 1, 1>, array<i64: 2, 2>, array<i64: 3, 3>]
// TP1: error: cannot cut the model into pipeline stages: no split of the 4 layers into 4 stages fits 53687 bytes a device
// A negative budget (a plan search chose the stages and checked their
// memory; the emitted arena is the proof) cuts by time alone.
// NOLIMIT: layers = [array<i64: 0, 0>, array<i64: 1, 1>, array<i64: 2, 2>, array<i64: 3, 3>]
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