//===- Attention.cpp - fused scaled dot-product attention -------*- C++ -*-===//
//
// For each of the `batch` matrices (all leading dimensions: batch x heads):
//   forward   S = scale Q K^T (masked above the diagonal when causal),
//             P = softmax(S) row-wise, O = P V;
//   backward  recompute P, dV = P^T dO, dP = dO V^T,
//             dS = P * (dP - rowsum(dP * P)), dQ = scale dS K,
//             dK = scale dS^T Q.
// Scores exist only as one `Sq x Sk` block per thread of kernel workspace
// (docs/runtime.md), never for the whole batch. The softmax runs over whole
// rows with masked scores at -inf (probability exactly 0, the same bits as
// a row of only the unmasked keys; FastMath.h), so it vectorises without
// tails; the GEMMs are OpenBLAS's over the whole block.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cmath>
#include <limits>

namespace loom::runtime::cpu {

namespace {

struct AttnGeom {
  int64_t batch, sq, sk, d, dv;
  float scale;
  bool causal;
};

/// Shapes of q `[..., Sq, D]`, k `[..., Sk, D]`, v `[..., Sk, Dv]`.
StatusOr<AttnGeom> attnGeom(const OpView &op, const std::vector<int64_t> &q,
                            const std::vector<int64_t> &k,
                            const std::vector<int64_t> &v) {
  size_t r = q.size();
  if (r < 2 || k.size() != r || v.size() != r)
    return makeError("q, k and v must have the same rank >= 2, got %s, %s, %s",
                     shapeToString(q).c_str(), shapeToString(k).c_str(),
                     shapeToString(v).c_str());
  for (size_t i = 0; i + 2 < r; ++i)
    if (q[i] != k[i] || q[i] != v[i])
      return makeError("q, k and v leading dimensions differ: %s, %s, %s",
                       shapeToString(q).c_str(), shapeToString(k).c_str(),
                       shapeToString(v).c_str());
  AttnGeom g;
  g.batch = product(q, 0, r - 2);
  g.sq = q[r - 2];
  g.d = q[r - 1];
  g.sk = k[r - 2];
  g.dv = v[r - 1];
  if (k[r - 1] != g.d || v[r - 2] != g.sk)
    return makeError("k must be [..., Sk, %lld] and v [..., Sk, Dv], got %s "
                     "and %s",
                     (long long)g.d, shapeToString(k).c_str(),
                     shapeToString(v).c_str());
  LOOM_ASSIGN_OR_RETURN(double scale, op.numAttr("scale"));
  LOOM_ASSIGN_OR_RETURN(g.causal, flagAttr(op, "causal"));
  if (g.causal && g.sq != g.sk)
    return makeError("causal attention needs equal query and key lengths, "
                     "got %lld and %lld",
                     (long long)g.sq, (long long)g.sk);
  g.scale = static_cast<float>(scale);
  return g;
}

/// P = softmax(scale Q K^T) into `p` (`Sq x Sk`, masked entries 0).
void probabilities(const AttnGeom &g, const float *q, const float *k,
                   float *p) {
  sgemm(false, true, g.sq, g.sk, g.d, g.scale, q, g.d, k, g.d, 0.0f, p, g.sk);
  softmaxBlock(p, g.sq, g.sk, g.causal);
}

struct AttnPlan {
  int slots;
  bool parallel;
  CallScratch scratch; // slots x blocks x Sq x Sk
};

AttnPlan planAttention(const AttnGeom &g, int blocks, BindContext &ctx) {
  int threads = maxThreads();
  AttnPlan p;
  p.parallel = threads > 1 && g.batch > 1 && !bigGemm(g.sq, g.sk, g.d);
  p.slots = p.parallel ? static_cast<int>(std::min<int64_t>(threads, g.batch))
                       : 1;
  p.scratch = CallScratch(ctx, 0, int64_t(p.slots) * blocks * g.sq * g.sk);
  return p;
}

} // namespace

Status verifyAttention(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  bool grad = op.inst.op() == "attention_grad";
  size_t first = grad ? 1 : 0;
  LOOM_ASSIGN_OR_RETURN(AttnGeom g, attnGeom(op, op.inShape(first),
                                             op.inShape(first + 1),
                                             op.inShape(first + 2)));
  std::vector<int64_t> o = op.inShape(first);
  o.back() = g.dv;
  if (!grad)
    return expectOutShape(op, 0, o, "the output");
  LOOM_RETURN_IF_ERROR(expectInShape(op, 0, o, "the output gradient"));
  for (size_t i = 0; i < 3; ++i)
    LOOM_RETURN_IF_ERROR(
        expectOutShape(op, i, op.inShape(first + i), "a gradient"));
  return Status::ok();
}

StatusOr<KernelFn> bindAttention(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(AttnGeom g, attnGeom(op, op.inShape(0), op.inShape(1),
                                             op.inShape(2)));
  const float *q = ctx.f32(op.inputs[0]), *k = ctx.f32(op.inputs[1]),
              *v = ctx.f32(op.inputs[2]);
  float *o = ctx.f32(op.outputs[0]);
  AttnPlan plan = planAttention(g, 1, ctx);
  if (g.batch * g.sq * g.dv == 0)
    return noopKernel();
  return KernelFn([=](const StepContext &) {
    forEachSlot(g.batch, plan.slots, plan.parallel, [&](int64_t b, int slot) {
      float *p = plan.scratch.floats() + slot * g.sq * g.sk;
      probabilities(g, q + b * g.sq * g.d, k + b * g.sk * g.d, p);
      sgemm(false, false, g.sq, g.dv, g.sk, 1.0f, p, g.sk, v + b * g.sk * g.dv,
            g.dv, 0.0f, o + b * g.sq * g.dv, g.dv);
    });
    return Status::ok();
  });
}

StatusOr<KernelFn> bindAttentionGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(AttnGeom g, attnGeom(op, op.inShape(1), op.inShape(2),
                                             op.inShape(3)));
  const float *dO = ctx.f32(op.inputs[0]), *q = ctx.f32(op.inputs[1]),
              *k = ctx.f32(op.inputs[2]), *v = ctx.f32(op.inputs[3]);
  float *dq = ctx.f32(op.outputs[0]), *dk = ctx.f32(op.outputs[1]),
        *dv = ctx.f32(op.outputs[2]);
  AttnPlan plan = planAttention(g, 2, ctx);
  return KernelFn([=](const StepContext &) {
    forEachSlot(g.batch, plan.slots, plan.parallel, [&](int64_t b, int slot) {
      float *p = plan.scratch.floats() + slot * 2 * g.sq * g.sk;
      float *dp = p + g.sq * g.sk;
      const float *qb = q + b * g.sq * g.d, *kb = k + b * g.sk * g.d,
                  *vb = v + b * g.sk * g.dv, *dob = dO + b * g.sq * g.dv;
      probabilities(g, qb, kb, p);
      // dV = P^T dO; dP = dO V^T.
      sgemm(true, false, g.sk, g.dv, g.sq, 1.0f, p, g.sk, dob, g.dv, 0.0f,
            dv + b * g.sk * g.dv, g.dv);
      sgemm(false, true, g.sq, g.sk, g.dv, 1.0f, dob, g.dv, vb, g.dv, 0.0f, dp,
            g.sk);
      // dS = P * (dP - rowsum(dP * P)), kept in dp; masked entries are 0.
      softmaxGradBlock(p, dp, g.sq, g.sk, g.causal);
      // dQ = scale dS K; dK = scale dS^T Q.
      sgemm(false, false, g.sq, g.d, g.sk, g.scale, dp, g.sk, kb, g.d, 0.0f,
            dq + b * g.sq * g.d, g.d);
      sgemm(true, false, g.sk, g.d, g.sq, g.scale, dp, g.sk, qb, g.d, 0.0f,
            dk + b * g.sk * g.d, g.d);
    });
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
