// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-mixed-precision))' | FileCheck %s
// RUN: loom-opt %s -split-input-file --loom-train="precision=bf16" | FileCheck %s --check-prefix=TRAIN
// RUN: loom-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(loom-mixed-precision{precision=fp32}))' | FileCheck %s --check-prefix=FP32

// A GPT-like block: each parameter is converted once, before its first use
// (the tied embedding serves the gather and the output projection); every
// activation is bf16; the logits leave in f32.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    -> (tensor<2x8x50xf32> {loom.output = "logits"})
// CHECK:         %[[WTE:.*]] = loom.convert %arg1 to bf16 : tensor<50x16xf32> -> tensor<50x16xbf16>
// CHECK-NEXT:    %[[E:.*]] = loom.gather %[[WTE]], %arg0 axis 0 : (tensor<50x16xbf16>, tensor<2x8xi64>) -> tensor<2x8x16xbf16>
// CHECK-NEXT:    %[[G:.*]] = loom.convert %arg2 to bf16
// CHECK-NEXT:    %[[B:.*]] = loom.convert %arg3 to bf16
// CHECK-NEXT:    loom.layer_norm %[[E]], %[[G]], %[[B]] {{.*}} -> tensor<2x8x16xbf16>
// CHECK:         loom.linear {{.*}} -> tensor<2x8x48xbf16>
// CHECK:         loom.attention {{.*}} -> tensor<2x8x16xbf16>
// CHECK:         loom.gelu %{{.*}} {approximate} : tensor<2x8x16xbf16>
// CHECK:         %[[LOGITS:.*]] = loom.matmul %{{.*}}, %[[WTE]] {transpose_rhs} : (tensor<2x8x16xbf16>, tensor<50x16xbf16>) -> tensor<2x8x50xbf16>
// CHECK-NEXT:    %[[OUT:.*]] = loom.convert %[[LOGITS]] to f32
// CHECK-NEXT:    return %[[OUT]] : tensor<2x8x50xf32>
// CHECK-NOT:     loom.convert %arg1

// After the whole training pipeline, the loss is an f32 scalar computed from
// bf16 logits, each parameter gradient is converted back to f32, and AdamW
// updates f32 parameters and state.
// TRAIN-LABEL: func.func @main
// TRAIN:         %[[LOSS:.*]] = loom.cross_entropy %{{.*}}, %arg7 : (tensor<2x8x50xbf16>, tensor<2x8xi64>) -> tensor<f32>
// TRAIN:         loom.cross_entropy_grad {{.*}} -> tensor<2x8x50xbf16>
// TRAIN:         %[[DWO:.*]] = loom.convert %{{.*}} to f32 : tensor<16x16xbf16> -> tensor<16x16xf32>
// TRAIN:         loom.attention_grad {{.*}} -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>)
// TRAIN:         %[[DWTE:.*]] = loom.convert %{{.*}} to f32 : tensor<50x16xbf16> -> tensor<50x16xf32>
// TRAIN:         loom.adamw %arg1, %[[DWTE]], %{{.*}}, %{{.*}} {{.*}} : tensor<50x16xf32>
// TRAIN:         loom.adamw %arg6, %[[DWO]], %{{.*}}, %{{.*}} {{.*}} : tensor<16x16xf32>
// TRAIN:         return %[[LOSS]],

// fp32 changes nothing.
// FP32-LABEL: func.func @main
// FP32-NOT:     loom.convert
// FP32-NOT:     bf16
// FP32:         return %{{.*}} : tensor<2x8x50xf32>
func.func @main(%ids: tensor<2x8xi64> {loom.input = "ids"}, %wte: tensor<50x16xf32> {loom.param = "wte"},
                %g: tensor<16xf32> {loom.param = "ln.g"}, %b: tensor<16xf32> {loom.param = "ln.b"},
                %wqkv: tensor<16x48xf32> {loom.param = "qkv.w"}, %bqkv: tensor<48xf32> {loom.param = "qkv.b"},
                %wo: tensor<16x16xf32> {loom.param = "proj.w"}) -> (tensor<2x8x50xf32> {loom.output = "logits"}) {
  %e = loom.gather %wte, %ids axis 0 : (tensor<50x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %n = loom.layer_norm %e, %g, %b axis 2 {epsilon = 1.0e-5 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %qkv = loom.linear %n, %wqkv, %bqkv : (tensor<2x8x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  %q = loom.slice %qkv axes [2] starts [0] ends [16] steps [1] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %k = loom.slice %qkv axes [2] starts [16] ends [32] steps [1] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %v = loom.slice %qkv axes [2] starts [32] ends [48] steps [1] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %a = loom.attention %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %o = loom.matmul %a, %wo : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %h = loom.add %o, %e : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %s = loom.gelu %h {approximate} : tensor<2x8x16xf32>
  %logits = loom.matmul %s, %wte {transpose_rhs} : (tensor<2x8x16xf32>, tensor<50x16xf32>) -> tensor<2x8x50xf32>
  return %logits : tensor<2x8x50xf32>
}

// -----

// Integer-to-float conversions (a mask given as ids) go straight to bf16;
// an f32 graph input and a float constant are each converted once; the
// output leaves in f32.
// CHECK-LABEL: func.func @main
// CHECK:         %[[M:.*]] = loom.convert %arg1 to bf16 : tensor<4x3xi64> -> tensor<4x3xbf16>
// CHECK:         %[[X:.*]] = loom.convert %arg0 to bf16 : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK-NEXT:    %[[XM:.*]] = loom.mul %[[X]], %[[M]]
// CHECK-NEXT:    %[[C32:.*]] = loom.constant
// CHECK-NEXT:    %[[C:.*]] = loom.convert %[[C32]] to bf16 : tensor<f32> -> tensor<bf16>
// CHECK-NEXT:    loom.mul %[[XM]], %[[C]]
// CHECK:         loom.mul %{{.*}}, %[[C]] :
// CHECK-NEXT:    %[[Y:.*]] = loom.convert %{{.*}} to f32 : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK-NEXT:    return %[[Y]] : tensor<4x3xf32>
func.func @main(%x: tensor<4x3xf32> {loom.input = "x"}, %ids: tensor<4x3xi64> {loom.input = "mask"},
                %w: tensor<3x3xf32> {loom.param = "w"}) -> (tensor<4x3xf32> {loom.output = "y"}) {
  %m = loom.convert %ids to f32 : tensor<4x3xi64> -> tensor<4x3xf32>
  %xm = loom.mul %x, %m : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %c = loom.constant dense<0.5> : tensor<f32>
  %xs = loom.mul %xm, %c : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %y = loom.matmul %xs, %w : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
  %y2 = loom.mul %y, %c : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  return %y2 : tensor<4x3xf32>
}
