//===- ModelSpecModule.cpp - A model spec as loom IR ----------------------===//
//
// Written as the textual IR the importer and loom-raise make of a Hugging
// Face GPT-2 export (token and position lookups, per layer: layer norm, the
// fused q/k/v linear split into heads, causal attention, the projection,
// the residual, layer norm, the MLP with GELU, the residual; the final norm
// and the head tied to the token table) or LLaMA export (LlamaText below),
// node names included, so layer keys, parameter names and init rules are
// the export's.
//
//===----------------------------------------------------------------------===//

#include "frontend/ModelSpecModule.h"
#include "ir/LoomOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

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
struct ModelText {
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
  /// `out` = `in` times `weight` stored as [out features, in features]
  /// (torch's nn.Linear without a bias): the export's Transpose and MatMul.
  void project(const std::string &out, const std::string &in,
               const std::string &weight, int64_t inWidth, int64_t outWidth,
               const std::string &node) {
    int64_t s = spec.seq;
    op(llvm::formatv("{0}t = loom.transpose {1} [1, 0] : {2} -> {3}", out,
                     weight, tensor({outWidth, inWidth}),
                     tensor({inWidth, outWidth})),
       node + "/Transpose");
    op(llvm::formatv("{0} = loom.matmul {1}, {0}t : ({2}, {3}) -> {4}", out,
                     in, tensor({b, s, inWidth}), tensor({inWidth, outWidth}),
                     tensor({b, s, outWidth})),
       node + "/MatMul");
  }
  std::string function(const std::string &logits) {
    return "func.func @main(" + args + ") -> (" + logits +
           " {loom.output = \"logits\"}) {\n" + body + "  return %logits : " +
           logits + "\n}\n";
  }
};

struct GptText : ModelText {

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
    return function(logits);
  }
};


/// A Hugging Face LLaMA export, as the importer and loom-raise make it (the
/// `transformers` defaults: RMS norms of epsilon 1e-6, rotary embeddings of
/// base 10000, no biases, the head apart from the token table): per layer,
/// the RMS norm, the q, k and v projections split into heads, the rotary
/// embedding of q and k (q cos + rotate_half(q) sin), the k and v heads
/// repeated for grouped-query attention, causal attention, the output
/// projection and the residual; the RMS norm, the SwiGLU MLP (silu(gate) x
/// up, down) and the residual.
struct LlamaText : ModelText {
  void layer(int64_t i, const std::string &x) {
    int64_t s = spec.seq, h = spec.hidden, a = spec.heads, kv = spec.kvHeads,
            e = spec.headDim(), f = spec.ffn;
    std::string n = std::to_string(i), p = "model.layers." + n + ".",
                node = "/model/layers." + n + "/";
    std::string t3 = tensor({b, s, h}), v = tensor({h});
    param("wq" + n, p + "self_attn.q_proj.weight", tensor({h, h}));
    param("wk" + n, p + "self_attn.k_proj.weight", tensor({kv * e, h}));
    param("wv" + n, p + "self_attn.v_proj.weight", tensor({kv * e, h}));
    param("wo" + n, p + "self_attn.o_proj.weight", tensor({h, h}));
    param("wg" + n, p + "mlp.gate_proj.weight", tensor({f, h}));
    param("wu" + n, p + "mlp.up_proj.weight", tensor({f, h}));
    param("wd" + n, p + "mlp.down_proj.weight", tensor({h, f}));
    param("g1_" + n, p + "input_layernorm.weight", v);
    param("g2_" + n, p + "post_attention_layernorm.weight", v);
    norm("%n1_" + n, x, "%g1_" + n, node + "input_layernorm");
    // The heads of q, k and v: [b, heads, s, e].
    auto heads = [&](llvm::StringRef q, int64_t count, llvm::StringRef proj) {
      // `_` ends the layer's number: "%q1_" + "1" is not layer 11's "%q11_".
      std::string out = "%" + q.str() + n + "_";
      project(out + "p", "%n1_" + n, "%w" + q.str() + n, h, count * e,
              node + "self_attn/" + proj.str());
      op(llvm::formatv("{0}r = loom.reshape {0}p [0, 0, -1, {1}] : {2} -> {3}",
                       out, e, tensor({b, s, count * e}),
                       tensor({b, s, count, e})),
         node + "self_attn/Reshape");
      op(llvm::formatv("{0} = loom.transpose {0}r [0, 2, 1, 3] : {1} -> {2}",
                       out, tensor({b, s, count, e}), tensor({b, count, s, e})),
         node + "self_attn/Transpose");
      return out;
    };
    std::string q = heads("q", a, "q_proj"), k = heads("k", kv, "k_proj"),
                val = heads("v", kv, "v_proj");
    q = rotary(q, a, node);
    k = rotary(k, kv, node);
    k = repeat(k, node + "self_attn/k");
    val = repeat(val, node + "self_attn/v");
    std::string th = tensor({b, a, s, e});
    op(llvm::formatv("%a{0} = loom.attention {1}, {2}, {3} {{causal, scale = "
                     "{4} : f64} : ({5}, {5}, {5}) -> {5}",
                     n, q, k, val,
                     exact(double(float(1.0 / std::sqrt(double(e))))), th),
       node + "self_attn/Attention");
    op(llvm::formatv("%at{0} = loom.transpose %a{0} [0, 2, 1, 3] : {1} -> {2}",
                     n, th, tensor({b, s, a, e})),
       node + "self_attn/Transpose_4");
    op(llvm::formatv("%ar{0} = loom.reshape %at{0} [0, 0, -1] : {1} -> {2}", n,
                     tensor({b, s, a, e}), t3),
       node + "self_attn/Reshape_3");
    project("%o" + n, "%ar" + n, "%wo" + n, h, h, node + "self_attn/o_proj");
    op(llvm::formatv("%r{0} = loom.add {1}, %o{0} : ({2}, {2}) -> {2}", n, x,
                     t3),
       node + "Add");
    norm("%n2_" + n, "%r" + n, "%g2_" + n, node + "post_attention_layernorm");
    std::string tf = tensor({b, s, f});
    project("%gate" + n, "%n2_" + n, "%wg" + n, h, f, node + "mlp/gate_proj");
    op(llvm::formatv("%sg{0} = loom.sigmoid %gate{0} : {1}", n, tf),
       node + "mlp/act_fn/Sigmoid");
    op(llvm::formatv("%si{0} = loom.mul %gate{0}, %sg{0} : ({1}, {1}) -> {1}",
                     n, tf),
       node + "mlp/act_fn/Mul");
    project("%up" + n, "%n2_" + n, "%wu" + n, h, f, node + "mlp/up_proj");
    op(llvm::formatv("%gu{0} = loom.mul %si{0}, %up{0} : ({1}, {1}) -> {1}",
                     n, tf),
       node + "mlp/Mul");
    project("%dn" + n, "%gu" + n, "%wd" + n, f, h, node + "mlp/down_proj");
    op(llvm::formatv("%y{0} = loom.add %r{0}, %dn{0} : ({1}, {1}) -> {1}", n,
                     t3),
       node + "Add_1");
  }

  void norm(const std::string &out, const std::string &in,
            const std::string &g, const std::string &node) {
    op(llvm::formatv("{0} = loom.rms_norm {1}, {2} axis 2 {{epsilon = {3} : "
                     "f64} : ({4}, {5}) -> {4}",
                     out, in, g, exact(1e-6), tensor({b, spec.seq, spec.hidden}),
                     tensor({spec.hidden})),
       node + "/Mul_1");
  }

  /// `x` cos + rotate_half(`x`) sin over the last dimension of the heads.
  std::string rotary(const std::string &x, int64_t count,
                     const std::string &node) {
    int64_t s = spec.seq, e = spec.headDim();
    std::string t = tensor({b, count, s, e}), half = tensor({b, count, s, e / 2}),
                table = tensor({1, 1, s, e});
    op(llvm::formatv("{0}c = loom.mul {0}, %cos : ({1}, {2}) -> {1}", x, t,
                     table),
       node + "Mul");
    op(llvm::formatv("{0}1 = loom.slice {0} axes [3] starts [0] ends [{1}] "
                     "steps [1] : {2} -> {3}",
                     x, e / 2, t, half),
       node + "Slice");
    op(llvm::formatv("{0}2 = loom.slice {0} axes [3] starts [{1}] ends [{2}] "
                     "steps [1] : {3} -> {4}",
                     x, e / 2, e, t, half),
       node + "Slice_1");
    op(llvm::formatv("{0}m = loom.neg {0}2 : {1}", x, half), node + "Neg");
    op(llvm::formatv("{0}h = loom.concat {0}m, {0}1 axis 3 : ({1}, {1}) -> {2}",
                     x, half, t),
       node + "Concat");
    op(llvm::formatv("{0}s = loom.mul {0}h, %sin : ({1}, {2}) -> {1}", x, t,
                     table),
       node + "Mul_1");
    op(llvm::formatv("{0}o = loom.add {0}c, {0}s : ({1}, {1}) -> {1}", x, t),
       node + "Add");
    return x + "o";
  }

  /// The kv heads of `x`, each repeated for the query heads it serves.
  std::string repeat(const std::string &x, const std::string &node) {
    int64_t s = spec.seq, e = spec.headDim(), kv = spec.kvHeads,
            r = spec.heads / kv;
    if (r == 1)
      return x;
    op(llvm::formatv("{0}u = loom.reshape {0} [0, 0, -1, {1}, {2}] : {3} -> "
                     "{4}",
                     x, s, e, tensor({b, kv, s, e}), tensor({b, kv, 1, s, e})),
       node + "/Reshape");
    op(llvm::formatv("{0}x = loom.expand {0}u [-1, -1, {1}, -1, -1] : {2} -> "
                     "{3}",
                     x, r, tensor({b, kv, 1, s, e}), tensor({b, kv, r, s, e})),
       node + "/Expand");
    op(llvm::formatv("{0}g = loom.reshape {0}x [0, -1, {1}, {2}] : {3} -> {4}",
                     x, s, e, tensor({b, kv, r, s, e}),
                     tensor({b, spec.heads, s, e})),
       node + "/Reshape_1");
    return x + "g";
  }

  std::string text() {
    int64_t s = spec.seq, h = spec.hidden, V = spec.vocab, e = spec.headDim();
    std::string t3 = tensor({b, s, h});
    args = "%input_ids: " + tensor({b, s}, "i64") +
           " {loom.input = \"input_ids\"}";
    param("wte", "model.embed_tokens.weight", tensor({V, h}));
    // The rotary tables: placeholders here, their values set once parsed
    // (rotaryTables).
    for (llvm::StringRef t : {"cos", "sin"})
      op(llvm::formatv("%{0} = loom.constant dense<0.0> : {1}", t,
                       tensor({1, 1, s, e})),
         "/model/rotary_emb/" +
             std::string(t == "cos" ? "Cos" : "Sin"));
    op(llvm::formatv("%y_in = loom.gather %wte, %input_ids axis 0 : ({0}, {1}) "
                     "-> {2}",
                     tensor({V, h}), tensor({b, s}, "i64"), t3),
       "/model/embed_tokens/Gather");
    std::string x = "%y_in";
    for (int64_t i = 0; i < spec.layers; ++i) {
      layer(i, x);
      x = "%y" + std::to_string(i);
    }
    param("gf", "model.norm.weight", tensor({h}));
    norm("%nf", x, "%gf", "/model/norm");
    param("wh", "lm_head.weight", tensor({V, h}));
    project("%logits", "%nf", "%wh", h, V, "/lm_head");
    return function(tensor({b, s, V}));
  }
};

/// The rotary tables as `transformers` computes them in f32: the inverse
/// frequencies 1 / 10000^(2i / e), times each position, repeated for both
/// halves; their cosines and sines.
void rotaryTables(ModuleOp module, const planner::GptSpec &spec) {
  int64_t s = spec.seq, e = spec.headDim();
  std::vector<float> cosines, sines;
  for (int64_t t = 0; t < s; ++t)
    for (int64_t j = 0; j < e; ++j) {
      int64_t i = j % (e / 2);
      float inverse = 1.0f / std::pow(10000.0f, float(2 * i) / float(e));
      float angle = float(t) * inverse;
      cosines.push_back(std::cos(angle));
      sines.push_back(std::sin(angle));
    }
  module.walk([&](ConstantOp c) {
    auto name = dyn_cast<NameLoc>(c.getLoc());
    if (!name)
      return;
    auto type = cast<RankedTensorType>(c.getType());
    if (name.getName() == "/model/rotary_emb/Cos")
      c.setValueAttr(DenseElementsAttr::get(type, llvm::ArrayRef(cosines)));
    else if (name.getName() == "/model/rotary_emb/Sin")
      c.setValueAttr(DenseElementsAttr::get(type, llvm::ArrayRef(sines)));
  });
}

} // namespace

OwningOpRef<ModuleOp>
mlir::loom::buildModelSpecModule(MLIRContext *ctx,
                                 const planner::GptSpec &spec, int64_t batch,
                                 bool constantValues) {
  if (spec.hidden % spec.heads != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--model-spec '" << spec.text << "': the width " << spec.hidden
        << " does not divide into " << spec.heads << " heads";
    return nullptr;
  }
  if (spec.arch == planner::Arch::Gpt) {
    GptText text{{spec, batch, "", ""}};
    return parseSourceString<ModuleOp>(text.text(), ParserConfig(ctx),
                                       "model-spec");
  }
  if (spec.headDim() % 2 != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--model-spec '" << spec.text << "': the head dimension "
        << spec.headDim() << " is odd; rotary embeddings rotate pairs";
    return nullptr;
  }
  LlamaText text{{spec, batch, "", ""}};
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      text.text(), ParserConfig(ctx), "model-spec");
  if (module && constantValues)
    rotaryTables(*module, spec);
  return module;
}
