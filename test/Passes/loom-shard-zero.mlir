// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse}, loom-plan{devices=2 zero=1 bucket-bytes=-1 block-bucket-bytes=-1})' | FileCheck %s --check-prefix=ZERO1
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse}, loom-plan{devices=2 zero=2 bucket-bytes=-1 block-bucket-bytes=-1})' | FileCheck %s --check-prefix=ZERO2
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse}, loom-plan{devices=2 zero=3 bucket-bytes=-1 block-bucket-bytes=-1})' | FileCheck %s --check-prefix=ZERO3
// RUN: not loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse}, loom-plan{devices=1 zero=1 bucket-bytes=-1 block-bucket-bytes=-1})' 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not loom-opt %s --pass-pipeline='builtin.module(loom-choose-mesh{devices=2}, loom-shard-zero{stage=4})' 2>&1 | FileCheck %s --check-prefix=STAGE
// (bucket-bytes=-1: the gradients' sums stay blocking all-reduces here;
// loom-bucket-all-reduces.mlir tests the buckets.)

// Two linears, AdamW, dp = 2.
// ZeRO-1: each rank keeps half of every optimizer state (dimension 0) and
// updates its half of each parameter from its half of the all-reduced
// gradient; the halves are gathered back into the whole parameter.
// ZERO1:       shard.grid @mesh(shape = 1x2x1) {loom.mesh_axes = ["pp", "dp", "tp"], loom.zero_stage = 1 : i64}
// ZERO1-LABEL: func.func @main
// ZERO1-SAME:    %[[W:[^:]*]]: tensor<64x128xf32> {loom.param = "fc1.weight"}
// ZERO1-SAME:    %[[M:[^:]*]]: tensor<32x128xf32> {loom.param = "fc1.weight", loom.split_axes = [array<i64: 1>, array<i64>], loom.state = "exp_avg"}
// ZERO1-SAME:    %[[V:[^:]*]]: tensor<32x128xf32> {loom.param = "fc1.weight", loom.split_axes = [array<i64: 1>, array<i64>], loom.state = "exp_avg_sq"}
// ZERO1:         %[[G:.*]] = shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<64x128xf32>
// ZERO1:         %[[WB:.*]] = shard.all_slice %[[W]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<64x128xf32> -> tensor<32x128xf32>
// ZERO1-NEXT:    %[[GB:.*]] = shard.all_slice %[[G]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<64x128xf32> -> tensor<32x128xf32>
// ZERO1-NEXT:    %[[NEW:[^,]*]], %[[NM:[^,]*]], %[[NV:[^ ]*]] = loom.adamw %[[WB]], %[[GB]], %[[M]], %[[V]]
// ZERO1-NEXT:    %[[WHOLE:.*]] = shard.all_gather %[[NEW]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<32x128xf32> -> tensor<64x128xf32>
// ZERO1:         return %{{[^,]*}}, %[[WHOLE]], {{.*}}%[[NM]], %[[NV]],
// ZERO1-NOT:     shard.reduce_scatter

// ZeRO-2: the gradient's all-reduce and slice are one reduce-scatter.
// ZERO2-LABEL: func.func @main
// ZERO2-NOT:     shard.all_reduce {{.*}} tensor<64x128xf32>
// ZERO2:         %[[GB:.*]] = shard.reduce_scatter %{{.*}} on @mesh grid_axes = [1] scatter_axis = 0 : tensor<64x128xf32> -> tensor<32x128xf32>
// ZERO2-NEXT:    loom.adamw %{{.*}}, %[[GB]],

// ZeRO-3: the parameters too; each is gathered whole before it is used, and
// the update returns the rank's half.
// ZERO3-LABEL: func.func @main
// ZERO3-SAME:    %[[W:[^:]*]]: tensor<32x128xf32> {loom.param = "fc1.weight", loom.split_axes = [array<i64: 1>, array<i64>]}
// ZERO3:         shard.all_gather %[[W]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<32x128xf32> -> tensor<64x128xf32>
// ZERO3:         %[[GB:.*]] = shard.reduce_scatter %{{.*}} : tensor<64x128xf32> -> tensor<32x128xf32>
// ZERO3-NEXT:    %[[NEW:[^,]*]], {{.*}} = loom.adamw %[[W]], %[[GB]],
// ZERO3:         return %{{[^,]*}}, %[[NEW]],

// NODP: error: ZeRO stage 1 splits over dp, which is 1 on this mesh; use zero=0 or a mesh with dp > 1
// STAGE: error: ZeRO stage must be 0 to 3, got 4
func.func @main(%x: tensor<8x64xf32> {loom.input = "x"},
    %w1: tensor<64x128xf32> {loom.param = "fc1.weight"}, %b1: tensor<128xf32> {loom.param = "fc1.bias"},
    %w2: tensor<128x64xf32> {loom.param = "fc2.weight"}, %b2: tensor<64xf32> {loom.param = "fc2.bias"})
    -> (tensor<8x64xf32> {loom.output = "y"}) {
  %h = loom.linear %x, %w1, %b1 : (tensor<8x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<8x128xf32>
  %r = loom.relu %h : tensor<8x128xf32>
  %y = loom.linear %r, %w2, %b2 : (tensor<8x128xf32>, tensor<128x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
