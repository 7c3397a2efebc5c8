//===- Activation.cpp - softmax and gelu with their gradients ---*- C++ -*-===//
//
// Softmax views its input as `[outer, axis, inner]`: with `inner == 1` each
// row is reduced in place; otherwise blocks of `inner` columns are reduced
// together so memory is read in order. Softmax subtracts the maximum first,
// so it stays finite for large inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cmath>

namespace loom::runtime::cpu {

namespace {

struct AxisView {
  int64_t outer, dim, inner;
};

StatusOr<AxisView> axisView(const OpView &op) {
  std::vector<int64_t> xs = op.inShape(0);
  if (xs.empty())
    return makeError("input must have rank >= 1");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", xs.size()));
  return AxisView{product(xs, 0, axis), xs[axis],
                  product(xs, axis + 1, xs.size())};
}

Status verifySameShapeF32(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  std::vector<int64_t> out = op.outShape(0);
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inShape(i) != out)
      return makeError("input %zu has shape %s, expected the output's %s", i,
                       shapeToString(op.inShape(i)).c_str(),
                       shapeToString(out).c_str());
  return Status::ok();
}

constexpr int64_t kColumns = 64; // columns per block when inner > 1

/// Runs `row(x, y, stride, len)` over every softmax row when `inner == 1`,
/// and `cols(offset, width)` over blocks of columns otherwise.
template <typename Row, typename Cols>
void forAxis(const AxisView &v, Row row, Cols cols) {
  int64_t n = v.outer * v.dim * v.inner;
  if (v.inner == 1) {
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t o = 0; o < v.outer; ++o)
      row(o * v.dim);
    return;
  }
  int64_t blocks = (v.inner + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (int64_t t = 0; t < v.outer * blocks; ++t) {
    int64_t o = t / blocks, c0 = (t % blocks) * kColumns;
    cols(o * v.dim * v.inner + c0, std::min(kColumns, v.inner - c0));
  }
}

} // namespace

Status verifySoftmax(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifySameShapeF32(op));
  return axisView(op).status();
}

StatusOr<KernelFn> bindSoftmax(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(AxisView v, axisView(op));
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  if (v.dim == 0)
    return noopKernel();
  return KernelFn([=](const StepContext &) {
    int64_t d = v.dim, in = v.inner;
    forAxis(
        v,
        [&](int64_t off) {
          const float *px = x + off;
          float *py = y + off;
          softmaxRow(px, py, d);
        },
        [&](int64_t off, int64_t w) {
          float mx[kColumns], sum[kColumns];
          for (int64_t c = 0; c < w; ++c) {
            mx[c] = x[off + c];
            sum[c] = 0;
          }
          for (int64_t i = 1; i < d; ++i)
            for (int64_t c = 0; c < w; ++c)
              mx[c] = std::max(mx[c], x[off + i * in + c]);
          for (int64_t i = 0; i < d; ++i) {
            const float *px = x + off + i * in;
            float *py = y + off + i * in;
#pragma omp simd
            for (int64_t c = 0; c < w; ++c) {
              float e = fastExp(px[c] - mx[c]);
              py[c] = e;
              sum[c] += e;
            }
          }
          for (int64_t c = 0; c < w; ++c)
            sum[c] = 1.0f / sum[c];
          for (int64_t i = 0; i < d; ++i)
            for (int64_t c = 0; c < w; ++c)
              y[off + i * in + c] *= sum[c];
        });
    return Status::ok();
  });
}

Status verifySoftmaxGrad(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifySameShapeF32(op));
  return axisView(op).status();
}

StatusOr<KernelFn> bindSoftmaxGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(AxisView v, axisView(op));
  const float *dy = ctx.f32(op.inputs[0]), *y = ctx.f32(op.inputs[1]);
  float *dx = ctx.f32(op.outputs[0]);
  if (v.dim == 0)
    return noopKernel();
  return KernelFn([=](const StepContext &) {
    int64_t d = v.dim, in = v.inner;
    forAxis(
        v,
        [&](int64_t off) {
          float dot = 0;
          for (int64_t i = 0; i < d; ++i)
            dot += dy[off + i] * y[off + i];
          for (int64_t i = 0; i < d; ++i)
            dx[off + i] = y[off + i] * (dy[off + i] - dot);
        },
        [&](int64_t off, int64_t w) {
          float dot[kColumns];
          for (int64_t c = 0; c < w; ++c)
            dot[c] = 0;
          for (int64_t i = 0; i < d; ++i)
            for (int64_t c = 0; c < w; ++c)
              dot[c] += dy[off + i * in + c] * y[off + i * in + c];
          for (int64_t i = 0; i < d; ++i)
            for (int64_t c = 0; c < w; ++c) {
              int64_t k = off + i * in + c;
              dx[k] = y[k] * (dy[k] - dot[c]);
            }
        });
    return Status::ok();
  });
}

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kGeluCubic = 0.044715f;

/// y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
/// x sigmoid(2u).
LOOM_SIMD_CLONES
void geluTanhRange(const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    y[i] = v / (1.0f + fastExp(-2.0f * u));
  }
}

/// dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) du/dx), t = tanh(u). With
/// e = exp(-2u) and s = 1 / (1 + e) = (1 + t) / 2: 1 - t^2 = 4 s (e s).
/// Clamping -2u at 88 keeps e finite, so e s -> 1 (not inf * 0) where s
/// underflows.
LOOM_SIMD_CLONES
void geluTanhGradRange(const float *dy, const float *x, float *dx,
                       int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    float m = -2.0f * u;
    float e = fastExp(m > 88.0f ? 88.0f : m);
    float sg = 1.0f / (1.0f + e);
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (sg + 2.0f * v * sg * (e * sg) * du);
  }
}

template <typename F> KernelFn mapN(int64_t n, F f) {
  return [=](const StepContext &) {
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t i = 0; i < n; ++i)
      f(i);
    return Status::ok();
  };
}

} // namespace

Status verifyGelu(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifySameShapeF32(op));
  return flagAttr(op, "approximate").status();
}

StatusOr<KernelFn> bindGelu(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(bool tanhForm, flagAttr(op, "approximate"));
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  // 0.5 v (1 + tanh(u)) = v sigmoid(2u): one vectorised exp, no libm.
  if (tanhForm)
    return KernelFn([=](const StepContext &) {
      forRanges(n, kParallelThreshold, [=](int64_t lo, int64_t hi) {
        geluTanhRange(x + lo, y + lo, hi - lo);
      });
      return Status::ok();
    });
  return mapN(n, [=](int64_t i) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::erf(v * kInvSqrt2));
  });
}

Status verifyGeluGrad(const OpView &op) { return verifyGelu(op); }

StatusOr<KernelFn> bindGeluGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(bool tanhForm, flagAttr(op, "approximate"));
  const float *dy = ctx.f32(op.inputs[0]), *x = ctx.f32(op.inputs[1]);
  float *dx = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  if (tanhForm)
    return KernelFn([=](const StepContext &) {
      forRanges(n, kParallelThreshold, [=](int64_t lo, int64_t hi) {
        geluTanhGradRange(dy + lo, x + lo, dx + lo, hi - lo);
      });
      return Status::ok();
    });
  return mapN(n, [=](int64_t i) {
    float v = x[i];
    float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  });
}

} // namespace loom::runtime::cpu
