// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-split-fused-projections))' | FileCheck %s

// q, k and v as one linear and a split: one linear per block, the weight
// [8, 24] viewed as [8, 3, 8] and the bias [24] as [3, 8].
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[W:[^:]*]]: tensor<8x3x8xf32> {loom.fused_blocks = array<i64: 1, 3>, loom.param = "qkv.weight"}
// CHECK-SAME:    %[[B:[^:]*]]: tensor<3x8xf32> {loom.fused_blocks = array<i64: 0, 3>, loom.param = "qkv.bias"}
// CHECK:         %[[W0:.*]] = loom.slice %[[W]] axes [1] starts [0] ends [1] steps [1] : tensor<8x3x8xf32> -> tensor<8x1x8xf32>
// CHECK-NEXT:    %[[W0R:.*]] = loom.reshape %[[W0]] [8, 8] : tensor<8x1x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT:    %[[B0:.*]] = loom.slice %[[B]] axes [0] starts [0] ends [1] steps [1] : tensor<3x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:    %[[B0R:.*]] = loom.reshape %[[B0]] [8] : tensor<1x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %[[Q:.*]] = loom.linear %{{.*}}, %[[W0R]], %[[B0R]] : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[Q3:.*]] = loom.reshape %[[Q]] [2, 2, 8] : tensor<4x8xf32> -> tensor<2x2x8xf32>
// CHECK:         loom.slice %[[W]] axes [1] starts [1] ends [2]
// CHECK:         loom.slice %[[W]] axes [1] starts [2] ends [3]
// CHECK:         %[[V3:.*]] = loom.reshape %{{.*}} [2, 2, 8] : tensor<4x8xf32> -> tensor<2x2x8xf32>
// CHECK-NOT:     tensor<4x24xf32>
// CHECK:         loom.add %[[Q3]], %{{.*}}
// CHECK:         loom.add %{{.*}}, %[[V3]]
func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %w: tensor<8x24xf32> {loom.param = "qkv.weight"},
                %b: tensor<24xf32> {loom.param = "qkv.bias"}) -> (tensor<2x2x8xf32> {loom.output = "y"}) {
  %0 = loom.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<4x24xf32>
  %1 = loom.reshape %0 [2, 2, 24] : tensor<4x24xf32> -> tensor<2x2x24xf32>
  %k = loom.slice %1 axes [2] starts [8] ends [16] steps [1] : tensor<2x2x24xf32> -> tensor<2x2x8xf32>
  %q = loom.slice %1 axes [2] starts [0] ends [8] steps [1] : tensor<2x2x24xf32> -> tensor<2x2x8xf32>
  %v = loom.slice %1 axes [2] starts [16] ends [24] steps [1] : tensor<2x2x24xf32> -> tensor<2x2x8xf32>
  %2 = loom.add %q, %k : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %3 = loom.add %2, %v : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  return %3 : tensor<2x2x8xf32>
}

// -----

// torch's transposed weight [2*4, 8] without a bias: [2, 4, 8], blocks first.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    tensor<2x4x8xf32> {loom.fused_blocks = array<i64: 0, 2>, loom.param = "kv.weight"}
// CHECK:         loom.slice %{{.*}} axes [0] starts [0] ends [1] steps [1] : tensor<2x4x8xf32> -> tensor<1x4x8xf32>
// CHECK:         loom.linear %{{.*}}, %{{.*}} {transpose_weight} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %w: tensor<8x8xf32> {loom.param = "kv.weight"}) -> (tensor<4x4xf32> {loom.output = "y"}) {
  %0 = loom.linear %x, %w {transpose_weight} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %k = loom.slice %0 axes [1] starts [0] ends [4] steps [1] : tensor<4x8xf32> -> tensor<4x4xf32>
  %v = loom.slice %0 axes [1] starts [4] ends [8] steps [1] : tensor<4x8xf32> -> tensor<4x4xf32>
  %1 = loom.mul %k, %v : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// -----

// Left alone: unequal blocks, a result read whole as well, a weight another
// op reads, a weight a tied copy names.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    tensor<8x12xf32> {loom.param = "a"}
// CHECK-SAME:    tensor<8x12xf32> {loom.param = "b"}
// CHECK-SAME:    tensor<8x12xf32> {loom.param = "c"}
// CHECK-NOT:     loom.fused_blocks
// CHECK-COUNT-3: loom.linear %{{.*}} : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
module attributes {loom.tied = {"a.copy" = {of = "a"}}} {
func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                %a: tensor<8x12xf32> {loom.param = "a"},
                %b: tensor<8x12xf32> {loom.param = "b"},
                %c: tensor<8x12xf32> {loom.param = "c"})
    -> (tensor<4x4xf32> {loom.output = "y"}, tensor<4x8xf32> {loom.output = "z"}, tensor<4x12xf32> {loom.output = "w"}, tensor<8x12xf32> {loom.output = "c"}) {
  %0 = loom.linear %x, %a : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
  %a0 = loom.slice %0 axes [1] starts [0] ends [6] steps [1] : tensor<4x12xf32> -> tensor<4x6xf32>
  %a1 = loom.slice %0 axes [1] starts [6] ends [12] steps [1] : tensor<4x12xf32> -> tensor<4x6xf32>
  %1 = loom.linear %x, %b : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
  %b0 = loom.slice %1 axes [1] starts [0] ends [4] steps [1] : tensor<4x12xf32> -> tensor<4x4xf32>
  %b1 = loom.slice %1 axes [1] starts [4] ends [12] steps [1] : tensor<4x12xf32> -> tensor<4x8xf32>
  %2 = loom.linear %x, %c : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
  %c0 = loom.slice %2 axes [1] starts [0] ends [6] steps [1] : tensor<4x12xf32> -> tensor<4x6xf32>
  %c1 = loom.slice %2 axes [1] starts [6] ends [12] steps [1] : tensor<4x12xf32> -> tensor<4x6xf32>
  %s = loom.add %a0, %a1 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %t = loom.add %c0, %c1 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %u = loom.add %s, %t : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %y = loom.slice %u axes [1] starts [0] ends [4] steps [1] : tensor<4x6xf32> -> tensor<4x4xf32>
  %z = loom.add %b0, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %z, %b1, %2, %c : tensor<4x4xf32>, tensor<4x8xf32>, tensor<4x12xf32>, tensor<8x12xf32>
}
}
