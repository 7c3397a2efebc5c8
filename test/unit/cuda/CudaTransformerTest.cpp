//===- CudaTransformerTest.cpp - A GPT block trained on CPU and GPU -*- C++
//-*-===//
//
// One GPT-2 block written as a plan by hand with the op set loomc emits for
// GPT-2: token and position embeddings (gather), layer norms, a fused QKV
// linear split by slices, head transposes [0, 2, 1, 3] on reshaped views,
// causal attention, a GELU MLP, residual adds, logits tied to the token
// embedding (matmul with transpose_b), cross-entropy; then the backward
// (slice_grad, attention_grad, gather_grad, layer_norm_grad, gelu_grad,
// sum_to, ...) and AdamW. Trained a few steps on both backends from the
// same weights and data, the losses and the trained weights must agree.
// The sequence length (37) is not a multiple of the attention tiles.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <map>

namespace loom::runtime::test {
namespace {

constexpr int64_t kB = 2, kS = 37, kH = 2, kD = 16, kC = kH * kD, kV = 50,
                  kFF = 4 * kC;

class PlanBuilder {
public:
  PlanBuilder(plan::Program &g, std::mt19937 &rng) : g(g), rng(rng) {}

  int32_t param(const std::string &name, std::vector<int64_t> shape, float lo,
                float hi) {
    int32_t id = addBuffer(g, name, plan::PARAMETER, shape);
    setData(buffer(g, id), randomFloats(numElements(shape), rng, lo, hi));
    buffer(g, id).set_binding(name);
    params.push_back(id);
    return id;
  }
  int32_t temp(const std::string &name, std::vector<int64_t> shape) {
    return addBuffer(g, name, plan::TEMPORARY, shape);
  }
  /// A reshape: the same bytes as `of` in another shape (what loomc emits
  /// for a reshape).
  int32_t view(const std::string &name, int32_t of,
               std::vector<int64_t> shape) {
    plan::Buffer *b = g.add_buffers();
    b->set_id(g.buffers_size() - 1);
    b->set_name(name);
    b->set_role(plan::TEMPORARY);
    b->set_dtype(plan::F32);
    for (int64_t d : shape)
      b->add_shape(d);
    b->set_offset(buffer(g, of).offset());
    b->set_size_bytes(buffer(g, of).size_bytes());
    return b->id();
  }
  plan::Instruction &op(const std::string &name, std::vector<int32_t> in,
                        std::vector<int32_t> out) {
    return addInst(g, name, in, out);
  }
  int32_t layerNorm(const std::string &name, int32_t x, int32_t scale,
                    int32_t bias) {
    int32_t y = temp(name, {kB, kS, kC});
    plan::Instruction &i = op("layer_norm", {x, scale, bias}, {y});
    setI(i, "axis", 2);
    setF(i, "epsilon", 1e-5);
    return y;
  }
  /// dx of a layer norm; dscale and dbias go to `grads`.
  int32_t layerNormGrad(const std::string &name, int32_t dy, int32_t x,
                        int32_t scale, int32_t bias) {
    int32_t dx = temp("d" + name, {kB, kS, kC});
    int32_t ds = temp("d" + name + ".scale", {kC});
    int32_t db = temp("d" + name + ".bias", {kC});
    plan::Instruction &i = op("layer_norm_grad", {dy, x, scale}, {dx, ds, db});
    setI(i, "axis", 2);
    setF(i, "epsilon", 1e-5);
    grads[scale] = ds;
    grads[bias] = db;
    return dx;
  }
  /// [B, S, C] -> [B, H, S, D] through a view and a transpose.
  int32_t toHeads(const std::string &name, int32_t x) {
    int32_t v = view(name + ".v", x, {kB, kS, kH, kD});
    int32_t h = temp(name + ".h", {kB, kH, kS, kD});
    setInts(op("transpose", {v}, {h}), "permutation", {0, 2, 1, 3});
    return h;
  }
  /// [B, H, S, D] -> [B, S, C].
  int32_t fromHeads(const std::string &name, int32_t h) {
    int32_t t = temp(name + ".t", {kB, kS, kH, kD});
    setInts(op("transpose", {h}, {t}), "permutation", {0, 2, 1, 3});
    return view(name, t, {kB, kS, kC});
  }
  void slice(plan::Instruction &i, int64_t part) {
    setInts(i, "axes", {2});
    setInts(i, "starts", {part * kC});
    setInts(i, "ends", {(part + 1) * kC});
    setInts(i, "steps", {1});
  }

  plan::Program &g;
  std::mt19937 &rng;
  std::vector<int32_t> params;
  std::map<int32_t, int32_t> grads; // parameter -> its gradient
};

plan::Plan makeGptBlockPlan(std::mt19937 &rng) {
  plan::Plan p = makePlan(1, true);
  p.mutable_training()->set_global_batch(kB);
  plan::Program &g = *p.add_programs();
  g.add_ranks(0);
  PlanBuilder b(g, rng);
  int32_t ids = addBuffer(g, "ids", plan::INPUT, {kB, kS}, plan::I64);
  buffer(g, ids).set_binding("ids");
  int32_t target = addBuffer(g, "target", plan::TARGET, {kB, kS}, plan::I64);
  buffer(g, target).set_binding("target");
  std::vector<int64_t> positions(kS);
  for (int64_t i = 0; i < kS; ++i)
    positions[i] = i;
  int32_t pos = addBuffer(g, "pos", plan::CONSTANT, {1, kS}, plan::I64);
  buffer(g, pos).set_data(std::string(
      reinterpret_cast<const char *>(positions.data()), kS * sizeof(int64_t)));

  int32_t wte = b.param("wte", {kV, kC}, -0.5f, 0.5f);
  int32_t wpe = b.param("wpe", {kS, kC}, -0.1f, 0.1f);
  int32_t g1 = b.param("ln1.scale", {kC}, 0.8f, 1.2f);
  int32_t b1 = b.param("ln1.bias", {kC}, -0.1f, 0.1f);
  int32_t wqkv = b.param("attn.qkv", {kC, 3 * kC}, -0.3f, 0.3f);
  int32_t wo = b.param("attn.proj", {kC, kC}, -0.2f, 0.2f);
  int32_t bo = b.param("attn.proj.bias", {kC}, -0.1f, 0.1f);
  int32_t g2 = b.param("ln2.scale", {kC}, 0.8f, 1.2f);
  int32_t b2 = b.param("ln2.bias", {kC}, -0.1f, 0.1f);
  int32_t w1 = b.param("mlp.fc", {kC, kFF}, -0.2f, 0.2f);
  int32_t bf1 = b.param("mlp.fc.bias", {kFF}, -0.1f, 0.1f);
  int32_t w2 = b.param("mlp.proj", {kFF, kC}, -0.1f, 0.1f);
  int32_t bf2 = b.param("mlp.proj.bias", {kC}, -0.1f, 0.1f);

  // --- forward
  int32_t te = b.temp("te", {kB, kS, kC}), pe = b.temp("pe", {1, kS, kC});
  setI(b.op("gather", {wte, ids}, {te}), "axis", 0);
  setI(b.op("gather", {wpe, pos}, {pe}), "axis", 0);
  int32_t h0 = b.temp("h0", {kB, kS, kC});
  b.op("add", {te, pe}, {h0});
  int32_t ln1 = b.layerNorm("ln1", h0, g1, b1);
  // No QKV bias: a key bias has a zero true gradient, and AdamW would turn
  // its rounding noise into different steps on the two backends.
  int32_t qkv = b.temp("qkv", {kB, kS, 3 * kC});
  b.op("linear", {ln1, wqkv}, {qkv});
  int32_t qkvParts[3];
  for (int64_t part = 0; part < 3; ++part) {
    qkvParts[part] = b.temp("qkv" + std::to_string(part), {kB, kS, kC});
    b.slice(b.op("slice", {qkv}, {qkvParts[part]}), part);
  }
  int32_t qh = b.toHeads("q", qkvParts[0]), kh = b.toHeads("k", qkvParts[1]),
          vh = b.toHeads("v", qkvParts[2]);
  int32_t att = b.temp("att", {kB, kH, kS, kD});
  plan::Instruction &attn = b.op("attention", {qh, kh, vh}, {att});
  setF(attn, "scale", 1.0 / std::sqrt(double(kD)));
  setI(attn, "causal", 1);
  int32_t merged = b.fromHeads("merged", att);
  int32_t proj = b.temp("proj", {kB, kS, kC});
  b.op("linear", {merged, wo, bo}, {proj});
  int32_t h1 = b.temp("h1", {kB, kS, kC});
  b.op("add", {h0, proj}, {h1});
  int32_t ln2 = b.layerNorm("ln2", h1, g2, b2);
  int32_t f1 = b.temp("f1", {kB, kS, kFF}), ga = b.temp("ga", {kB, kS, kFF});
  b.op("linear", {ln2, w1, bf1}, {f1});
  b.op("gelu", {f1}, {ga});
  int32_t f2 = b.temp("f2", {kB, kS, kC});
  b.op("linear", {ga, w2, bf2}, {f2});
  int32_t h2 = b.temp("h2", {kB, kS, kC});
  b.op("add", {h1, f2}, {h2});
  int32_t logits = b.temp("logits", {kB, kS, kV});
  setI(b.op("matmul", {h2, wte}, {logits}), "transpose_b", 1);
  int32_t loss = addBuffer(g, "loss", plan::LOSS, {});
  g.set_loss_buffer(loss);
  b.op("cross_entropy", {logits, target}, {loss});

  // --- backward
  int32_t dlogits = b.temp("dlogits", {kB, kS, kV});
  b.op("cross_entropy_grad", {logits, target}, {dlogits});
  int32_t dh2 = b.temp("dh2", {kB, kS, kC});
  b.op("matmul", {dlogits, wte}, {dh2});
  int32_t dwteOut = b.temp("dwte.out", {kV, kC});
  setI(b.op("matmul", {dlogits, h2}, {dwteOut}), "transpose_a", 1);
  // MLP.
  auto linearGrads = [&](const std::string &name, int32_t x, int32_t dy,
                         int32_t w, int32_t bias, std::vector<int64_t> xShape,
                         std::vector<int64_t> wShape) {
    int32_t dw = b.temp("d" + name, wShape);
    setI(b.op("matmul", {x, dy}, {dw}), "transpose_a", 1);
    b.grads[w] = dw;
    if (bias >= 0) {
      int32_t db = b.temp("d" + name + ".bias", {wShape[1]});
      b.op("sum_to", {dy}, {db});
      b.grads[bias] = db;
    }
    int32_t dx = b.temp("d" + name + ".x", xShape);
    setI(b.op("matmul", {dy, w}, {dx}), "transpose_b", 1);
    return dx;
  };
  int32_t dga =
      linearGrads("mlp.proj", ga, dh2, w2, bf2, {kB, kS, kFF}, {kFF, kC});
  int32_t df1 = b.temp("df1", {kB, kS, kFF});
  b.op("gelu_grad", {dga, f1}, {df1});
  int32_t dln2 =
      linearGrads("mlp.fc", ln2, df1, w1, bf1, {kB, kS, kC}, {kC, kFF});
  int32_t dx2 = b.layerNormGrad("ln2", dln2, h1, g2, b2);
  int32_t dh1 = b.temp("dh1", {kB, kS, kC});
  b.op("add", {dh2, dx2}, {dh1});
  // Attention.
  int32_t dmerged =
      linearGrads("attn.proj", merged, dh1, wo, bo, {kB, kS, kC}, {kC, kC});
  int32_t datt = b.toHeads("datt", dmerged);
  int32_t dqh = b.temp("dqh", {kB, kH, kS, kD}),
          dkh = b.temp("dkh", {kB, kH, kS, kD}),
          dvh = b.temp("dvh", {kB, kH, kS, kD});
  plan::Instruction &attnGrad =
      b.op("attention_grad", {datt, qh, kh, vh}, {dqh, dkh, dvh});
  setF(attnGrad, "scale", 1.0 / std::sqrt(double(kD)));
  setI(attnGrad, "causal", 1);
  int32_t dParts[3] = {b.fromHeads("dq", dqh), b.fromHeads("dk", dkh),
                       b.fromHeads("dv", dvh)};
  int32_t dqkv = -1;
  for (int64_t part = 0; part < 3; ++part) {
    int32_t full = b.temp("dqkv" + std::to_string(part), {kB, kS, 3 * kC});
    b.slice(b.op("slice_grad", {dParts[part]}, {full}), part);
    if (dqkv < 0) {
      dqkv = full;
      continue;
    }
    int32_t sum = b.temp("dqkv.sum" + std::to_string(part), {kB, kS, 3 * kC});
    b.op("add", {dqkv, full}, {sum});
    dqkv = sum;
  }
  int32_t dln1 =
      linearGrads("attn.qkv", ln1, dqkv, wqkv, -1, {kB, kS, kC}, {kC, 3 * kC});
  int32_t dx1 = b.layerNormGrad("ln1", dln1, h0, g1, b1);
  int32_t dh0 = b.temp("dh0", {kB, kS, kC});
  b.op("add", {dh1, dx1}, {dh0});
  // Embeddings (the token embedding also has the logits' gradient).
  int32_t dwteIn = b.temp("dwte.in", {kV, kC}), dwte = b.temp("dwte", {kV, kC});
  setI(b.op("gather_grad", {dh0, ids}, {dwteIn}), "axis", 0);
  b.op("add", {dwteIn, dwteOut}, {dwte});
  b.grads[wte] = dwte;
  int32_t dpe = b.temp("dpe", {1, kS, kC}), dwpe = b.temp("dwpe", {kS, kC});
  b.op("sum_to", {dh0}, {dpe});
  setI(b.op("gather_grad", {dpe, pos}, {dwpe}), "axis", 0);
  b.grads[wpe] = dwpe;

  // --- AdamW
  for (int32_t w : b.params) {
    std::vector<int64_t> shape(buffer(g, w).shape().begin(),
                               buffer(g, w).shape().end());
    int32_t m =
        addBuffer(g, buffer(g, w).name() + ".m", plan::OPTIMIZER_STATE, shape);
    int32_t v =
        addBuffer(g, buffer(g, w).name() + ".v", plan::OPTIMIZER_STATE, shape);
    buffer(g, m).set_zeros(true);
    buffer(g, v).set_zeros(true);
    plan::Instruction &u =
        addInst(g, "adamw", {w, b.grads.at(w), m, v}, {w, m, v});
    setF(u, "lr", 1e-2);
  }
  return p;
}

/// Two global batches of token ids; the target is the next token.
void makeTokens(std::mt19937 &rng, HostTensor *ids, HostTensor *target) {
  std::vector<int64_t> tokens(2 * kB * (kS + 1));
  std::uniform_int_distribution<int64_t> tok(0, kV - 1);
  for (int64_t &t : tokens)
    t = tok(rng);
  std::vector<int64_t> in, next;
  for (int64_t s = 0; s < 2 * kB; ++s)
    for (int64_t i = 0; i < kS; ++i) {
      in.push_back(tokens[s * (kS + 1) + i]);
      next.push_back(tokens[s * (kS + 1) + i + 1]);
    }
  *ids = i64({2 * kB, kS}, in);
  *target = i64({2 * kB, kS}, next);
}

constexpr int kSteps = 6;
// Each weight tensor's AdamW update within 1e-3 in relative L2
// (expectUpdatesClose). The CPU run of the plan with its weights perturbed by
// 1e-6 relative (above the rounding by which the backends' summation orders
// differ) measures the comparison's sensitivity: at most 2.3e-5 here
// (GptBlockPlan.TrainsOnCpu checks it in every build).
constexpr double kUpdateRtol = 1e-3;

/// The plan, its data, its initial weights, the CPU run and the CPU run with
/// perturbed weights.
struct GptRuns {
  plan::Plan plan;
  std::vector<std::pair<std::string, HostTensor>> data;
  StatusOr<Run> initial, cpu, moved, movedInitial;
};

GptRuns gptRuns() {
  std::mt19937 rng(11);
  GptRuns r{makeGptBlockPlan(rng), {}, Run(), Run(), Run(), Run()};
  HostTensor ids, target;
  makeTokens(rng, &ids, &target);
  r.data = {{"ids", ids}, {"target", target}};
  r.initial = train(r.plan, nullptr, "gpt", r.data, 0);
  r.cpu = train(r.plan, nullptr, "gpt", r.data, kSteps);
  plan::Plan moved = perturbedParameters(r.plan, 1e-6f);
  r.movedInitial = train(moved, nullptr, "gpt", r.data, 0);
  r.moved = train(moved, nullptr, "gpt", r.data, kSteps);
  return r;
}

TEST(CudaTraining, GptBlockAdamWMatchesCpu) {
  LOOM_REQUIRE_CUDA();
  GptRuns r = gptRuns();
  Status valid = validatePlan(r.plan, "gpt");
  ASSERT_TRUE(valid.isOk()) << valid.message();
  ASSERT_TRUE(r.initial.isOk() && r.cpu.isOk() && r.moved.isOk() && r.movedInitial.isOk())
      << r.cpu.status().message();
  auto gpu = train(r.plan, testDevice(), "gpt", r.data, kSteps);
  ASSERT_TRUE(gpu.isOk()) << gpu.status().message();
  // Losses within 2e-4 (the perturbed CPU run moves them by <= 1e-6).
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(gpu->losses[s], r.cpu->losses[s],
                2e-4 * std::fabs(r.cpu->losses[s]))
        << "step " << s + 1;
  EXPECT_LT(r.cpu->losses.back(), r.cpu->losses.front());
  expectUpdatesClose(*gpu, *r.cpu, *r.moved, *r.initial, kUpdateRtol, &*r.movedInitial);
}

/// The same plan runs on the CPU here: the hand-written plan is valid and
/// learns (so a GPU failure of the test above is the GPU's), and the weight
/// comparison the test above makes is well-posed.
TEST(GptBlockPlan, TrainsOnCpu) {
  GptRuns r = gptRuns();
  Status valid = validatePlan(r.plan, "gpt");
  ASSERT_TRUE(valid.isOk()) << valid.message();
  ASSERT_TRUE(r.initial.isOk() && r.cpu.isOk() && r.moved.isOk() && r.movedInitial.isOk())
      << r.cpu.status().message();
  EXPECT_LT(r.cpu->losses.back(), r.cpu->losses.front());
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(r.moved->losses[s], r.cpu->losses[s],
                2e-5 * std::fabs(r.cpu->losses[s]))
        << "step " << s + 1;
  expectUpdatesClose(*r.cpu, *r.cpu, *r.moved, *r.initial, kUpdateRtol, &*r.movedInitial);
}

} // namespace
} // namespace loom::runtime::test
