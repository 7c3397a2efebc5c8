// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=4 tp=4 cluster=h100:1x4 lower=false bucket-bytes=-1 block-bucket-bytes=-1})' | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=4 tp=4 cluster=h100:1x4 bucket-bytes=-1 block-bucket-bytes=-1})' | FileCheck %s --check-prefix=LOWERED
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=4 tp=4 cluster=h100:1x4 bucket-bytes=-1 block-bucket-bytes=-1})' | grep -c shard.reduce_scatter | FileCheck %s --check-prefix=RS-COUNT
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=4 tp=4 cluster=h100:1x4 bucket-bytes=-1 block-bucket-bytes=-1})' | grep -c shard.all_gather | FileCheck %s --check-prefix=AG-COUNT
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=4 tp=4 cluster=h100:1x4 bucket-bytes=-1 block-bucket-bytes=-1})' | grep -c shard.all_reduce | FileCheck %s --check-prefix=AR-COUNT
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=8 dp=2 tp=4 cluster=h100:1x8 bucket-bytes=-1 block-bucket-bytes=-1})' | FileCheck %s --check-prefix=DP
// (bucket-bytes=-1: the gradients' sums stay blocking all-reduces here;
// loom-bucket-all-reduces.mlir tests the buckets.)

// A 2-layer transformer as torch exports it (layer norm; q, k and v as one
// linear of 3*d outputs and a split; causal attention over heads; the output
// projection; a GELU MLP; residual adds), on tp = 4 of an H100 node. With
// the fused projection viewed by blocks (loom-split-fused-projections), the
// ILP finds Megatron's partition by itself: q, k and v (each rank its
// quarter of every block) and the first MLP linear split their output
// features, the attention projection and the second MLP linear their input
// features; layer norms and the other biases stay replicated.
// CHECK-LABEL: func.func @main
// CHECK:         %[[QKV:.*]] = shard.sharding @mesh split_axes = {{\[\[}}], [], [2]] : !shard.sharding
// CHECK-NEXT:    shard.shard %arg3 to %[[QKV]] : tensor<1024x3x1024xf32>
// CHECK:         %[[QKVB:.*]] = shard.sharding @mesh split_axes = {{\[\[}}], [2]] : !shard.sharding
// CHECK-NEXT:    shard.shard %arg4 to %[[QKVB]] : tensor<3x1024xf32>
// CHECK:         %[[ROW:.*]] = shard.sharding @mesh split_axes = {{\[\[}}2]] : !shard.sharding
// CHECK-NEXT:    shard.shard %arg5 to %[[ROW]] : tensor<1024x1024xf32>

// Lowered: each rank holds a quarter of the heads and of the MLP. Each
// row-parallel linear's partial sums are reduce-scattered over tp along the
// hidden dimension (its bias added to the rank's quarter) and all-gathered
// before the next op that needs them whole: Megatron's all-reduce as a
// reduce-scatter and an all-gather, the same bytes, and the sums of the
// backward's q, k, v and MLP input gradients summed once. Per layer two of
// each forward and two of each backward (8 and 8 in all); the one all-reduce
// is the loss's; no all-to-all.
// LOWERED-LABEL: func.func @main
// LOWERED-SAME:    tensor<1024x3x256xf32> {loom.fused_blocks = array<i64: 1, 3>, loom.param = "h.0.attn.c_attn.weight", loom.split_axes = [array<i64>, array<i64>, array<i64: 2>]}
// LOWERED-SAME:    tensor<3x256xf32> {loom.fused_blocks = array<i64: 0, 3>, loom.param = "h.0.attn.c_attn.bias", loom.split_axes = [array<i64>, array<i64: 2>]}
// LOWERED-SAME:    tensor<256x1024xf32> {loom.param = "h.0.attn.c_proj.weight", loom.split_axes = [array<i64: 2>, array<i64>]}
// LOWERED-SAME:    tensor<1024x1024xf32> {loom.param = "h.0.mlp.c_fc.weight", loom.split_axes = [array<i64>, array<i64: 2>]}
// LOWERED-SAME:    tensor<1024x1024xf32> {loom.param = "h.0.mlp.c_proj.weight", loom.split_axes = [array<i64: 2>, array<i64>]}
// LOWERED-SAME:    tensor<1024x3x256xf32> {loom.fused_blocks = array<i64: 1, 3>, loom.param = "h.1.attn.c_attn.weight", loom.split_axes = [array<i64>, array<i64>, array<i64: 2>]}
// LOWERED-SAME:    tensor<1024x1024xf32> {loom.param = "h.1.mlp.c_proj.weight", loom.split_axes = [array<i64: 2>, array<i64>]}
// LOWERED-NOT:     shard.all_to_all
// LOWERED:         loom.attention {{.*}} : (tensor<4x4x128x64xf32>
// LOWERED:         %[[O:.*]] = shard.reduce_scatter %{{.*}} on @mesh grid_axes = [2] scatter_axis = 1 : tensor<512x1024xf32> -> tensor<512x256xf32>
// LOWERED-NEXT:    %[[B:.*]] = shard.all_slice %arg6 on @mesh grid_axes = [2] slice_axis = 0 : tensor<1024xf32> -> tensor<256xf32>
// LOWERED-NEXT:    loom.add %[[O]], %[[B]] : (tensor<512x256xf32>, tensor<256xf32>)
// LOWERED:         shard.all_gather %{{.*}} on @mesh grid_axes = [2] gather_axis = 2 : tensor<4x128x256xf32> -> tensor<4x128x1024xf32>
// LOWERED-NOT:     shard.all_to_all
// RS-COUNT: 8
// AG-COUNT: 8
// AR-COUNT: 1

// dp = 2 x tp = 4: the batch splits over dp and the weights over tp as
// before; the gradients are summed over dp (a fused weight's block by block).
// DP-LABEL:  func.func @main
// DP-SAME:     tensor<2x128x1024xf32> {loom.input = "x"}
// DP-SAME:     tensor<1024x3x256xf32> {loom.fused_blocks = array<i64: 1, 3>, loom.param = "h.0.attn.c_attn.weight", loom.split_axes = [array<i64>, array<i64>, array<i64: 2>]}
// DP:          shard.reduce_scatter {{.*}} grid_axes = [2] scatter_axis = 1 : tensor<256x1024xf32>
// DP:          shard.all_reduce {{.*}} grid_axes = [1] : tensor<1024x1x256xf32>

func.func @main(%x: tensor<4x128x1024xf32> {loom.input = "x"},
    %ln1w_0: tensor<1024xf32> {loom.param = "h.0.ln_1.weight"},
    %ln1b_0: tensor<1024xf32> {loom.param = "h.0.ln_1.bias"},
    %wqkv_0: tensor<1024x3072xf32> {loom.param = "h.0.attn.c_attn.weight"},
    %bqkv_0: tensor<3072xf32> {loom.param = "h.0.attn.c_attn.bias"},
    %wo_0: tensor<1024x1024xf32> {loom.param = "h.0.attn.c_proj.weight"},
    %bo_0: tensor<1024xf32> {loom.param = "h.0.attn.c_proj.bias"},
    %ln2w_0: tensor<1024xf32> {loom.param = "h.0.ln_2.weight"},
    %ln2b_0: tensor<1024xf32> {loom.param = "h.0.ln_2.bias"},
    %w1_0: tensor<1024x4096xf32> {loom.param = "h.0.mlp.c_fc.weight"},
    %b1_0: tensor<4096xf32> {loom.param = "h.0.mlp.c_fc.bias"},
    %w2_0: tensor<4096x1024xf32> {loom.param = "h.0.mlp.c_proj.weight"},
    %b2_0: tensor<1024xf32> {loom.param = "h.0.mlp.c_proj.bias"},
    %ln1w_1: tensor<1024xf32> {loom.param = "h.1.ln_1.weight"},
    %ln1b_1: tensor<1024xf32> {loom.param = "h.1.ln_1.bias"},
    %wqkv_1: tensor<1024x3072xf32> {loom.param = "h.1.attn.c_attn.weight"},
    %bqkv_1: tensor<3072xf32> {loom.param = "h.1.attn.c_attn.bias"},
    %wo_1: tensor<1024x1024xf32> {loom.param = "h.1.attn.c_proj.weight"},
    %bo_1: tensor<1024xf32> {loom.param = "h.1.attn.c_proj.bias"},
    %ln2w_1: tensor<1024xf32> {loom.param = "h.1.ln_2.weight"},
    %ln2b_1: tensor<1024xf32> {loom.param = "h.1.ln_2.bias"},
    %w1_1: tensor<1024x4096xf32> {loom.param = "h.1.mlp.c_fc.weight"},
    %b1_1: tensor<4096xf32> {loom.param = "h.1.mlp.c_fc.bias"},
    %w2_1: tensor<4096x1024xf32> {loom.param = "h.1.mlp.c_proj.weight"},
    %b2_1: tensor<1024xf32> {loom.param = "h.1.mlp.c_proj.bias"})
    -> (tensor<4x128x1024xf32> {loom.output = "y"}) {
  %l0_0 = loom.layer_norm %x, %ln1w_0, %ln1b_0 axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x128x1024xf32>, tensor<1024xf32>, tensor<1024xf32>) -> tensor<4x128x1024xf32>
  %l0_1 = loom.reshape %l0_0 [-1, 1024] : tensor<4x128x1024xf32> -> tensor<512x1024xf32>
  %l0_qkv = loom.linear %l0_1, %wqkv_0, %bqkv_0 : (tensor<512x1024xf32>, tensor<1024x3072xf32>, tensor<3072xf32>) -> tensor<512x3072xf32>
  %l0_qkv3 = loom.reshape %l0_qkv [4, 128, 3072] : tensor<512x3072xf32> -> tensor<4x128x3072xf32>
  %l0_q2 = loom.slice %l0_qkv3 axes [2] starts [0] ends [1024] steps [1] : tensor<4x128x3072xf32> -> tensor<4x128x1024xf32>
  %l0_k2 = loom.slice %l0_qkv3 axes [2] starts [1024] ends [2048] steps [1] : tensor<4x128x3072xf32> -> tensor<4x128x1024xf32>
  %l0_v2 = loom.slice %l0_qkv3 axes [2] starts [2048] ends [3072] steps [1] : tensor<4x128x3072xf32> -> tensor<4x128x1024xf32>
  %l0_q3 = loom.reshape %l0_q2 [4, 128, 16, 64] : tensor<4x128x1024xf32> -> tensor<4x128x16x64xf32>
  %l0_k3 = loom.reshape %l0_k2 [4, 128, 16, 64] : tensor<4x128x1024xf32> -> tensor<4x128x16x64xf32>
  %l0_v3 = loom.reshape %l0_v2 [4, 128, 16, 64] : tensor<4x128x1024xf32> -> tensor<4x128x16x64xf32>
  %l0_q = loom.transpose %l0_q3 [0, 2, 1, 3] : tensor<4x128x16x64xf32> -> tensor<4x16x128x64xf32>
  %l0_k = loom.transpose %l0_k3 [0, 2, 1, 3] : tensor<4x128x16x64xf32> -> tensor<4x16x128x64xf32>
  %l0_v = loom.transpose %l0_v3 [0, 2, 1, 3] : tensor<4x128x16x64xf32> -> tensor<4x16x128x64xf32>
  %l0_a = loom.attention %l0_q, %l0_k, %l0_v {causal, scale = 0.125 : f64} : (tensor<4x16x128x64xf32>, tensor<4x16x128x64xf32>, tensor<4x16x128x64xf32>) -> tensor<4x16x128x64xf32>
  %l0_a1 = loom.transpose %l0_a [0, 2, 1, 3] : tensor<4x16x128x64xf32> -> tensor<4x128x16x64xf32>
  %l0_a2 = loom.reshape %l0_a1 [512, 1024] : tensor<4x128x16x64xf32> -> tensor<512x1024xf32>
  %l0_o = loom.linear %l0_a2, %wo_0, %bo_0 : (tensor<512x1024xf32>, tensor<1024x1024xf32>, tensor<1024xf32>) -> tensor<512x1024xf32>
  %l0_o3 = loom.reshape %l0_o [4, 128, 1024] : tensor<512x1024xf32> -> tensor<4x128x1024xf32>
  %l0_r1 = loom.add %l0_o3, %x : (tensor<4x128x1024xf32>, tensor<4x128x1024xf32>) -> tensor<4x128x1024xf32>
  %l0_n2 = loom.layer_norm %l0_r1, %ln2w_0, %ln2b_0 axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x128x1024xf32>, tensor<1024xf32>, tensor<1024xf32>) -> tensor<4x128x1024xf32>
  %l0_n2r = loom.reshape %l0_n2 [-1, 1024] : tensor<4x128x1024xf32> -> tensor<512x1024xf32>
  %l0_h = loom.linear %l0_n2r, %w1_0, %b1_0 : (tensor<512x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<512x4096xf32>
  %l0_g = loom.gelu %l0_h {approximate} : tensor<512x4096xf32>
  %l0_m = loom.linear %l0_g, %w2_0, %b2_0 : (tensor<512x4096xf32>, tensor<4096x1024xf32>, tensor<1024xf32>) -> tensor<512x1024xf32>
  %l0_m3 = loom.reshape %l0_m [4, 128, 1024] : tensor<512x1024xf32> -> tensor<4x128x1024xf32>
  %l0_y = loom.add %l0_r1, %l0_m3 : (tensor<4x128x1024xf32>, tensor<4x128x1024xf32>) -> tensor<4x128x1024xf32>
  %l1_0 = loom.layer_norm %l0_y, %ln1w_1, %ln1b_1 axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x128x1024xf32>, tensor<1024xf32>, tensor<1024xf32>) -> tensor<4x128x1024xf32>
  %l1_1 = loom.reshape %l1_0 [-1, 1024] : tensor<4x128x1024xf32> -> tensor<512x1024xf32>
  %l1_qkv = loom.linear %l1_1, %wqkv_1, %bqkv_1 : (tensor<512x1024xf32>, tensor<1024x3072xf32>, tensor<3072xf32>) -> tensor<512x3072xf32>
  %l1_qkv3 = loom.reshape %l1_qkv [4, 128, 3072] : tensor<512x3072xf32> -> tensor<4x128x3072xf32>
  %l1_q2 = loom.slice %l1_qkv3 axes [2] starts [0] ends [1024] steps [1] : tensor<4x128x3072xf32> -> tensor<4x128x1024xf32>
  %l1_k2 = loom.slice %l1_qkv3 axes [2] starts [1024] ends [2048] steps [1] : tensor<4x128x3072xf32> -> tensor<4x128x1024xf32>
  %l1_v2 = loom.slice %l1_qkv3 axes [2] starts [2048] ends [3072] steps [1] : tensor<4x128x3072xf32> -> tensor<4x128x1024xf32>
  %l1_q3 = loom.reshape %l1_q2 [4, 128, 16, 64] : tensor<4x128x1024xf32> -> tensor<4x128x16x64xf32>
  %l1_k3 = loom.reshape %l1_k2 [4, 128, 16, 64] : tensor<4x128x1024xf32> -> tensor<4x128x16x64xf32>
  %l1_v3 = loom.reshape %l1_v2 [4, 128, 16, 64] : tensor<4x128x1024xf32> -> tensor<4x128x16x64xf32>
  %l1_q = loom.transpose %l1_q3 [0, 2, 1, 3] : tensor<4x128x16x64xf32> -> tensor<4x16x128x64xf32>
  %l1_k = loom.transpose %l1_k3 [0, 2, 1, 3] : tensor<4x128x16x64xf32> -> tensor<4x16x128x64xf32>
  %l1_v = loom.transpose %l1_v3 [0, 2, 1, 3] : tensor<4x128x16x64xf32> -> tensor<4x16x128x64xf32>
  %l1_a = loom.attention %l1_q, %l1_k, %l1_v {causal, scale = 0.125 : f64} : (tensor<4x16x128x64xf32>, tensor<4x16x128x64xf32>, tensor<4x16x128x64xf32>) -> tensor<4x16x128x64xf32>
  %l1_a1 = loom.transpose %l1_a [0, 2, 1, 3] : tensor<4x16x128x64xf32> -> tensor<4x128x16x64xf32>
  %l1_a2 = loom.reshape %l1_a1 [512, 1024] : tensor<4x128x16x64xf32> -> tensor<512x1024xf32>
  %l1_o = loom.linear %l1_a2, %wo_1, %bo_1 : (tensor<512x1024xf32>, tensor<1024x1024xf32>, tensor<1024xf32>) -> tensor<512x1024xf32>
  %l1_o3 = loom.reshape %l1_o [4, 128, 1024] : tensor<512x1024xf32> -> tensor<4x128x1024xf32>
  %l1_r1 = loom.add %l1_o3, %l0_y : (tensor<4x128x1024xf32>, tensor<4x128x1024xf32>) -> tensor<4x128x1024xf32>
  %l1_n2 = loom.layer_norm %l1_r1, %ln2w_1, %ln2b_1 axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x128x1024xf32>, tensor<1024xf32>, tensor<1024xf32>) -> tensor<4x128x1024xf32>
  %l1_n2r = loom.reshape %l1_n2 [-1, 1024] : tensor<4x128x1024xf32> -> tensor<512x1024xf32>
  %l1_h = loom.linear %l1_n2r, %w1_1, %b1_1 : (tensor<512x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<512x4096xf32>
  %l1_g = loom.gelu %l1_h {approximate} : tensor<512x4096xf32>
  %l1_m = loom.linear %l1_g, %w2_1, %b2_1 : (tensor<512x4096xf32>, tensor<4096x1024xf32>, tensor<1024xf32>) -> tensor<512x1024xf32>
  %l1_m3 = loom.reshape %l1_m [4, 128, 1024] : tensor<512x1024xf32> -> tensor<4x128x1024xf32>
  %l1_y = loom.add %l1_r1, %l1_m3 : (tensor<4x128x1024xf32>, tensor<4x128x1024xf32>) -> tensor<4x128x1024xf32>
  return %l1_y : tensor<4x128x1024xf32>
}
