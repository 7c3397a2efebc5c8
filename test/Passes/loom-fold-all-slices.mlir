// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-fold-all-slices))' | FileCheck %s

// A slice of an embedding of constant ids is the embedding of fewer ids.
// CHECK-LABEL: func.func @constant_ids_follow_the_batch
// CHECK:         %[[C:.*]] = loom.constant dense<0> : tensor<4x64xi64>
// CHECK-NEXT:    %[[E:.*]] = loom.gather %arg0, %[[C]] axis 0 : (tensor<2x128xf32>, tensor<4x64xi64>) -> tensor<4x64x128xf32>
// CHECK-NOT:     shard.all_slice
// CHECK:         return %[[E]]
shard.grid @mesh(shape = 1x2x1)
func.func @constant_ids_follow_the_batch(%table: tensor<2x128xf32>) -> tensor<4x64x128xf32> {
  %c = loom.constant dense<0> : tensor<8x64xi64>
  %e = loom.gather %table, %c axis 0 : (tensor<2x128xf32>, tensor<8x64xi64>) -> tensor<8x64x128xf32>
  %s = shard.all_slice %e on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x64x128xf32> -> tensor<4x64x128xf32>
  return %s : tensor<4x64x128xf32>
}

// -----

// A slice along a loop the op needs whole (the softmax axis) stays, and so
// does a slice of a value with other users.
// CHECK-LABEL: func.func @slices_that_stay
// CHECK:         %[[P:.*]] = loom.softmax %arg0 axis 1
// CHECK-NEXT:    shard.all_slice %[[P]] on @mesh grid_axes = [1] slice_axis = 1
// CHECK:         %[[R:.*]] = loom.relu %arg0
// CHECK-NEXT:    shard.all_slice %[[R]] on @mesh grid_axes = [1] slice_axis = 0
shard.grid @mesh(shape = 1x2x1)
func.func @slices_that_stay(%x: tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<2x8xf32>, tensor<4x8xf32>) {
  %p = loom.softmax %x axis 1 : tensor<4x8xf32>
  %s = shard.all_slice %p on @mesh grid_axes = [1] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %r = loom.relu %x : tensor<4x8xf32>
  %t = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  return %s, %t, %r : tensor<4x4xf32>, tensor<2x8xf32>, tensor<4x8xf32>
}

// -----

// A parameter expanded to the batch (ViT's class token) is expanded to the
// local batch; a reshape that keeps the batch outermost reshapes the block.
// CHECK-LABEL: func.func @expand_and_reshape_take_the_local_shape
// CHECK:         %[[E:.*]] = loom.expand %arg0 [4, 1, 64] : tensor<1x1x64xf32> -> tensor<4x1x64xf32>
// CHECK:         %[[X:.*]] = shard.all_slice %arg1 on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    %[[R:.*]] = loom.reshape %[[X]] [4, 2, 3] : tensor<4x6xf32> -> tensor<4x2x3xf32>
// CHECK-NOT:     shard.all_slice
// CHECK:         return %[[E]], %[[R]]
shard.grid @mesh(shape = 1x2x1)
func.func @expand_and_reshape_take_the_local_shape(%cls: tensor<1x1x64xf32>, %x: tensor<8x6xf32>) -> (tensor<4x1x64xf32>, tensor<4x2x3xf32>) {
  %e = loom.expand %cls [8, -1, -1] : tensor<1x1x64xf32> -> tensor<8x1x64xf32>
  %s = shard.all_slice %e on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x1x64xf32> -> tensor<4x1x64xf32>
  %r = loom.reshape %x [8, 2, 3] : tensor<8x6xf32> -> tensor<8x2x3xf32>
  %t = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x2x3xf32> -> tensor<4x2x3xf32>
  return %s, %t : tensor<4x1x64xf32>, tensor<4x2x3xf32>
}

// -----

// Two identical slices of one value (two layers reading one mask, before
// CSE) both take the block computed locally.
// CHECK-LABEL: func.func @copies_of_one_slice
// CHECK:         %[[C:.*]] = loom.constant dense<-0.000000e+00> : tensor<4x1x1x32xf32>
// CHECK-NEXT:    %[[A:.*]] = loom.add %arg0, %[[C]] : (tensor<1x4x32x32xf32>, tensor<4x1x1x32xf32>) -> tensor<4x4x32x32xf32>
// CHECK-NOT:     shard.all_slice
// CHECK:         return %[[A]], %[[A]]
shard.grid @mesh(shape = 1x2x1)
func.func @copies_of_one_slice(%a: tensor<1x4x32x32xf32>) -> (tensor<4x4x32x32xf32>, tensor<4x4x32x32xf32>) {
  %c = loom.constant dense<-0.000000e+00> : tensor<8x1x1x32xf32>
  %m = loom.add %a, %c : (tensor<1x4x32x32xf32>, tensor<8x1x1x32xf32>) -> tensor<8x4x32x32xf32>
  %s = shard.all_slice %m on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x4x32x32xf32> -> tensor<4x4x32x32xf32>
  %t = shard.all_slice %m on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x4x32x32xf32> -> tensor<4x4x32x32xf32>
  return %s, %t : tensor<4x4x32x32xf32>, tensor<4x4x32x32xf32>
}
