//===- Pooling.cpp - max_pool2d and its gradient ----------------*- C++ -*-===//
//
// Windows are clipped to the input, so padding never wins. Each window's
// argmax is its first maximum in row-major order (a NaN wins, as in
// PyTorch); the gradient recomputes it and adds `dy` there. Threads split
// the `N * C` planes, which never share outputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cstring>

namespace loom::runtime::cpu {

namespace {

struct PoolGeom {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, pt, pl;
};

StatusOr<PoolGeom> poolGeom(const OpView &op, const std::vector<int64_t> &x,
                            const std::vector<int64_t> &y) {
  if (x.size() != 4 || x[2] < 1 || x[3] < 1)
    return makeError("needs an NCHW input with non-empty planes, got %s",
                     shapeToString(x).c_str());
  LOOM_ASSIGN_OR_RETURN(auto k, intsAttrOfSize(op, "kernel", 2));
  LOOM_ASSIGN_OR_RETURN(auto s, intsAttrOfSize(op, "strides", 2));
  LOOM_ASSIGN_OR_RETURN(auto p, intsAttrOfSize(op, "pads", 4));
  if (k[0] < 1 || k[1] < 1 || s[0] < 1 || s[1] < 1)
    return makeError("kernel sizes and strides must be positive");
  for (int i = 0; i < 4; ++i)
    if (p[i] < 0 || p[i] >= k[i % 2])
      return makeError("pads %s must be non-negative and smaller than the "
                       "kernel %s",
                       shapeToString(p).c_str(), shapeToString(k).c_str());
  PoolGeom g{x[0] * x[1], x[2], x[3], 0, 0, k[0], k[1], s[0], s[1], p[0], p[1]};
  if (x[2] + p[0] + p[2] < k[0] || x[3] + p[1] + p[3] < k[1])
    return makeError("the %lldx%lld window does not fit the padded input %s",
                     (long long)k[0], (long long)k[1],
                     shapeToString(x).c_str());
  g.oh = (x[2] + p[0] + p[2] - k[0]) / s[0] + 1;
  g.ow = (x[3] + p[1] + p[3] - k[1]) / s[1] + 1;
  std::vector<int64_t> want = {x[0], x[1], g.oh, g.ow};
  if (y != want)
    return makeError("output or its gradient has shape %s, expected %s",
                     shapeToString(y).c_str(), shapeToString(want).c_str());
  return g;
}

/// Calls `f(oy, ox, argmax, max)` for every window of one plane. Windows are
/// never empty (pads are smaller than the kernel); the selects are
/// branch-free so random data costs no mispredictions.
template <typename F>
void forEachWindow(const PoolGeom &g, const float *x, F f) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    int64_t y0 = std::max<int64_t>(oy * g.sh - g.pt, 0);
    int64_t y1 = std::min(oy * g.sh - g.pt + g.kh, g.h);
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      int64_t x0 = std::max<int64_t>(ox * g.sw - g.pl, 0);
      int64_t x1 = std::min(ox * g.sw - g.pl + g.kw, g.w);
      int64_t arg = y0 * g.w + x0;
      float m = x[arg];
      for (int64_t iy = y0; iy < y1; ++iy)
        for (int64_t ix = x0; ix < x1; ++ix) {
          int64_t i = iy * g.w + ix;
          float v = x[i];
          bool take = v > m || v != v; // PyTorch: a NaN wins
          m = take ? v : m;
          arg = take ? i : arg;
        }
      f(oy, ox, arg, m);
    }
  }
}

/// The maximum of every window of one plane into `y` (no argmax needed).
void maxWindows(const PoolGeom &g, const float *x, float *y) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    int64_t y0 = std::max<int64_t>(oy * g.sh - g.pt, 0);
    int64_t y1 = std::min(oy * g.sh - g.pt + g.kh, g.h);
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      int64_t x0 = std::max<int64_t>(ox * g.sw - g.pl, 0);
      int64_t x1 = std::min(ox * g.sw - g.pl + g.kw, g.w);
      float m = x[y0 * g.w + x0];
      for (int64_t iy = y0; iy < y1; ++iy) {
        const float *row = x + iy * g.w;
        for (int64_t ix = x0; ix < x1; ++ix)
          m = (row[ix] > m || row[ix] != row[ix]) ? row[ix] : m;
      }
      y[oy * g.ow + ox] = m;
    }
  }
}

} // namespace

Status verifyMaxPool2d(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  if (op.inst.op() == "max_pool2d")
    return poolGeom(op, op.inShape(0), op.outShape(0)).status();
  LOOM_RETURN_IF_ERROR(expectOutShape(op, 0, op.inShape(1), "output"));
  return poolGeom(op, op.inShape(1), op.inShape(0)).status();
}

StatusOr<KernelFn> bindMaxPool2d(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(PoolGeom g,
                        poolGeom(op, op.inShape(0), op.outShape(0)));
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  bool big = g.planes * g.oh * g.ow * g.kh * g.kw >= kParallelThreshold;
  return KernelFn([=](const StepContext &) {
#pragma omp parallel for schedule(static) if (big)
    for (int64_t p = 0; p < g.planes; ++p)
      maxWindows(g, x + p * g.h * g.w, y + p * g.oh * g.ow);
    return Status::ok();
  });
}

StatusOr<KernelFn> bindMaxPool2dGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(PoolGeom g, poolGeom(op, op.inShape(1), op.inShape(0)));
  const float *dy = ctx.f32(op.inputs[0]), *x = ctx.f32(op.inputs[1]);
  float *dx = ctx.f32(op.outputs[0]);
  bool big = g.planes * g.oh * g.ow * g.kh * g.kw >= kParallelThreshold;
  return KernelFn([=](const StepContext &) {
#pragma omp parallel for schedule(static) if (big)
    for (int64_t p = 0; p < g.planes; ++p) {
      float *pdx = dx + p * g.h * g.w;
      const float *pdy = dy + p * g.oh * g.ow;
      std::memset(pdx, 0, g.h * g.w * sizeof(float));
      forEachWindow(g, x + p * g.h * g.w,
                    [&](int64_t oy, int64_t ox, int64_t arg, float) {
                      pdx[arg] += pdy[oy * g.ow + ox];
                    });
    }
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
