// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-autodiff))' | FileCheck %s

// An attention-like block: the embedding gradient scatters into the table,
// softmax and layer norm use their fused backward ops, and the batched
// products transpose the other operand.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    -> (tensor<f32> {loom.loss}, tensor<10x4xf32> {loom.grad = "emb"}, tensor<4xf32> {loom.grad = "g"}, tensor<4xf32> {loom.grad = "b"})
// CHECK:         %[[E:.*]] = loom.gather %[[EMB:[^,]*]], %[[IDS:[^ ]*]] axis 0
// CHECK:         %[[N:.*]] = loom.layer_norm %[[E]]
// CHECK:         %[[S:.*]] = loom.batch_matmul %[[N]], %[[N]] {transpose_rhs}
// CHECK:         %[[P:.*]] = loom.softmax %[[S]] axis 2
// CHECK:         %[[DP:.*]] = loom.batch_matmul %{{.*}}, %[[N]] {transpose_rhs}
// CHECK:         loom.batch_matmul %[[P]], %{{.*}} {transpose_lhs}
// CHECK:         %[[DS:.*]] = loom.softmax_grad %[[DP]], %[[P]] axis 2
// CHECK:         %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = loom.layer_norm_grad %{{.*}}, %[[E]], %{{.*}} axis 2
// CHECK:         %[[DEMB:.*]] = loom.gather_grad %[[DX]], %[[IDS]], %[[EMB]] axis 0
// CHECK:         return %{{.*}}, %[[DEMB]], %[[DG]], %[[DB]]
func.func @main(%ids: tensor<2x3xi64> {loom.input = "ids"}, %emb: tensor<10x4xf32> {loom.param = "emb"},
                %g: tensor<4xf32> {loom.param = "g"}, %b: tensor<4xf32> {loom.param = "b"},
                %t: tensor<2x3x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %e = loom.gather %emb, %ids axis 0 : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %n = loom.layer_norm %e, %g, %b axis 2 {epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %s = loom.batch_matmul %n, %n {transpose_rhs} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  %p = loom.softmax %s axis 2 : tensor<2x3x3xf32>
  %o = loom.batch_matmul %p, %n : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %l = loom.mse %o, %t : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Convolution, batch norm and max pooling use their own backward ops; the
// input image gets no gradient, so no input-gradient convolution is built.
// CHECK-LABEL: func.func @main
// CHECK:         loom.max_pool2d_grad
// CHECK:         loom.batch_norm_grad
// CHECK-NOT:     loom.conv2d_grad_input
// CHECK:         loom.conv2d_grad_filter
func.func @main(%x: tensor<2x3x8x8xf32> {loom.input = "x"}, %w: tensor<4x3x3x3xf32> {loom.param = "w"},
                %g: tensor<4xf32> {loom.param = "g"}, %b: tensor<4xf32> {loom.param = "b"},
                %t: tensor<2x4x4x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %c = loom.conv2d %x, %w strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %n = loom.batch_norm %c, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %p = loom.max_pool2d %n kernel [2, 2] strides [2, 2] pads [0, 0, 0, 0] : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  %l = loom.mse %p, %t : tensor<2x4x4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Reductions broadcast the gradient back; mean scales it by the count.
// CHECK-LABEL: func.func @main
// CHECK:         %[[R:.*]] = loom.reshape %{{.*}} [0, -1] : tensor<2xf32> -> tensor<2x1xf32>
// CHECK:         %[[B:.*]] = loom.broadcast_like %[[R]], %{{.*}} : (tensor<2x1xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
// CHECK:         loom.scale %[[B]] by 2.000000e-01
func.func @main(%p: tensor<2x5xf32> {loom.param = "p"}, %t: tensor<2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %m = loom.reduce_mean %p axes [1] : tensor<2x5xf32> -> tensor<2xf32>
  %l = loom.mse %m, %t : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// reduce_max shares the gradient evenly among the elements equal to the max
// (PyTorch's amax): a 0/1 mask of them times the gradient over their count.
// CHECK-LABEL: func.func @main
// CHECK:         %[[G:.*]] = loom.reshape %{{.*}} [0, -1] : tensor<2xf32> -> tensor<2x1xf32>
// CHECK:         %[[M:.*]] = loom.reshape %[[Y:.*]] [0, -1] : tensor<2xf32> -> tensor<2x1xf32>
// CHECK:         %[[HIT:.*]] = loom.equal %{{.*}}, %[[M]] : (tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
// CHECK:         %[[N:.*]] = loom.reduce_sum %[[HIT]] axes [1] {keep_dims}
// CHECK:         %[[S:.*]] = loom.div %[[G]], %[[N]]
// CHECK:         loom.mul %[[HIT]], %[[S]] : (tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
func.func @main(%p: tensor<2x5xf32> {loom.param = "p"}, %t: tensor<2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
  %m = loom.reduce_max %p axes [1] : tensor<2x5xf32> -> tensor<2xf32>
  %l = loom.mse %m, %t : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
