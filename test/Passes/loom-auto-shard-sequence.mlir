// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-raise-linear, loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=4 tp=4 cluster=h100:1x4 lower=false})' | FileCheck %s
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-raise-linear, loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=4 tp=4 cluster=h100:1x4 memory-budget-gib=0.007 block-bucket-bytes=-1})' | FileCheck %s --check-prefix=TIGHT
// RUN: not loom-opt %s --pass-pipeline='builtin.module(func.func(loom-raise-linear, loom-split-fused-projections), loom-train{loss=mse}, loom-plan{devices=4 tp=4 cluster=h100:1x4 memory-budget-gib=0.006 lower=false})' 2>&1 | FileCheck %s --check-prefix=TOO-TIGHT

// One GPT-2 layer as Hugging Face exports it (each linear between a
// flattening and an unflattening reshape, which loom-raise-linear folds, so
// the sequence is a dimension of its own), batch 4 x sequence 256 x width
// 256, on tp = 4 of an H100 node. With room to spare the ILP takes
// Megatron's partition and keeps the layer norms whole: splitting them
// along the sequence would save less than their weights' gradient sums
// cost.
// CHECK-LABEL: func.func @main
// CHECK:         loom.layer_norm %[[IN:[^,]*]],
// CHECK-SAME:      -> tensor<4x256x256xf32>
// CHECK-NEXT:    shard.sharding @mesh split_axes = [] : !shard.sharding

// Under a budget of 7 MiB a device, the activations the backward keeps must
// shrink: the ILP picks sequence parallelism (Korthikanti et al.). Each
// rank normalises its quarter of the sequence; an all-gather along the
// sequence feeds the column-parallel q, k, v and MLP linears, and each
// row-parallel linear's partial sums are reduce-scattered along the
// sequence, so the bias and residual adds run on the quarter too.
// (block-bucket-bytes=-1: the collectives stay blocking here;
// loom-bucket-block-collectives.mlir tests their buckets.)
// TIGHT-LABEL: func.func @main
// TIGHT-SAME:    loom.remat = {full_layers = 0 : i64, layers = 1 : i64, mode = "none", {{.*}}regathered = 3 : i64
// TIGHT:         %[[X:.*]] = shard.all_slice %arg0 on @mesh grid_axes = [2] slice_axis = 1 : tensor<4x256x256xf32> -> tensor<4x64x256xf32>
// TIGHT-NEXT:    %[[N1:.*]] = loom.layer_norm %[[X]], {{.*}} -> tensor<4x64x256xf32>
// TIGHT-NEXT:    %[[G1:.*]] = shard.all_gather %[[N1]] on @mesh grid_axes = [2] gather_axis = 1 : tensor<4x64x256xf32> -> tensor<4x256x256xf32>
// TIGHT:         loom.linear %[[G1]], {{.*}} -> tensor<4x256x64xf32>
// TIGHT:         loom.attention {{.*}} : (tensor<4x1x256x64xf32>
// TIGHT:         %[[O:.*]] = shard.reduce_scatter %{{.*}} on @mesh grid_axes = [2] scatter_axis = 1 : tensor<4x256x256xf32> -> tensor<4x64x256xf32>
// TIGHT-NEXT:    %[[OB:.*]] = loom.add %[[O]], %{{.*}} : (tensor<4x64x256xf32>, tensor<256xf32>)
// TIGHT-NEXT:    %[[R1:.*]] = loom.add %[[OB]], %[[X]] : (tensor<4x64x256xf32>, tensor<4x64x256xf32>)
// TIGHT:         %[[N2:.*]] = loom.layer_norm %[[R1]], {{.*}} -> tensor<4x64x256xf32>
// TIGHT-NEXT:    %[[G2:.*]] = shard.all_gather %[[N2]] on @mesh grid_axes = [2] gather_axis = 1
// TIGHT-NEXT:    loom.linear %[[G2]], {{.*}} -> tensor<4x256x256xf32>
// TIGHT:         shard.reduce_scatter %{{.*}} on @mesh grid_axes = [2] scatter_axis = 1 : tensor<4x256x256xf32> -> tensor<4x64x256xf32>
// TIGHT-NOT:     shard.all_to_all
// That layer does not fit as it is: the backward gathers again, where it
// reads them, the sequence-split values it reads whole (loom-choose-recompute)
// — the MLP's input, the second norm's input (its gradient runs whole) and
// the attention's input — so the layer keeps its quarter of them.
// TIGHT:         loom.mse_grad
// TIGHT:         shard.all_gather %[[N2]] on @mesh grid_axes = [2] gather_axis = 1 {loom.recomputed}
// TIGHT:         shard.all_gather %[[R1]] on @mesh grid_axes = [2] gather_axis = 1 {loom.recomputed}
// TIGHT:         loom.layer_norm_grad
// TIGHT:         shard.all_gather %[[N1]] on @mesh grid_axes = [2] gather_axis = 1 {loom.recomputed}
// TIGHT-NOT:     shard.all_to_all

// Under 6 MiB nothing fits.
// TOO-TIGHT: error: loom-auto-shard: no sharding fits the memory budget of 6.144 MiB per device

func.func @main(%x: tensor<4x256x256xf32> {loom.input = "x"},
    %ln1w: tensor<256xf32> {loom.param = "h.0.ln_1.weight"}, %ln1b: tensor<256xf32> {loom.param = "h.0.ln_1.bias"},
    %wqkv: tensor<256x768xf32> {loom.param = "h.0.attn.c_attn.weight"}, %bqkv: tensor<768xf32> {loom.param = "h.0.attn.c_attn.bias"},
    %wo: tensor<256x256xf32> {loom.param = "h.0.attn.c_proj.weight"}, %bo: tensor<256xf32> {loom.param = "h.0.attn.c_proj.bias"},
    %ln2w: tensor<256xf32> {loom.param = "h.0.ln_2.weight"}, %ln2b: tensor<256xf32> {loom.param = "h.0.ln_2.bias"},
    %w1: tensor<256x1024xf32> {loom.param = "h.0.mlp.c_fc.weight"}, %b1: tensor<1024xf32> {loom.param = "h.0.mlp.c_fc.bias"},
    %w2: tensor<1024x256xf32> {loom.param = "h.0.mlp.c_proj.weight"}, %b2: tensor<256xf32> {loom.param = "h.0.mlp.c_proj.bias"})
    -> (tensor<4x256x256xf32> {loom.output = "y"}) {
  %n1 = loom.layer_norm %x, %ln1w, %ln1b axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x256x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<4x256x256xf32>
  %n1f = loom.reshape %n1 [-1, 256] : tensor<4x256x256xf32> -> tensor<1024x256xf32>
  %qkvf = loom.linear %n1f, %wqkv, %bqkv : (tensor<1024x256xf32>, tensor<256x768xf32>, tensor<768xf32>) -> tensor<1024x768xf32>
  %qkv = loom.reshape %qkvf [-1, 256, 768] : tensor<1024x768xf32> -> tensor<4x256x768xf32>
  %q2 = loom.slice %qkv axes [2] starts [0] ends [256] steps [1] : tensor<4x256x768xf32> -> tensor<4x256x256xf32>
  %k2 = loom.slice %qkv axes [2] starts [256] ends [512] steps [1] : tensor<4x256x768xf32> -> tensor<4x256x256xf32>
  %v2 = loom.slice %qkv axes [2] starts [512] ends [768] steps [1] : tensor<4x256x768xf32> -> tensor<4x256x256xf32>
  %q3 = loom.reshape %q2 [0, 0, -1, 64] : tensor<4x256x256xf32> -> tensor<4x256x4x64xf32>
  %k3 = loom.reshape %k2 [0, 0, -1, 64] : tensor<4x256x256xf32> -> tensor<4x256x4x64xf32>
  %v3 = loom.reshape %v2 [0, 0, -1, 64] : tensor<4x256x256xf32> -> tensor<4x256x4x64xf32>
  %q = loom.transpose %q3 [0, 2, 1, 3] : tensor<4x256x4x64xf32> -> tensor<4x4x256x64xf32>
  %k = loom.transpose %k3 [0, 2, 1, 3] : tensor<4x256x4x64xf32> -> tensor<4x4x256x64xf32>
  %v = loom.transpose %v3 [0, 2, 1, 3] : tensor<4x256x4x64xf32> -> tensor<4x4x256x64xf32>
  %a = loom.attention %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<4x4x256x64xf32>, tensor<4x4x256x64xf32>, tensor<4x4x256x64xf32>) -> tensor<4x4x256x64xf32>
  %a1 = loom.transpose %a [0, 2, 1, 3] : tensor<4x4x256x64xf32> -> tensor<4x256x4x64xf32>
  %a2 = loom.reshape %a1 [0, 0, -1] : tensor<4x256x4x64xf32> -> tensor<4x256x256xf32>
  %a2f = loom.reshape %a2 [-1, 256] : tensor<4x256x256xf32> -> tensor<1024x256xf32>
  %of = loom.linear %a2f, %wo, %bo : (tensor<1024x256xf32>, tensor<256x256xf32>, tensor<256xf32>) -> tensor<1024x256xf32>
  %o = loom.reshape %of [-1, 256, 256] : tensor<1024x256xf32> -> tensor<4x256x256xf32>
  %r1 = loom.add %o, %x : (tensor<4x256x256xf32>, tensor<4x256x256xf32>) -> tensor<4x256x256xf32>
  %n2 = loom.layer_norm %r1, %ln2w, %ln2b axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x256x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<4x256x256xf32>
  %n2f = loom.reshape %n2 [-1, 256] : tensor<4x256x256xf32> -> tensor<1024x256xf32>
  %hf = loom.linear %n2f, %w1, %b1 : (tensor<1024x256xf32>, tensor<256x1024xf32>, tensor<1024xf32>) -> tensor<1024x1024xf32>
  %h = loom.reshape %hf [-1, 256, 1024] : tensor<1024x1024xf32> -> tensor<4x256x1024xf32>
  %g = loom.gelu %h {approximate} : tensor<4x256x1024xf32>
  %gf = loom.reshape %g [-1, 1024] : tensor<4x256x1024xf32> -> tensor<1024x1024xf32>
  %mf = loom.linear %gf, %w2, %b2 : (tensor<1024x1024xf32>, tensor<1024x256xf32>, tensor<256xf32>) -> tensor<1024x256xf32>
  %m = loom.reshape %mf [-1, 256, 256] : tensor<1024x256xf32> -> tensor<4x256x256xf32>
  %y = loom.add %r1, %m : (tensor<4x256x256xf32>, tensor<4x256x256xf32>) -> tensor<4x256x256xf32>
  return %y : tensor<4x256x256xf32>
}
