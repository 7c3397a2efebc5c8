//===- ModelSpecModule.cpp - A model spec as loom IR ----------------------===//
//
// Written as the textual IR the importer and loom-raise make of a Hugging
// Face GPT-2 export (token and position lookups, per layer: layer norm, the
// fused q/k/v linear split into heads, causal attention, the projection,
// the residual, layer norm, the MLP with GELU, the residual; the final norm
// and the head tied to the token table), node names included, so layer
// keys, parameter names and init rules are the export's.
//
//===----------------------------------------------------------------------===//

#include "frontend/ModelSpecModule.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <string>

using namespace mlir;
using namespace mlir::loom;

namespace {

std::string tensor(std::initializer_list<int64_t> dims,
                   llvm::StringRef element = "f32") {
  std::string t = "tensor<";
  for (int64_t d : dims)
    t += std::to_string(d) + "x";
  return t + element.str() + ">";
}

/// `v` as text that parses back to exactly `v`.
std::string exact(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17e", v);
  return text;
}

/// The norms' epsilon as the export stores it: 1e-5 in f32 (torch's
/// nn.LayerNorm default, an ONNX float attribute).
const std::string kEpsilon = exact(double(1e-5f));

/// The function's text, one op a line.
struct GptText {
  const planner::GptSpec &spec;
  int64_t b;
  std::string args, body;

  void param(llvm::StringRef value, llvm::StringRef name,
             const std::string &type) {
    args += llvm::formatv(", %{0}: {1} {{loom.param = \"{2}\"}", value, type,
                          name)
                .str();
  }
  void op(const std::string &text, llvm::StringRef node) {
    body += "  " + text + " loc(\"" + node.str() + "\")\n";
  }

  /// Layer `i` on `x`, its result `%y<i>`.
  void layer(int64_t i, const std::string &x) {
    int64_t s = spec.seq, h = spec.hidden, a = spec.heads, e = h / a,
            f = spec.ffn;
    std::string n = std::to_string(i), p = "transformer.h." + n + ".",
                node = "/transformer/h." + n + "/";
    std::string t3 = tensor({b, s, h}), t4 = tensor({b, s, a, e}),
                th = tensor({b, a, s, e}), tq = tensor({b, s, 3 * h}),
                tf = tensor({b, s, f}), v = tensor({h});
    param("g1_" + n, p + "ln_1.weight", v);
    param("c1_" + n, p + "ln_1.bias", v);
    param("wqkv" + n, p + "attn.c_attn.weight", tensor({h, 3 * h}));
    param("bqkv" + n, p + "attn.c_attn.bias", tensor({3 * h}));
    param("wo" + n, p + "attn.c_proj.weight", tensor({h, h}));
    param("bo" + n, p + "attn.c_proj.bias", v);
    param("g2_" + n, p + "ln_2.weight", v);
    param("c2_" + n, p + "ln_2.bias", v);
    param("w1_" + n, p + "mlp.c_fc.weight", tensor({h, f}));
    param("b1_" + n, p + "mlp.c_fc.bias", tensor({f}));
    param("w2_" + n, p + "mlp.c_proj.weight", tensor({f, h}));
    param("b2_" + n, p + "mlp.c_proj.bias", v);
    auto norm = [&](const std::string &out, const std::string &in,
                    const std::string &g, const std::string &c,
                    llvm::StringRef name) {
      op(llvm::formatv("{0} = loom.layer_norm {1}, {2}, {3} axis 2 "
                       "{{epsilon = {6} : f64} : ({4}, {5}, {5}) -> {4}",
                       out, in, g, c, t3, v, kEpsilon),
         node + name.str() + "/LayerNormalization");
    };
    auto linear = [&](const std::string &out, const std::string &in,
                      const std::string &w, const std::string &bias,
                      const std::string &tin, const std::string &tw,
                      const std::string &tb, const std::string &tout,
                      llvm::StringRef name) {
      op(llvm::formatv("{0} = loom.linear {1}, {2}, {3} : ({4}, {5}, {6}) -> "
                       "{7}",
                       out, in, w, bias, tin, tw, tb, tout),
         node + name.str() + "/Gemm");
    };
    norm("%ln1_" + n, x, "%g1_" + n, "%c1_" + n, "ln_1");
    linear("%qkv" + n, "%ln1_" + n, "%wqkv" + n, "%bqkv" + n, t3,
           tensor({h, 3 * h}), tensor({3 * h}), tq, "attn/c_attn");
    const char *names[] = {"q", "k", "v"};
    for (int64_t j = 0; j < 3; ++j) {
      std::string q = names[j] + n;
      op(llvm::formatv("%{0}s = loom.slice %qkv{1} axes [2] starts [{2}] ends "
                       "[{3}] steps [1] : {4} -> {5}",
                       q, n, j * h, (j + 1) * h, tq, t3),
         node + "attn/Split");
      op(llvm::formatv("%{0}r = loom.reshape %{0}s [0, 0, -1, {1}] : {2} -> "
                       "{3}",
                       q, e, t3, t4),
         node + "attn/Reshape");
      op(llvm::formatv("%{0} = loom.transpose %{0}r [0, 2, 1, 3] : {1} -> {2}",
                       q, t4, th),
         node + "attn/Transpose");
    }
    // The export divides by sqrt(e) computed in f32; the raise folds the
    // reciprocal in f64.
    op(llvm::formatv("%a{0} = loom.attention %q{0}, %k{0}, %v{0} {{causal, "
                     "scale = {1} : f64} : ({2}, {2}, {2}) -> {2}",
                     n, exact(1.0 / double(std::sqrt(float(e)))), th),
       node + "attn/Attention");
    op(llvm::formatv("%at{0} = loom.transpose %a{0} [0, 2, 1, 3] : {1} -> {2}",
                     n, th, t4),
       node + "attn/Transpose_3");
    op(llvm::formatv("%ar{0} = loom.reshape %at{0} [0, 0, -1] : {1} -> {2}", n,
                     t4, t3),
       node + "attn/Reshape_3");
    linear("%o" + n, "%ar" + n, "%wo" + n, "%bo" + n, t3, tensor({h, h}), v,
           t3, "attn/c_proj");
    op(llvm::formatv("%r{0} = loom.add %o{0}, {1} : ({2}, {2}) -> {2}", n, x,
                     t3),
       node + "Add");
    norm("%ln2_" + n, "%r" + n, "%g2_" + n, "%c2_" + n, "ln_2");
    linear("%fc" + n, "%ln2_" + n, "%w1_" + n, "%b1_" + n, t3,
           tensor({h, f}), tensor({f}), tf, "mlp/c_fc");
    op(llvm::formatv("%ge{0} = loom.gelu %fc{0} {{approximate} : {1}", n, tf),
       node + "mlp/act/Gelu");
    linear("%m" + n, "%ge" + n, "%w2_" + n, "%b2_" + n, tf, tensor({f, h}), v,
           t3, "mlp/c_proj");
    op(llvm::formatv("%y{0} = loom.add %r{0}, %m{0} : ({1}, {1}) -> {1}", n,
                     t3),
       node + "Add_1");
  }

  std::string text() {
    int64_t s = spec.seq, h = spec.hidden, V = spec.vocab;
    std::string t3 = tensor({b, s, h}), v = tensor({h});
    args = "%input_ids: " + tensor({b, s}, "i64") +
           " {loom.input = \"input_ids\"}";
    param("wte", "transformer.wte.weight", tensor({V, h}));
    param("wpe", "transformer.wpe.weight", tensor({s, h}));
    std::string positions;
    for (int64_t i = 0; i < s; ++i)
      positions += (i ? ", " : "") + std::to_string(i);
    op("%pos = loom.constant dense<[[" + positions + "]]> : " +
           tensor({1, s}, "i64"),
       "/transformer/Constant");
    op(llvm::formatv("%tok = loom.gather %wte, %input_ids axis 0 : ({0}, {1}) "
                     "-> {2}",
                     tensor({V, h}), tensor({b, s}, "i64"), t3),
       "/transformer/wte/Gather");
    op(llvm::formatv("%place = loom.gather %wpe, %pos axis 0 : ({0}, {1}) -> "
                     "{2}",
                     tensor({s, h}), tensor({1, s}, "i64"), tensor({1, s, h})),
       "/transformer/wpe/Gather");
    op(llvm::formatv("%y_in = loom.add %tok, %place : ({0}, {1}) -> {0}", t3,
                     tensor({1, s, h})),
       "/transformer/Add");
    std::string x = "%y_in";
    for (int64_t i = 0; i < spec.layers; ++i) {
      layer(i, x);
      x = "%y" + std::to_string(i);
    }
    param("gf", "transformer.ln_f.weight", v);
    param("cf", "transformer.ln_f.bias", v);
    op(llvm::formatv("%lnf = loom.layer_norm {0}, %gf, %cf axis 2 {{epsilon = "
                     "{3} : f64} : ({1}, {2}, {2}) -> {1}",
                     x, t3, v, kEpsilon),
       "/transformer/ln_f/LayerNormalization");
    op(llvm::formatv("%wt = loom.transpose %wte [1, 0] : {0} -> {1}",
                     tensor({V, h}), tensor({h, V})),
       "/lm_head/Transpose");
    std::string logits = tensor({b, s, V});
    op(llvm::formatv("%logits = loom.matmul %lnf, %wt : ({0}, {1}) -> {2}", t3,
                     tensor({h, V}), logits),
       "/lm_head/MatMul");
    return "func.func @main(" + args + ") -> (" + logits +
           " {loom.output = \"logits\"}) {\n" + body + "  return %logits : " +
           logits + "\n}\n";
  }
};

} // namespace

OwningOpRef<ModuleOp>
mlir::loom::buildModelSpecModule(MLIRContext *ctx,
                                 const planner::GptSpec &spec, int64_t batch) {
  if (spec.arch != planner::Arch::Gpt) {
    emitError(UnknownLoc::get(ctx))
        << "--model-spec '" << spec.text
        << "': only arch=gpt is built as a model yet (plan a LLaMA shape "
           "with --plan-only or --summary-json, which write no plan)";
    return nullptr;
  }
  if (spec.hidden % spec.heads != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--model-spec '" << spec.text << "': the width " << spec.hidden
        << " does not divide into " << spec.heads << " heads";
    return nullptr;
  }
  GptText text{spec, batch, "", ""};
  return parseSourceString<ModuleOp>(text.text(), ParserConfig(ctx),
                                     "model-spec");
}
