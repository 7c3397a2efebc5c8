// RUN: loom-opt %s -split-input-file | loom-opt -split-input-file | FileCheck %s

// Every op parses, verifies, infers its type and prints back.
// CHECK-LABEL: func.func @round_trip
func.func @round_trip(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>,
                      %g: tensor<16xf32>, %ids: tensor<2x8xi64>, %e: tensor<100x16xf32>,
                      %img: tensor<2x3x8x8xf32>, %f: tensor<4x3x3x3xf32>, %c: tensor<4xf32>) {
  // CHECK: loom.linear %{{.*}} {transpose_weight} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %0 = loom.linear %x, %w, %b {transpose_weight} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK: loom.batch_matmul %{{.*}} {transpose_rhs} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  %1 = loom.batch_matmul %x, %x {transpose_rhs} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  // CHECK: loom.softmax %{{.*}} axis 2 : tensor<2x8x8xf32>
  %2 = loom.softmax %1 axis 2 : tensor<2x8x8xf32>
  // CHECK: loom.layer_norm %{{.*}} axis 2 {epsilon = 1.000000e-05 : f64}
  %3 = loom.layer_norm %x, %g, %g axis 2 {epsilon = 1.0e-5 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: loom.rms_norm
  %4 = loom.rms_norm %x, %g axis 2 {epsilon = 1.0e-6 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: loom.gelu %{{.*}} {approximate} : tensor<2x8x16xf32>
  %5 = loom.gelu %x {approximate} : tensor<2x8x16xf32>
  // CHECK: loom.gather %{{.*}} axis 0 : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %6 = loom.gather %e, %ids axis 0 : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  // CHECK: loom.gather_elements %{{.*}} axis 1 : (tensor<2x8x16xf32>, tensor<2x3x16xi64>) -> tensor<2x3x16xf32>
  %pick = loom.constant dense<1> : tensor<2x3x16xi64>
  %ge = loom.gather_elements %x, %pick axis 1 : (tensor<2x8x16xf32>, tensor<2x3x16xi64>) -> tensor<2x3x16xf32>
  // CHECK: loom.gather_elements_grad %{{.*}} axis 1 : (tensor<2x3x16xf32>, tensor<2x3x16xi64>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %gg = loom.gather_elements_grad %ge, %pick, %x axis 1 : (tensor<2x3x16xf32>, tensor<2x3x16xi64>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: loom.gather_nd %{{.*}} : (tensor<2x8x16xf32>, tensor<3x2xi64>) -> tensor<3x16xf32>
  // CHECK: loom.scatter_nd %{{.*}} {reduction = "add"} : (tensor<2x8x16xf32>, tensor<3x2xi64>, tensor<3x16xf32>) -> tensor<2x8x16xf32>
  %rows = loom.constant dense<1> : tensor<3x2xi64>
  %taken = loom.gather_nd %x, %rows : (tensor<2x8x16xf32>, tensor<3x2xi64>) -> tensor<3x16xf32>
  %put = loom.scatter_nd %x, %rows, %taken {reduction = "add"} : (tensor<2x8x16xf32>, tensor<3x2xi64>, tensor<3x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: loom.sin %{{.*}} : tensor<16xf32>
  %sin = loom.sin %g : tensor<16xf32>
  // CHECK: loom.cos %{{.*}} : tensor<16xf32>
  %cos = loom.cos %g : tensor<16xf32>
  // CHECK: loom.round_f16 %{{.*}} : tensor<16xf32>
  %half = loom.round_f16 %g : tensor<16xf32>
  // CHECK: loom.trunc %{{.*}} : tensor<16xf32>
  %whole = loom.trunc %g : tensor<16xf32>
  // CHECK: loom.transpose %{{.*}} [1, 0, 2] : tensor<2x8x16xf32> -> tensor<8x2x16xf32>
  %7 = loom.transpose %x [1, 0, 2] : tensor<2x8x16xf32> -> tensor<8x2x16xf32>
  // CHECK: loom.slice %{{.*}} axes [2] starts [4] ends [100] steps [2] : tensor<2x8x16xf32> -> tensor<2x8x6xf32>
  %8 = loom.slice %x axes [2] starts [4] ends [100] steps [2] : tensor<2x8x16xf32> -> tensor<2x8x6xf32>
  // CHECK: loom.concat %{{.*}} axis 2 : (tensor<2x8x16xf32>, tensor<2x8x6xf32>) -> tensor<2x8x22xf32>
  %9 = loom.concat %x, %8 axis 2 : (tensor<2x8x16xf32>, tensor<2x8x6xf32>) -> tensor<2x8x22xf32>
  // CHECK: loom.reduce_mean %{{.*}} axes [2] {keep_dims} : tensor<2x8x16xf32> -> tensor<2x8x1xf32>
  %10 = loom.reduce_mean %x axes [2] {keep_dims} : tensor<2x8x16xf32> -> tensor<2x8x1xf32>
  // CHECK: loom.expand %{{.*}} [-1, -1, 16] : tensor<2x8x1xf32> -> tensor<2x8x16xf32>
  %11 = loom.expand %10 [-1, -1, 16] : tensor<2x8x1xf32> -> tensor<2x8x16xf32>
  // CHECK: loom.select
  %12 = loom.select %11, %x, %3 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: loom.convert %{{.*}} to f32 : tensor<2x8xi64> -> tensor<2x8xf32>
  %13 = loom.convert %ids to f32 : tensor<2x8xi64> -> tensor<2x8xf32>
  // CHECK: loom.conv2d %{{.*}} strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %14 = loom.conv2d %img, %f strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: loom.batch_norm
  %15 = loom.batch_norm %14, %c, %c {epsilon = 1.0e-5 : f64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: loom.max_pool2d %{{.*}} kernel [3, 3] strides [2, 2] pads [1, 1, 1, 1] : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  %16 = loom.max_pool2d %15 kernel [3, 3] strides [2, 2] pads [1, 1, 1, 1] : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  // CHECK: loom.layer_norm_grad
  %17:3 = loom.layer_norm_grad %x, %x, %g axis 2 {epsilon = 1.0e-5 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  %s = loom.constant dense<1.0> : tensor<f32>
  // CHECK: loom.equal %{{.*}} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %18 = loom.equal %13, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: loom.less
  %19 = loom.less %13, %18 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: loom.less_equal
  %20 = loom.less_equal %19, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: loom.convert %{{.*}} to i64 : tensor<2x8xf32> -> tensor<2x8xi64>
  %21 = loom.convert %20 to i64 : tensor<2x8xf32> -> tensor<2x8xi64>
  return
}

// -----

// Compute ops take bf16 operands and infer bf16 results; losses stay f32
// scalars; converts go between i64, f32 and bf16.
// CHECK-LABEL: func.func @bf16_round_trip
func.func @bf16_round_trip(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>,
                           %ids: tensor<2x8xi64>, %t: tensor<2x8xi64>) -> tensor<f32> {
  // CHECK: loom.convert %{{.*}} to bf16 : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
  %xb = loom.convert %x to bf16 : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
  // CHECK: loom.convert %{{.*}} to bf16 : tensor<2x8xi64> -> tensor<2x8xbf16>
  %mb = loom.convert %ids to bf16 : tensor<2x8xi64> -> tensor<2x8xbf16>
  %wb = loom.convert %w to bf16 : tensor<32x16xf32> -> tensor<32x16xbf16>
  // CHECK: loom.linear %{{.*}} : (tensor<2x8x16xbf16>, tensor<32x16xbf16>) -> tensor<2x8x32xbf16>
  %y = loom.linear %xb, %wb {transpose_weight} : (tensor<2x8x16xbf16>, tensor<32x16xbf16>) -> tensor<2x8x32xbf16>
  // CHECK: loom.gelu %{{.*}} : tensor<2x8x32xbf16>
  %g = loom.gelu %y : tensor<2x8x32xbf16>
  // CHECK: loom.cross_entropy %{{.*}} : (tensor<2x8x32xbf16>, tensor<2x8xi64>) -> tensor<f32>
  %l = loom.cross_entropy %g, %t : (tensor<2x8x32xbf16>, tensor<2x8xi64>) -> tensor<f32>
  // CHECK: loom.convert %{{.*}} to f32 : tensor<2x8x32xbf16> -> tensor<2x8x32xf32>
  %back = loom.convert %g to f32 : tensor<2x8x32xbf16> -> tensor<2x8x32xf32>
  return %l : tensor<f32>
}

// -----

// A graph input and output held in f32 name their ONNX element type.
// CHECK-LABEL: func.func @boundary_types
// CHECK-SAME: {loom.input = "m", loom.onnx_type = "bool"}
// CHECK-SAME: {loom.onnx_type = "float64", loom.output = "y"}
func.func @boundary_types(%m: tensor<4xf32> {loom.input = "m", loom.onnx_type = "bool"}) -> (tensor<4xf32> {loom.output = "y", loom.onnx_type = "float64"}) {
  return %m : tensor<4xf32>
}

// -----

// The planner's marks and the mesh axes' names verify and print back.
// CHECK: shard.grid @mesh(shape = 2x2x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
// CHECK-LABEL: func.func @planned_marks
// CHECK: loom.relu %{{.*}} {loom.recompute = 0 : i64, loom.stage = 1 : i64, loom.zero_stage = 2 : i64}
shard.grid @mesh(shape = 2x2x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
func.func @planned_marks(%x: tensor<4xf32> {loom.input = "x"}) -> (tensor<4xf32> {loom.output = "y"}) {
  %y = loom.relu %x {loom.stage = 1, loom.recompute = 0, loom.zero_stage = 2} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A bucket's start and wait print back.
// CHECK-LABEL: func.func @bucket
// CHECK: %[[F:.*]]:2 = loom.all_reduce_start %{{.*}}, %{{.*}} on @mesh grid_axes = [1] bucket 3 : tensor<4x3xf32>, tensor<3xf32>
// CHECK: loom.all_reduce_wait %[[F]]#0, %[[F]]#1 bucket 3 : tensor<4x3xf32>, tensor<3xf32>
shard.grid @mesh(shape = 1x2x1)
func.func @bucket(%a: tensor<4x3xf32>, %b: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>) {
  %f:2 = loom.all_reduce_start %a, %b on @mesh grid_axes = [1] bucket 3 : tensor<4x3xf32>, tensor<3xf32>
  %s:2 = loom.all_reduce_wait %f#0, %f#1 bucket 3 : tensor<4x3xf32>, tensor<3xf32>
  return %s#0, %s#1 : tensor<4x3xf32>, tensor<3xf32>
}

// -----

// Buckets of reduce-scatters and all-gathers print back, each tensor with
// the dimension it is split along.
// CHECK-LABEL: func.func @block_buckets
// CHECK: %[[R:.*]]:2 = loom.reduce_scatter_start %{{.*}}, %{{.*}} on @mesh grid_axes = [1] dims = [0, 1] bucket 1 : tensor<4x3xf32>, tensor<3x4xf32> -> tensor<2x3xf32>, tensor<3x2xf32>
// CHECK: loom.reduce_scatter_wait %[[R]]#0, %[[R]]#1 bucket 1 : tensor<2x3xf32>, tensor<3x2xf32>
// CHECK: %[[G:.*]] = loom.all_gather_start %{{.*}} on @mesh grid_axes = [1] dims = [0] bucket 2 : tensor<2x3xbf16> -> tensor<4x3xbf16>
// CHECK: loom.all_gather_wait %[[G]] bucket 2 : tensor<4x3xbf16>
shard.grid @mesh(shape = 1x2x1)
func.func @block_buckets(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>, %c: tensor<2x3xbf16>) -> (tensor<2x3xf32>, tensor<3x2xf32>, tensor<4x3xbf16>) {
  %r:2 = loom.reduce_scatter_start %a, %b on @mesh grid_axes = [1] dims = [0, 1] bucket 1 : tensor<4x3xf32>, tensor<3x4xf32> -> tensor<2x3xf32>, tensor<3x2xf32>
  %s:2 = loom.reduce_scatter_wait %r#0, %r#1 bucket 1 : tensor<2x3xf32>, tensor<3x2xf32>
  %g = loom.all_gather_start %c on @mesh grid_axes = [1] dims = [0] bucket 2 : tensor<2x3xbf16> -> tensor<4x3xbf16>
  %w = loom.all_gather_wait %g bucket 2 : tensor<4x3xbf16>
  return %s#0, %s#1, %w : tensor<2x3xf32>, tensor<3x2xf32>, tensor<4x3xbf16>
}

// -----

// A micro-batch of integer data along the batch, and one of floats along
// another axis.
// CHECK-LABEL: func.func @micro_batch
// CHECK: loom.micro_batch %{{.*}} axis 0 index 1 of 4 : tensor<8x64xi64> -> tensor<2x64xi64>
// CHECK: loom.micro_batch %{{.*}} axis 1 index 0 of 2 : tensor<1x8x3xf32> -> tensor<1x4x3xf32>
func.func @micro_batch(%ids: tensor<8x64xi64>, %m: tensor<1x8x3xf32>) -> (tensor<2x64xi64>, tensor<1x4x3xf32>) {
  %a = loom.micro_batch %ids axis 0 index 1 of 4 : tensor<8x64xi64> -> tensor<2x64xi64>
  %b = loom.micro_batch %m axis 1 index 0 of 2 : tensor<1x8x3xf32> -> tensor<1x4x3xf32>
  return %a, %b : tensor<2x64xi64>, tensor<1x4x3xf32>
}
