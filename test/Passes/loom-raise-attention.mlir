// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-raise-attention))' | FileCheck %s

// GPT-2 as exported: K^T is the transpose of the head split, the scale a
// division, the causal mask a lower-triangular select condition.
// CHECK-LABEL: func.func @gpt2_causal
// CHECK-SAME:    (%[[Q:[^:]*]]: tensor<2x4x8x16xf32>, %[[KH:[^:]*]]: tensor<2x8x4x16xf32>, %[[V:[^:]*]]: tensor<2x4x8x16xf32>)
// CHECK:         %[[K:.*]] = loom.transpose %[[KH]] [0, 2, 1, 3]
// CHECK:         %[[O:.*]] = loom.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64}
// CHECK-NOT:     loom.softmax
// CHECK:         return %[[O]]
func.func @gpt2_causal(%q: tensor<2x4x8x16xf32>, %kh: tensor<2x8x4x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %tril = loom.constant dense<[[[[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x8x8xf32>
  %min = loom.constant dense<-3.40282347E+38> : tensor<f32>
  %c4 = loom.constant dense<4.0> : tensor<f32>
  %kt = loom.transpose %kh [0, 2, 3, 1] : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
  %s = loom.batch_matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %d = loom.div %s, %c4 : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %m = loom.select %tril, %d, %min : (tensor<1x1x8x8xf32>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = loom.softmax %m axis 3 : tensor<2x4x8x8xf32>
  %o = loom.batch_matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// LLaMA as exported: a product by the scale and an additive causal mask
// broadcast over the batch; K^T by `transpose_rhs`.
// CHECK-LABEL: func.func @llama_additive
// CHECK:         loom.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT:     loom.add
func.func @llama_additive(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32> {
  %mask = loom.constant dense<[[[[0.0, -3.0e+38, -3.0e+38], [0.0, 0.0, -3.0e+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %half = loom.constant dense<0.5> : tensor<f32>
  %s = loom.batch_matmul %q, %k {transpose_rhs} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x3xf32>
  %sc = loom.mul %s, %half : (tensor<2x2x3x3xf32>, tensor<f32>) -> tensor<2x2x3x3xf32>
  %mb = loom.expand %mask [2, -1, -1, -1] : tensor<1x1x3x3xf32> -> tensor<2x1x3x3xf32>
  %a = loom.add %sc, %mb : (tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<2x2x3x3xf32>
  %p = loom.softmax %a axis 3 : tensor<2x2x3x3xf32>
  %o = loom.batch_matmul %p, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// BERT without an attention-mask input: no mask, or an all-zero one.
// CHECK-LABEL: func.func @bert_unmasked
// CHECK:         loom.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.000000e+00 : f64}
func.func @bert_unmasked(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %zero = loom.constant dense<0.0> : tensor<1x1x3xf32>
  %s = loom.batch_matmul %q, %k {transpose_rhs} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  %a = loom.add %s, %zero : (tensor<2x3x3xf32>, tensor<1x1x3xf32>) -> tensor<2x3x3xf32>
  %p = loom.softmax %a axis 2 : tensor<2x3x3xf32>
  %o = loom.batch_matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// -----

// A mask that is not causal (here: upper triangular) is left alone.
// CHECK-LABEL: func.func @not_causal
// CHECK-NOT:     loom.attention
// CHECK:         loom.softmax
func.func @not_causal(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %mask = loom.constant dense<[[[1.0, 1.0], [0.0, 1.0]]]> : tensor<1x2x2xf32>
  %min = loom.constant dense<-1.0e+9> : tensor<f32>
  %s = loom.batch_matmul %q, %k {transpose_rhs} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x2xf32>
  %m = loom.select %mask, %s, %min : (tensor<1x2x2xf32>, tensor<1x2x2xf32>, tensor<f32>) -> tensor<1x2x2xf32>
  %p = loom.softmax %m axis 2 : tensor<1x2x2xf32>
  %o = loom.batch_matmul %p, %v : (tensor<1x2x2xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return %o : tensor<1x2x4xf32>
}

// -----

// Probabilities used elsewhere (returned here) must stay materialised.
// CHECK-LABEL: func.func @probabilities_reused
// CHECK-NOT:     loom.attention
func.func @probabilities_reused(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2xf32>) {
  %s = loom.batch_matmul %q, %k {transpose_rhs} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x2xf32>
  %p = loom.softmax %s axis 2 : tensor<1x2x2xf32>
  %o = loom.batch_matmul %p, %v : (tensor<1x2x2xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return %o, %p : tensor<1x2x4xf32>, tensor<1x2x2xf32>
}

// -----

// A softmax over the queries (not the last axis) is not attention.
// CHECK-LABEL: func.func @softmax_wrong_axis
// CHECK-NOT:     loom.attention
func.func @softmax_wrong_axis(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %s = loom.batch_matmul %q, %k {transpose_rhs} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x2xf32>
  %p = loom.softmax %s axis 1 : tensor<1x2x2xf32>
  %o = loom.batch_matmul %p, %v : (tensor<1x2x2xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return %o : tensor<1x2x4xf32>
}
