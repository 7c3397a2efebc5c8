//===- TestModels.h - Small forward functions the compiler tests share ---===//

#ifndef LOOM_TEST_UNIT_COMPILER_TESTMODELS_H
#define LOOM_TEST_UNIT_COMPILER_TESTMODELS_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <initializer_list>
#include <string>

namespace mlir::loom::test {

/// Two linear layers with a ReLU between: 8 samples of 64 features.
inline constexpr llvm::StringLiteral kTwoLinears = R"(
func.func @main(%x: tensor<8x64xf32> {loom.input = "x"},
    %w1: tensor<64x128xf32> {loom.param = "fc1.weight"}, %b1: tensor<128xf32> {loom.param = "fc1.bias"},
    %w2: tensor<128x64xf32> {loom.param = "fc2.weight"}, %b2: tensor<64xf32> {loom.param = "fc2.bias"})
    -> (tensor<8x64xf32> {loom.output = "y"}) {
  %h = loom.linear %x, %w1, %b1 : (tensor<8x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<8x128xf32>
  %r = loom.relu %h : tensor<8x128xf32>
  %y = loom.linear %r, %w2, %b2 : (tensor<8x128xf32>, tensor<128x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
)";

/// Two residual MLP layers with numbered node names, batch 512.
inline constexpr llvm::StringLiteral kMlpLayers = R"(
func.func @main(%x: tensor<512x32xf32> {loom.input = "x"},
    %w0: tensor<32x128xf32> {loom.param = "h.0.fc.weight"}, %b0: tensor<128xf32> {loom.param = "h.0.fc.bias"},
    %v0: tensor<128x32xf32> {loom.param = "h.0.proj.weight"}, %c0: tensor<32xf32> {loom.param = "h.0.proj.bias"},
    %w1: tensor<32x128xf32> {loom.param = "h.1.fc.weight"}, %b1: tensor<128xf32> {loom.param = "h.1.fc.bias"},
    %v1: tensor<128x32xf32> {loom.param = "h.1.proj.weight"}, %c1: tensor<32xf32> {loom.param = "h.1.proj.bias"})
    -> (tensor<512x32xf32> {loom.output = "y"}) {
  %h0 = loom.linear %x, %w0, %b0 : (tensor<512x32xf32>, tensor<32x128xf32>, tensor<128xf32>) -> tensor<512x128xf32> loc("/h.0/fc/Gemm")
  %a0 = loom.gelu %h0 {approximate} : tensor<512x128xf32> loc("/h.0/act/Gelu")
  %p0 = loom.linear %a0, %v0, %c0 : (tensor<512x128xf32>, tensor<128x32xf32>, tensor<32xf32>) -> tensor<512x32xf32> loc("/h.0/proj/Gemm")
  %y0 = loom.add %x, %p0 : (tensor<512x32xf32>, tensor<512x32xf32>) -> tensor<512x32xf32> loc("/h.0/Add")
  %h1 = loom.linear %y0, %w1, %b1 : (tensor<512x32xf32>, tensor<32x128xf32>, tensor<128xf32>) -> tensor<512x128xf32> loc("/h.1/fc/Gemm")
  %a1 = loom.gelu %h1 {approximate} : tensor<512x128xf32> loc("/h.1/act/Gelu")
  %p1 = loom.linear %a1, %v1, %c1 : (tensor<512x128xf32>, tensor<128x32xf32>, tensor<32xf32>) -> tensor<512x32xf32> loc("/h.1/proj/Gemm")
  %y1 = loom.add %y0, %p1 : (tensor<512x32xf32>, tensor<512x32xf32>) -> tensor<512x32xf32> loc("/h.1/Add")
  return %y1 : tensor<512x32xf32>
}
)";

/// Two MLP layers between an embedding and the logits that read its table
/// (a tied embedding, as GPT-2's `lm_head`): 8 sequences of 16 token ids.
inline constexpr llvm::StringLiteral kTiedEmbedding = R"(
func.func @main(%ids: tensor<8x16xi64> {loom.input = "ids"},
    %wte: tensor<256x32xf32> {loom.param = "wte.weight"},
    %w0: tensor<32x64xf32> {loom.param = "h.0.fc.weight"}, %b0: tensor<64xf32> {loom.param = "h.0.fc.bias"},
    %v0: tensor<64x32xf32> {loom.param = "h.0.proj.weight"}, %c0: tensor<32xf32> {loom.param = "h.0.proj.bias"},
    %w1: tensor<32x64xf32> {loom.param = "h.1.fc.weight"}, %b1: tensor<64xf32> {loom.param = "h.1.fc.bias"},
    %v1: tensor<64x32xf32> {loom.param = "h.1.proj.weight"}, %c1: tensor<32xf32> {loom.param = "h.1.proj.bias"})
    -> (tensor<8x16x256xf32> {loom.output = "y"}) {
  %e = loom.gather %wte, %ids axis 0 : (tensor<256x32xf32>, tensor<8x16xi64>) -> tensor<8x16x32xf32> loc("/wte/Gather")
  %h0 = loom.linear %e, %w0, %b0 : (tensor<8x16x32xf32>, tensor<32x64xf32>, tensor<64xf32>) -> tensor<8x16x64xf32> loc("/h.0/fc/Gemm")
  %a0 = loom.gelu %h0 {approximate} : tensor<8x16x64xf32> loc("/h.0/act/Gelu")
  %p0 = loom.linear %a0, %v0, %c0 : (tensor<8x16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<8x16x32xf32> loc("/h.0/proj/Gemm")
  %y0 = loom.add %e, %p0 : (tensor<8x16x32xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32> loc("/h.0/Add")
  %h1 = loom.linear %y0, %w1, %b1 : (tensor<8x16x32xf32>, tensor<32x64xf32>, tensor<64xf32>) -> tensor<8x16x64xf32> loc("/h.1/fc/Gemm")
  %a1 = loom.gelu %h1 {approximate} : tensor<8x16x64xf32> loc("/h.1/act/Gelu")
  %p1 = loom.linear %a1, %v1, %c1 : (tensor<8x16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<8x16x32xf32> loc("/h.1/proj/Gemm")
  %y1 = loom.add %y0, %p1 : (tensor<8x16x32xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32> loc("/h.1/Add")
  %l = loom.matmul %y1, %wte {transpose_rhs} : (tensor<8x16x32xf32>, tensor<256x32xf32>) -> tensor<8x16x256xf32> loc("/lm_head/MatMul")
  return %l : tensor<8x16x256xf32>
}
)";

/// GPT-2 layers as loom ops after raising (batch `b`, sequence `s`, width
/// `h`, `heads` heads), each op named by its layer: the shape whose
/// activations Korthikanti et al. count.
inline std::string gptLayers(int64_t b, int64_t s, int64_t h, int64_t heads,
                      int layers) {
  int64_t e = h / heads, f = 4 * h;
  auto t = [](std::initializer_list<int64_t> dims) {
    std::string r = "tensor<";
    for (int64_t d : dims)
      r += std::to_string(d) + "x";
    return r + "f32>";
  };
  std::string t3 = t({b, s, h}), t4 = t({b, s, heads, e}),
              th = t({b, heads, s, e}),
              v = "tensor<" + std::to_string(h) + "xf32>";
  std::string args = "%x: " + t3 + " {loom.input = \"x\"}", body;
  std::string x = "%x";
  for (int l = 0; l < layers; ++l) {
    std::string n = std::to_string(l);
    auto param = [&](const std::string &name, const std::string &type,
                     const std::string &onnx) {
      args += ", %" + name + n + ": " + type + " {loom.param = \"h." + n + "." +
              onnx + "\"}";
    };
    param("g1", v, "ln_1.weight");
    param("c1", v, "ln_1.bias");
    param("wqkv",
          "tensor<" + std::to_string(h) + "x" + std::to_string(3 * h) + "xf32>",
          "attn.c_attn.weight");
    param("bqkv", "tensor<" + std::to_string(3 * h) + "xf32>",
          "attn.c_attn.bias");
    param("wo",
          "tensor<" + std::to_string(h) + "x" + std::to_string(h) + "xf32>",
          "attn.c_proj.weight");
    param("bo", v, "attn.c_proj.bias");
    param("g2", v, "ln_2.weight");
    param("c2", v, "ln_2.bias");
    param("w1",
          "tensor<" + std::to_string(h) + "x" + std::to_string(f) + "xf32>",
          "mlp.c_fc.weight");
    param("b1", "tensor<" + std::to_string(f) + "xf32>", "mlp.c_fc.bias");
    param("w2",
          "tensor<" + std::to_string(f) + "x" + std::to_string(h) + "xf32>",
          "mlp.c_proj.weight");
    param("b2", v, "mlp.c_proj.bias");
    auto loc = [&](const std::string &what) {
      return " loc(\"/h." + n + "/" + what + "\")\n";
    };
    auto ln = [&](const std::string &out, const std::string &in,
                  const std::string &g, const std::string &c) {
      body += "  " + out + " = loom.layer_norm " + in + ", " + g + ", " + c +
              " axis 2 {epsilon = 1.0E-5 : f64} : (" + t3 + ", " + v + ", " +
              v + ") -> " + t3 + loc(out.substr(1));
    };
    auto linear = [&](const std::string &out, const std::string &in,
                      const std::string &w, const std::string &bias,
                      const std::string &tin, const std::string &wt,
                      const std::string &bt, const std::string &tout) {
      body += "  " + out + " = loom.linear " + in + ", " + w + ", " + bias +
              " : (" + tin + ", " + wt + ", " + bt + ") -> " + tout +
              loc(out.substr(1));
    };
    std::string tqkv = t({b, s, 3 * h}), tf = t({b, s, f});
    ln("%n1_" + n, x, "%g1" + n, "%c1" + n);
    linear("%qkv" + n, "%n1_" + n, "%wqkv" + n, "%bqkv" + n, t3,
           "tensor<" + std::to_string(h) + "x" + std::to_string(3 * h) +
               "xf32>",
           "tensor<" + std::to_string(3 * h) + "xf32>", tqkv);
    const char *names[] = {"q", "k", "v"};
    for (int i = 0; i < 3; ++i) {
      std::string q = std::string(names[i]) + n;
      body += "  %" + q + "s = loom.slice %qkv" + n + " axes [2] starts [" +
              std::to_string(i * h) + "] ends [" + std::to_string((i + 1) * h) +
              "] steps [1] : " + tqkv + " -> " + t3 + loc(q + "s");
      body += "  %" + q + "r = loom.reshape %" + q + "s [0, 0, -1, " +
              std::to_string(e) + "] : " + t3 + " -> " + t4 + loc(q + "r");
      body += "  %" + q + " = loom.transpose %" + q + "r [0, 2, 1, 3] : " + t4 +
              " -> " + th + loc(q);
    }
    body += "  %a" + n + " = loom.attention %q" + n + ", %k" + n + ", %v" + n +
            " {causal, scale = 0.125 : f64} : (" + th + ", " + th + ", " + th +
            ") -> " + th + loc("a");
    body += "  %at" + n + " = loom.transpose %a" + n + " [0, 2, 1, 3] : " + th +
            " -> " + t4 + loc("at");
    body += "  %ar" + n + " = loom.reshape %at" + n + " [0, 0, -1] : " + t4 +
            " -> " + t3 + loc("ar");
    linear("%o" + n, "%ar" + n, "%wo" + n, "%bo" + n, t3,
           "tensor<" + std::to_string(h) + "x" + std::to_string(h) + "xf32>", v,
           t3);
    body += "  %r" + n + " = loom.add %o" + n + ", " + x + " : (" + t3 + ", " +
            t3 + ") -> " + t3 + loc("r");
    ln("%n2_" + n, "%r" + n, "%g2" + n, "%c2" + n);
    linear("%fc" + n, "%n2_" + n, "%w1" + n, "%b1" + n, t3,
           "tensor<" + std::to_string(h) + "x" + std::to_string(f) + "xf32>",
           "tensor<" + std::to_string(f) + "xf32>", tf);
    body += "  %ge" + n + " = loom.gelu %fc" + n + " {approximate} : " + tf +
            loc("ge");
    linear("%m" + n, "%ge" + n, "%w2" + n, "%b2" + n, tf,
           "tensor<" + std::to_string(f) + "x" + std::to_string(h) + "xf32>", v,
           t3);
    body += "  %y" + n + " = loom.add %r" + n + ", %m" + n + " : (" + t3 +
            ", " + t3 + ") -> " + t3 + loc("y");
    x = "%y" + n;
  }
  return "func.func @main(" + args + ") -> (" + t3 +
         " {loom.output = \"y\"}) {\n" + body + "  return " + x + " : " + t3 +
         "\n}\n";
}

} // namespace mlir::loom::test

#endif // LOOM_TEST_UNIT_COMPILER_TESTMODELS_H
