//===- Optimizer.cpp - sgd and adamw, as torch.optim computes them -*- C++ -*-===//
//
// Both follow PyTorch's single-tensor (`foreach=False`) code paths operation
// by operation, in float, with scalars computed in double as Python does.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/HostTensor.h"

#include <cmath>

namespace loom::runtime::cpu {

namespace {

Status expectSameNumel(const OpView &op) {
  int64_t n = op.inNumel(0);
  for (size_t i = 1; i < op.inputs.size(); ++i)
    if (op.inNumel(i) != n)
      return makeError("input %zu %s differs in element count from the "
                       "parameter %s",
                       i, shapeToString(op.inShape(i)).c_str(),
                       shapeToString(op.inShape(0)).c_str());
  return Status::ok();
}

Status expectInPlace(const OpView &op, size_t out, size_t in) {
  if (op.outputs[out]->id() != op.inputs[in]->id())
    return makeError("output %zu must be input %zu (buffer %d), updated in "
                     "place; got buffer %d",
                     out, in, op.inputs[in]->id(), op.outputs[out]->id());
  return Status::ok();
}

struct SgdAttrs {
  double lr, momentum, weightDecay, dampening;
  bool nesterov;
};

StatusOr<SgdAttrs> sgdAttrs(const OpView &op) {
  SgdAttrs a;
  LOOM_ASSIGN_OR_RETURN(a.lr, op.numAttr("lr"));
  LOOM_ASSIGN_OR_RETURN(a.momentum, op.numAttr("momentum", 0.0));
  LOOM_ASSIGN_OR_RETURN(a.weightDecay, op.numAttr("weight_decay", 0.0));
  LOOM_ASSIGN_OR_RETURN(a.dampening, op.numAttr("dampening", 0.0));
  LOOM_ASSIGN_OR_RETURN(double nesterov, op.numAttr("nesterov", 0.0));
  a.nesterov = nesterov != 0;
  return a;
}

struct AdamWAttrs {
  double lr, beta1, beta2, eps, weightDecay;
};

StatusOr<AdamWAttrs> adamwAttrs(const OpView &op) {
  AdamWAttrs a;
  LOOM_ASSIGN_OR_RETURN(a.lr, op.numAttr("lr"));
  LOOM_ASSIGN_OR_RETURN(a.beta1, op.numAttr("beta1", 0.9));
  LOOM_ASSIGN_OR_RETURN(a.beta2, op.numAttr("beta2", 0.999));
  LOOM_ASSIGN_OR_RETURN(a.eps, op.numAttr("eps", 1e-8));
  LOOM_ASSIGN_OR_RETURN(a.weightDecay, op.numAttr("weight_decay", 0.01));
  return a;
}

struct AdamWStep {
  float decay, w1, b2, w2, stepSize, bc2Sqrt, eps;
};

/// AdamW over `[lo, hi)`, as torch.optim.AdamW(foreach=False) computes it.
LOOM_SIMD_CLONES
void adamwRange(float *p, const float *g, float *m, float *v, int64_t lo,
                int64_t hi, AdamWStep k) {
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    float pi = p[i] * k.decay;
    float mi = m[i] + k.w1 * (g[i] - m[i]); // lerp(m, g, 1 - beta1)
    float vi = v[i] * k.b2 + k.w2 * g[i] * g[i];
    float denom = std::sqrt(vi) / k.bc2Sqrt + k.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - k.stepSize * (mi / denom);
  }
}

} // namespace

Status verifySgd(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_ASSIGN_OR_RETURN(SgdAttrs a, sgdAttrs(op));
  bool hasBuf = op.inputs.size() == 3;
  if (hasBuf != (op.outputs.size() == 2))
    return makeError("takes (p, g) -> (p) or (p, g, buf) -> (p, buf); got %zu "
                     "inputs and %zu outputs",
                     op.inputs.size(), op.outputs.size());
  if (hasBuf != (a.momentum != 0))
    return makeError("momentum is %g, so the momentum buffer must be %s",
                     a.momentum, hasBuf ? "absent" : "present");
  if (a.nesterov && (a.momentum <= 0 || a.dampening != 0))
    return makeError("nesterov needs momentum > 0 and dampening 0");
  LOOM_RETURN_IF_ERROR(expectSameNumel(op));
  LOOM_RETURN_IF_ERROR(expectInPlace(op, 0, 0));
  if (hasBuf)
    LOOM_RETURN_IF_ERROR(expectInPlace(op, 1, 2));
  if (op.inputs[1]->id() == op.inputs[0]->id())
    return makeError("gradient and parameter are the same buffer");
  return Status::ok();
}

StatusOr<KernelFn> bindSgd(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(SgdAttrs a, sgdAttrs(op));
  float *p = ctx.f32(op.inputs[0]);
  const float *g = ctx.f32(op.inputs[1]);
  float *buf = op.inputs.size() == 3 ? ctx.f32(op.inputs[2]) : nullptr;
  int64_t n = op.inNumel(0);
  float lr = a.lr, wd = a.weightDecay, mom = a.momentum;
  float keep = 1.0 - a.dampening;
  bool nesterov = a.nesterov;
  return KernelFn([=](const StepContext &sc) {
    bool first = sc.step == 0;
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i];
      if (wd != 0)
        d = d + wd * p[i];
      if (buf) {
        buf[i] = first ? d : buf[i] * mom + keep * d;
        d = nesterov ? d + mom * buf[i] : buf[i];
      }
      p[i] = p[i] - lr * d;
    }
    return Status::ok();
  });
}

Status verifyAdamW(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(adamwAttrs(op).status());
  LOOM_RETURN_IF_ERROR(expectSameNumel(op));
  LOOM_RETURN_IF_ERROR(expectInPlace(op, 0, 0));
  LOOM_RETURN_IF_ERROR(expectInPlace(op, 1, 2));
  LOOM_RETURN_IF_ERROR(expectInPlace(op, 2, 3));
  if (op.inputs[2]->id() == op.inputs[3]->id())
    return makeError("exp_avg and exp_avg_sq are the same buffer");
  return Status::ok();
}

StatusOr<KernelFn> bindAdamW(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(AdamWAttrs a, adamwAttrs(op));
  float *p = ctx.f32(op.inputs[0]);
  const float *g = ctx.f32(op.inputs[1]);
  float *m = ctx.f32(op.inputs[2]);
  float *v = ctx.f32(op.inputs[3]);
  int64_t n = op.inNumel(0);
  return KernelFn([=](const StepContext &sc) {
    double t = static_cast<double>(sc.step + 1);
    AdamWStep k;
    k.decay = static_cast<float>(1.0 - a.lr * a.weightDecay);
    k.w1 = static_cast<float>(1.0 - a.beta1);
    k.b2 = static_cast<float>(a.beta2);
    k.w2 = static_cast<float>(1.0 - a.beta2);
    double bc1 = 1.0 - std::pow(a.beta1, t);
    double bc2 = 1.0 - std::pow(a.beta2, t);
    k.stepSize = static_cast<float>(a.lr / bc1);
    k.bc2Sqrt = static_cast<float>(std::sqrt(bc2));
    k.eps = static_cast<float>(a.eps);
    forRanges(n, kParallelThreshold, [&](int64_t lo, int64_t hi) {
      adamwRange(p, g, m, v, lo, hi, k);
    });
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
