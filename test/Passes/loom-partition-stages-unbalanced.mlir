// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=2 pp=2 micro=2}, loom-partition-stages)' | FileCheck %s --check-prefix=TWO
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-choose-mesh{devices=4 pp=4 micro=4}, loom-partition-stages)' | FileCheck %s --check-prefix=FOUR

// Layer 1 is an MLP 8 times wider than the other layers' linear, so it
// costs more than the other three together. On two stages it shares the
// first with layer 0 and the embedding (the other cut, layers 1 to 3 on the
// second stage, would be slower still); on four it is alone. Either way the
// stage times differ by less than that layer's own (unit-tested in
// StagePartitionTest, OneLargeLayerIsBalancedAround).
// TWO:  layers = [array<i64: 0, 1>, array<i64: 2, 3>]
// FOUR: layers = [array<i64: 0, 0>, array<i64: 1, 1>, array<i64: 2, 2>, array<i64: 3, 3>]
func.func @main(%x: tensor<32x64xf32> {loom.input = "x"}, %e: tensor<64x64xf32> {loom.param = "embed.w"},
                %w0: tensor<64x64xf32> {loom.param = "h.0.w"},
                %w1: tensor<64x512xf32> {loom.param = "h.1.w"}, %v1: tensor<512x64xf32> {loom.param = "h.1.v"},
                %w2: tensor<64x64xf32> {loom.param = "h.2.w"},
                %w3: tensor<64x64xf32> {loom.param = "h.3.w"},
                %wh: tensor<64x4xf32> {loom.param = "head.w"}) -> (tensor<32x4xf32> {loom.output = "y"}) {
  %e0 = loom.matmul %x, %e : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/embed/MatMul")
  %m0 = loom.matmul %e0, %w0 : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/h.0/MatMul")
  %t0 = loom.tanh %m0 : tensor<32x64xf32> loc("/h.0/Tanh")
  %u1 = loom.matmul %t0, %w1 : (tensor<32x64xf32>, tensor<64x512xf32>) -> tensor<32x512xf32> loc("/h.1/up/MatMul")
  %g1 = loom.tanh %u1 : tensor<32x512xf32> loc("/h.1/Tanh")
  %m1 = loom.matmul %g1, %v1 : (tensor<32x512xf32>, tensor<512x64xf32>) -> tensor<32x64xf32> loc("/h.1/down/MatMul")
  %m2 = loom.matmul %m1, %w2 : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/h.2/MatMul")
  %t2 = loom.tanh %m2 : tensor<32x64xf32> loc("/h.2/Tanh")
  %m3 = loom.matmul %t2, %w3 : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc("/h.3/MatMul")
  %t3 = loom.tanh %m3 : tensor<32x64xf32> loc("/h.3/Tanh")
  %h = loom.matmul %t3, %wh : (tensor<32x64xf32>, tensor<64x4xf32>) -> tensor<32x4xf32> loc("/head/MatMul")
  return %h : tensor<32x4xf32>
}