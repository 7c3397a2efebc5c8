// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=selective})' | FileCheck %s --check-prefix=SEL
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=full})' | FileCheck %s --check-prefix=FULL
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=none})' | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=auto memory-budget-gib=1})' | FileCheck %s --check-prefix=ROOM
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=auto memory-budget-gib=0.0003})' | FileCheck %s --check-prefix=AUTO-SEL
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=auto memory-budget-gib=0.00025})' | FileCheck %s --check-prefix=AUTO-FULL
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=auto memory-budget-gib=0.0001})' | FileCheck %s --check-prefix=AUTO-LEAST
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=selective}, func.func(loom-recompute), loom-choose-recompute{mode=auto memory-budget-gib=1})' --mlir-print-ir-after=loom-choose-recompute -o /dev/null 2>&1 | FileCheck %s --check-prefix=SEL-PEAK
// RUN: loom-opt %s --pass-pipeline='builtin.module(loom-train{loss=mse optimizer=sgd}, loom-plan{devices=1}, loom-choose-recompute{mode=full}, func.func(loom-recompute), loom-choose-recompute{mode=auto memory-budget-gib=1})' --mlir-print-ir-after=loom-choose-recompute -o /dev/null 2>&1 | FileCheck %s --check-prefix=FULL-PEAK

// Two GPT-2 layers (batch 4 x sequence 32 x width 16, 2 heads), trained
// with SGD on one device. Loom's attention keeps no scores (its gradient
// recomputes them), so `selective` recomputes what is cheap and whose
// inputs the backward keeps anyway: each layer's two layer norms (their
// inputs are kept for their gradients) and its GELU (its input is kept for
// the GELU gradient). The linears, the attention and the q/k/v copies stay,
// as do the residual sums (read by the norms' gradients).
// SEL-LABEL: func.func @main
// SEL-SAME:    loom.remat = {full_layers = 0 : i64, layers = 2 : i64, mode = "selective"
// SEL-SAME:    selective_layers = 2 : i64}
// SEL:         loom.layer_norm %arg0, {{.*}}loom.recompute = 0 : i64
// SEL-NOT:     loom.recompute
// SEL:         loom.layer_norm {{.*}}loom.recompute = 0 : i64
// SEL-NOT:     loom.recompute
// SEL:         loom.gelu {{.*}}loom.recompute = 0 : i64
// SEL-NOT:     loom.recompute
// SEL:         loom.layer_norm {{.*}}loom.recompute = 1 : i64
// SEL-NOT:     loom.recompute
// SEL:         loom.layer_norm {{.*}}loom.recompute = 1 : i64
// SEL-NOT:     loom.recompute
// SEL:         loom.gelu {{.*}}loom.recompute = 1 : i64
// SEL-NOT:     loom.recompute

// `full` runs each layer again from its input: every op of layer 0 that
// leads to what its backward reads, attention and linears included. Layer
// 0's output is layer 1's input, a checkpoint: the last linear and the
// residual sum that make it are not recomputed.
// FULL-LABEL: func.func @main
// FULL-SAME:    full_layers = 2 : i64, layers = 2 : i64, mode = "full"
// FULL:         loom.layer_norm %arg0, {{.*}}loom.recompute = 0 : i64
// FULL-NEXT:    loom.linear {{.*}}loom.recompute = 0 : i64
// FULL:         loom.attention {{.*}}loom.recompute = 0 : i64
// FULL:         loom.gelu {{.*}}loom.recompute = 0 : i64
// FULL-NEXT:    %[[M:.*]] = loom.linear
// FULL-NOT:     loom.recompute
// FULL-NEXT:    loom.add %{{.*}}, %[[M]] :
// FULL-NEXT:    loom.layer_norm {{.*}}loom.recompute = 1 : i64

// `none` changes nothing.
// NONE-NOT:    loom.recompute
// NONE-NOT:    loom.remat

// Under `auto`, what fits the budget at the least recomputation time:
// nothing with room to spare; selective on one layer under 0.0003 GiB (322
// KB); full on one under 0.00025 GiB; and when nothing fits, the plan of
// least peak. (The budgets sit between the peaks the simulation predicts,
// about 334 KB with nothing recomputed, 284 KB selective, 216 KB full; that
// the simulation is the emitted program's live set is RecomputePlanTest's.)
// ROOM:        loom.remat = {full_layers = 0 : i64, layers = 2 : i64, mode = "auto", peak_bytes = {{[0-9]+}} : i64, recompute_seconds = 0.000000e+00 : f64, regathered = 0 : i64, selective_layers = 0 : i64}
// ROOM-NOT:    loom.recompute =
// AUTO-SEL:    loom.remat = {full_layers = 0 : i64, layers = 2 : i64, mode = "auto", {{.*}}, selective_layers = 1 : i64}
// AUTO-FULL:   loom.remat = {full_layers = 1 : i64, layers = 2 : i64, mode = "auto", {{.*}}, selective_layers = 0 : i64}
// AUTO-LEAST:  loom.remat = {full_layers = {{[12]}} : i64, layers = 2 : i64, mode = "auto"

// The peak predicted is that of the program loom-recompute writes: planned
// again with nothing more to recompute, it holds what was predicted.
// SEL-PEAK:    IR Dump After LoomChooseRecomputePass
// SEL-PEAK:    mode = "selective", peak_bytes = [[PEAK:[0-9]+]] : i64
// SEL-PEAK:    IR Dump After LoomChooseRecomputePass
// SEL-PEAK:    mode = "auto", peak_bytes = [[PEAK]] : i64
// FULL-PEAK:   IR Dump After LoomChooseRecomputePass
// FULL-PEAK:   mode = "full", peak_bytes = [[PEAK:[0-9]+]] : i64
// FULL-PEAK:   IR Dump After LoomChooseRecomputePass
// FULL-PEAK:   mode = "auto", peak_bytes = [[PEAK]] : i64

func.func @main(%x: tensor<4x32x16xf32> {loom.input = "x"},
    %ln1w0: tensor<16xf32> {loom.param = "h.0.ln_1.weight"},
    %ln1b0: tensor<16xf32> {loom.param = "h.0.ln_1.bias"},
    %wqkv0: tensor<16x48xf32> {loom.param = "h.0.attn.c_attn.weight"},
    %bqkv0: tensor<48xf32> {loom.param = "h.0.attn.c_attn.bias"},
    %wo0: tensor<16x16xf32> {loom.param = "h.0.attn.c_proj.weight"},
    %bo0: tensor<16xf32> {loom.param = "h.0.attn.c_proj.bias"},
    %ln2w0: tensor<16xf32> {loom.param = "h.0.ln_2.weight"},
    %ln2b0: tensor<16xf32> {loom.param = "h.0.ln_2.bias"},
    %w10: tensor<16x64xf32> {loom.param = "h.0.mlp.c_fc.weight"},
    %b10: tensor<64xf32> {loom.param = "h.0.mlp.c_fc.bias"},
    %w20: tensor<64x16xf32> {loom.param = "h.0.mlp.c_proj.weight"},
    %b20: tensor<16xf32> {loom.param = "h.0.mlp.c_proj.bias"},
    %ln1w1: tensor<16xf32> {loom.param = "h.1.ln_1.weight"},
    %ln1b1: tensor<16xf32> {loom.param = "h.1.ln_1.bias"},
    %wqkv1: tensor<16x48xf32> {loom.param = "h.1.attn.c_attn.weight"},
    %bqkv1: tensor<48xf32> {loom.param = "h.1.attn.c_attn.bias"},
    %wo1: tensor<16x16xf32> {loom.param = "h.1.attn.c_proj.weight"},
    %bo1: tensor<16xf32> {loom.param = "h.1.attn.c_proj.bias"},
    %ln2w1: tensor<16xf32> {loom.param = "h.1.ln_2.weight"},
    %ln2b1: tensor<16xf32> {loom.param = "h.1.ln_2.bias"},
    %w11: tensor<16x64xf32> {loom.param = "h.1.mlp.c_fc.weight"},
    %b11: tensor<64xf32> {loom.param = "h.1.mlp.c_fc.bias"},
    %w21: tensor<64x16xf32> {loom.param = "h.1.mlp.c_proj.weight"},
    %b21: tensor<16xf32> {loom.param = "h.1.mlp.c_proj.bias"})
    -> (tensor<4x32x16xf32> {loom.output = "y"}) {
  %n1_0 = loom.layer_norm %x, %ln1w0, %ln1b0 axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x32x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x32x16xf32> loc("/h.0/ln_1/LayerNormalization")
  %qkv_0 = loom.linear %n1_0, %wqkv0, %bqkv0 : (tensor<4x32x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<4x32x48xf32> loc("/h.0/attn/c_attn/Gemm")
  %q2_0 = loom.slice %qkv_0 axes [2] starts [0] ends [16] steps [1] : tensor<4x32x48xf32> -> tensor<4x32x16xf32> loc("/h.0/attn/Split")
  %q3_0 = loom.reshape %q2_0 [0, 0, -1, 8] : tensor<4x32x16xf32> -> tensor<4x32x2x8xf32> loc("/h.0/attn/Reshape_q")
  %q_0 = loom.transpose %q3_0 [0, 2, 1, 3] : tensor<4x32x2x8xf32> -> tensor<4x2x32x8xf32> loc("/h.0/attn/Transpose_q")
  %k2_0 = loom.slice %qkv_0 axes [2] starts [16] ends [32] steps [1] : tensor<4x32x48xf32> -> tensor<4x32x16xf32> loc("/h.0/attn/Split")
  %k3_0 = loom.reshape %k2_0 [0, 0, -1, 8] : tensor<4x32x16xf32> -> tensor<4x32x2x8xf32> loc("/h.0/attn/Reshape_k")
  %k_0 = loom.transpose %k3_0 [0, 2, 1, 3] : tensor<4x32x2x8xf32> -> tensor<4x2x32x8xf32> loc("/h.0/attn/Transpose_k")
  %v2_0 = loom.slice %qkv_0 axes [2] starts [32] ends [48] steps [1] : tensor<4x32x48xf32> -> tensor<4x32x16xf32> loc("/h.0/attn/Split")
  %v3_0 = loom.reshape %v2_0 [0, 0, -1, 8] : tensor<4x32x16xf32> -> tensor<4x32x2x8xf32> loc("/h.0/attn/Reshape_v")
  %v_0 = loom.transpose %v3_0 [0, 2, 1, 3] : tensor<4x32x2x8xf32> -> tensor<4x2x32x8xf32> loc("/h.0/attn/Transpose_v")
  %a_0 = loom.attention %q_0, %k_0, %v_0 {causal, scale = 0.35355339059327373 : f64} : (tensor<4x2x32x8xf32>, tensor<4x2x32x8xf32>, tensor<4x2x32x8xf32>) -> tensor<4x2x32x8xf32> loc("/h.0/attn/Attention")
  %a1_0 = loom.transpose %a_0 [0, 2, 1, 3] : tensor<4x2x32x8xf32> -> tensor<4x32x2x8xf32> loc("/h.0/attn/Transpose_o")
  %a2_0 = loom.reshape %a1_0 [0, 0, -1] : tensor<4x32x2x8xf32> -> tensor<4x32x16xf32> loc("/h.0/attn/Reshape_o")
  %o_0 = loom.linear %a2_0, %wo0, %bo0 : (tensor<4x32x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x32x16xf32> loc("/h.0/attn/c_proj/Gemm")
  %r1_0 = loom.add %o_0, %x : (tensor<4x32x16xf32>, tensor<4x32x16xf32>) -> tensor<4x32x16xf32> loc("/h.0/Add")
  %n2_0 = loom.layer_norm %r1_0, %ln2w0, %ln2b0 axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x32x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x32x16xf32> loc("/h.0/ln_2/LayerNormalization")
  %h_0 = loom.linear %n2_0, %w10, %b10 : (tensor<4x32x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32> loc("/h.0/mlp/c_fc/Gemm")
  %g_0 = loom.gelu %h_0 {approximate} : tensor<4x32x64xf32> loc("/h.0/mlp/act/Gelu")
  %m_0 = loom.linear %g_0, %w20, %b20 : (tensor<4x32x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<4x32x16xf32> loc("/h.0/mlp/c_proj/Gemm")
  %y_0 = loom.add %r1_0, %m_0 : (tensor<4x32x16xf32>, tensor<4x32x16xf32>) -> tensor<4x32x16xf32> loc("/h.0/Add_1")
  %n1_1 = loom.layer_norm %y_0, %ln1w1, %ln1b1 axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x32x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x32x16xf32> loc("/h.1/ln_1/LayerNormalization")
  %qkv_1 = loom.linear %n1_1, %wqkv1, %bqkv1 : (tensor<4x32x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<4x32x48xf32> loc("/h.1/attn/c_attn/Gemm")
  %q2_1 = loom.slice %qkv_1 axes [2] starts [0] ends [16] steps [1] : tensor<4x32x48xf32> -> tensor<4x32x16xf32> loc("/h.1/attn/Split")
  %q3_1 = loom.reshape %q2_1 [0, 0, -1, 8] : tensor<4x32x16xf32> -> tensor<4x32x2x8xf32> loc("/h.1/attn/Reshape_q")
  %q_1 = loom.transpose %q3_1 [0, 2, 1, 3] : tensor<4x32x2x8xf32> -> tensor<4x2x32x8xf32> loc("/h.1/attn/Transpose_q")
  %k2_1 = loom.slice %qkv_1 axes [2] starts [16] ends [32] steps [1] : tensor<4x32x48xf32> -> tensor<4x32x16xf32> loc("/h.1/attn/Split")
  %k3_1 = loom.reshape %k2_1 [0, 0, -1, 8] : tensor<4x32x16xf32> -> tensor<4x32x2x8xf32> loc("/h.1/attn/Reshape_k")
  %k_1 = loom.transpose %k3_1 [0, 2, 1, 3] : tensor<4x32x2x8xf32> -> tensor<4x2x32x8xf32> loc("/h.1/attn/Transpose_k")
  %v2_1 = loom.slice %qkv_1 axes [2] starts [32] ends [48] steps [1] : tensor<4x32x48xf32> -> tensor<4x32x16xf32> loc("/h.1/attn/Split")
  %v3_1 = loom.reshape %v2_1 [0, 0, -1, 8] : tensor<4x32x16xf32> -> tensor<4x32x2x8xf32> loc("/h.1/attn/Reshape_v")
  %v_1 = loom.transpose %v3_1 [0, 2, 1, 3] : tensor<4x32x2x8xf32> -> tensor<4x2x32x8xf32> loc("/h.1/attn/Transpose_v")
  %a_1 = loom.attention %q_1, %k_1, %v_1 {causal, scale = 0.35355339059327373 : f64} : (tensor<4x2x32x8xf32>, tensor<4x2x32x8xf32>, tensor<4x2x32x8xf32>) -> tensor<4x2x32x8xf32> loc("/h.1/attn/Attention")
  %a1_1 = loom.transpose %a_1 [0, 2, 1, 3] : tensor<4x2x32x8xf32> -> tensor<4x32x2x8xf32> loc("/h.1/attn/Transpose_o")
  %a2_1 = loom.reshape %a1_1 [0, 0, -1] : tensor<4x32x2x8xf32> -> tensor<4x32x16xf32> loc("/h.1/attn/Reshape_o")
  %o_1 = loom.linear %a2_1, %wo1, %bo1 : (tensor<4x32x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x32x16xf32> loc("/h.1/attn/c_proj/Gemm")
  %r1_1 = loom.add %o_1, %y_0 : (tensor<4x32x16xf32>, tensor<4x32x16xf32>) -> tensor<4x32x16xf32> loc("/h.1/Add")
  %n2_1 = loom.layer_norm %r1_1, %ln2w1, %ln2b1 axis 2 {epsilon = 1.0E-5 : f64} : (tensor<4x32x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x32x16xf32> loc("/h.1/ln_2/LayerNormalization")
  %h_1 = loom.linear %n2_1, %w11, %b11 : (tensor<4x32x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<4x32x64xf32> loc("/h.1/mlp/c_fc/Gemm")
  %g_1 = loom.gelu %h_1 {approximate} : tensor<4x32x64xf32> loc("/h.1/mlp/act/Gelu")
  %m_1 = loom.linear %g_1, %w21, %b21 : (tensor<4x32x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<4x32x16xf32> loc("/h.1/mlp/c_proj/Gemm")
  %y_1 = loom.add %r1_1, %m_1 : (tensor<4x32x16xf32>, tensor<4x32x16xf32>) -> tensor<4x32x16xf32> loc("/h.1/Add_1")
  return %y_1 : tensor<4x32x16xf32>
}
