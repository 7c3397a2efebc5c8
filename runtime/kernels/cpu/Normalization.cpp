//===- Normalization.cpp - Layer, RMS and batch norm + grads ----*- C++ -*-===//
//
// Statistics accumulate in double; variance is biased and computed in two
// passes (mean first), as PyTorch does. Backward kernels recompute the
// statistics instead of reading saved ones. Layer/RMS norm gradients keep
// per-row mean and rstd in kernel workspace so the parameter gradients can
// be summed by column blocks on separate threads.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cmath>

namespace loom::runtime::cpu {

namespace {

/// `[rows, cols]` view of a norm over dims `[axis, rank)`.
struct NormView {
  int64_t rows, cols;
  float eps;
};

/// The norm's view of input `xIn` (0 forward, 1 backward).
StatusOr<NormView> normView(const OpView &op, size_t xIn) {
  std::vector<int64_t> xs = op.inShape(xIn);
  if (xs.empty())
    return makeError("input must have rank >= 1");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", xs.size()));
  LOOM_ASSIGN_OR_RETURN(double eps, op.numAttr("epsilon"));
  return NormView{product(xs, 0, axis), product(xs, axis, xs.size()),
                  static_cast<float>(eps)};
}

/// Shape of the normalised dims of input `xIn`.
std::vector<int64_t> paramShape(const OpView &op, size_t xIn) {
  std::vector<int64_t> xs = op.inShape(xIn);
  int64_t axis = axisAttr(op, "axis", xs.size()).value();
  return std::vector<int64_t>(xs.begin() + axis, xs.end());
}

struct RowStats {
  float mean, rstd;
};

/// Mean (0 for RMS) and 1/sqrt(var + eps) (mean of squares for RMS).
inline RowStats rowStats(const float *x, int64_t n, float eps, bool rms) {
  double mean = 0;
  if (!rms)
    mean = sumLanes8<double>(n, [&](int64_t i) { return double(x[i]); }) / n;
  double var = sumLanes8<double>(n, [&](int64_t i) {
                 double d = x[i] - mean;
                 return d * d;
               }) /
               n;
  return {static_cast<float>(mean),
          static_cast<float>(1.0 / std::sqrt(var + eps))};
}

/// One row of layer/RMS norm: y = (x - mean) rstd scale (+ bias).
LOOM_SIMD_CLONES
void normRow(const float *px, float *py, const float *scale,
             const float *bias, int64_t cols, float eps, bool rms) {
  RowStats s = rowStats(px, cols, eps, rms);
  if (bias) {
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j)
      py[j] = (px[j] - s.mean) * s.rstd * scale[j] + bias[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j)
      py[j] = (px[j] - s.mean) * s.rstd * scale[j];
  }
}

/// One row of the input gradient; stores the row's mean and rstd.
/// With g = dy * scale and xhat = (x - mean) * rstd:
/// layer: dx = rstd (g - mean(g) - xhat mean(g xhat));
/// rms:   dx = rstd (g - xhat mean(g xhat)).
LOOM_SIMD_CLONES
void normGradRow(const float *px, const float *pdy, float *pdx,
                 const float *scale, int64_t cols, float eps, bool rms,
                 float *meanOut, float *rstdOut) {
  RowStats s = rowStats(px, cols, eps, rms);
  *meanOut = s.mean;
  *rstdOut = s.rstd;
  double sumG = sumLanes8<double>(
      cols, [&](int64_t j) { return double(pdy[j] * scale[j]); });
  double sumGX = sumLanes8<double>(cols, [&](int64_t j) {
    return double((pdy[j] * scale[j]) * ((px[j] - s.mean) * s.rstd));
  });
  double inv = 1.0 / cols;
  float a = static_cast<float>(sumGX * inv);
  float b = rms ? 0.0f : static_cast<float>(sumG * inv);
#pragma omp simd
  for (int64_t j = 0; j < cols; ++j) {
    float xhat = (px[j] - s.mean) * s.rstd;
    pdx[j] = s.rstd * (pdy[j] * scale[j] - b - xhat * a);
  }
}

/// dscale[c0, c0+len) and dbias over all rows, for one block of columns.
LOOM_SIMD_CLONES
void normParamGradBlock(const float *x, const float *dy, const float *mean,
                        const float *rstd, int64_t rows, int64_t cols,
                        int64_t c0, int64_t len, float *dscale, float *dbias) {
  constexpr int64_t kBlock = 128;
  double ds[kBlock] = {}, db[kBlock] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = x + r * cols + c0, *pdy = dy + r * cols + c0;
    float m = mean[r], s = rstd[r];
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      ds[j] += pdy[j] * ((px[j] - m) * s);
      db[j] += pdy[j];
    }
  }
  for (int64_t j = 0; j < len; ++j) {
    dscale[c0 + j] = static_cast<float>(ds[j]);
    if (dbias)
      dbias[c0 + j] = static_cast<float>(db[j]);
  }
}

Status verifyNormCommon(const OpView &op, size_t xIn) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  LOOM_RETURN_IF_ERROR(normView(op, xIn).status());
  return Status::ok();
}

} // namespace

//===----------------------------------------------------------------------===//
// layer_norm, rms_norm
//===----------------------------------------------------------------------===//

Status verifyLayerNorm(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifyNormCommon(op, 0));
  std::vector<int64_t> ps = paramShape(op, 0);
  LOOM_RETURN_IF_ERROR(expectInShape(op, 1, ps, "scale"));
  if (op.inputs.size() == 3)
    LOOM_RETURN_IF_ERROR(expectInShape(op, 2, ps, "bias"));
  return expectOutShape(op, 0, op.inShape(0), "output");
}

StatusOr<KernelFn> bindLayerNorm(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(NormView v, normView(op, 0));
  bool rms = op.inst.op() == "rms_norm";
  const float *x = ctx.f32(op.inputs[0]), *scale = ctx.f32(op.inputs[1]);
  const float *bias = op.inputs.size() == 3 ? ctx.f32(op.inputs[2]) : nullptr;
  float *y = ctx.f32(op.outputs[0]);
  if (v.rows == 0 || v.cols == 0)
    return noopKernel();
  return KernelFn([=](const StepContext &) {
#pragma omp parallel for schedule(static) if (v.rows * v.cols >=               \
                                              kParallelThreshold)
    for (int64_t r = 0; r < v.rows; ++r)
      normRow(x + r * v.cols, y + r * v.cols, scale, bias, v.cols, v.eps, rms);
    return Status::ok();
  });
}

Status verifyLayerNormGrad(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifyNormCommon(op, 1));
  std::vector<int64_t> xs = op.inShape(1), ps = paramShape(op, 1);
  LOOM_RETURN_IF_ERROR(expectInShape(op, 0, xs, "gradient"));
  LOOM_RETURN_IF_ERROR(expectInShape(op, 2, ps, "scale"));
  LOOM_RETURN_IF_ERROR(expectOutShape(op, 0, xs, "input gradient"));
  LOOM_RETURN_IF_ERROR(expectOutShape(op, 1, ps, "scale gradient"));
  if (op.outputs.size() == 3)
    LOOM_RETURN_IF_ERROR(expectOutShape(op, 2, ps, "bias gradient"));
  return Status::ok();
}

StatusOr<KernelFn> bindLayerNormGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(NormView v, normView(op, 1));
  bool rms = op.inst.op() == "rms_norm_grad";
  const float *dy = ctx.f32(op.inputs[0]), *x = ctx.f32(op.inputs[1]),
              *scale = ctx.f32(op.inputs[2]);
  float *dx = ctx.f32(op.outputs[0]), *dscale = ctx.f32(op.outputs[1]);
  float *dbias = op.outputs.size() == 3 ? ctx.f32(op.outputs[2]) : nullptr;
  Workspace stats = makeWorkspace(2 * v.rows);
  const int64_t block = 128;
  int64_t blocks = (v.cols + block - 1) / block;
  bool big = v.rows * v.cols >= kParallelThreshold;
  return KernelFn([=](const StepContext &) {
    float *mean = stats->data(), *rstd = mean + v.rows;
#pragma omp parallel for schedule(static) if (big)
    for (int64_t r = 0; r < v.rows; ++r)
      normGradRow(x + r * v.cols, dy + r * v.cols, dx + r * v.cols, scale,
                  v.cols, v.eps, rms, mean + r, rstd + r);
#pragma omp parallel for schedule(static) if (big)
    for (int64_t t = 0; t < blocks; ++t) {
      int64_t c0 = t * block, len = std::min(block, v.cols - c0);
      normParamGradBlock(x, dy, mean, rstd, v.rows, v.cols, c0, len, dscale,
                         dbias);
    }
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

namespace {

/// `[n, c, spatial]` view of an `N x C x ...` input.
struct ChannelView {
  int64_t n, c, spatial;
  float eps;
};

StatusOr<ChannelView> channelView(const OpView &op, size_t xIn) {
  std::vector<int64_t> xs = op.inShape(xIn);
  if (xs.size() < 2)
    return makeError("input must be N x C x ..., got %s",
                     shapeToString(xs).c_str());
  LOOM_ASSIGN_OR_RETURN(double eps, op.numAttr("epsilon"));
  return ChannelView{xs[0], xs[1], product(xs, 2, xs.size()),
                     static_cast<float>(eps)};
}

/// Mean and rstd of channel `c`.
RowStats channelStats(const float *x, const ChannelView &v, int64_t c) {
  double sum = 0;
  for (int64_t n = 0; n < v.n; ++n) {
    const float *p = x + (n * v.c + c) * v.spatial;
    for (int64_t s = 0; s < v.spatial; ++s)
      sum += p[s];
  }
  double count = static_cast<double>(v.n) * v.spatial;
  double mean = sum / count, var = 0;
  for (int64_t n = 0; n < v.n; ++n) {
    const float *p = x + (n * v.c + c) * v.spatial;
    for (int64_t s = 0; s < v.spatial; ++s) {
      double d = p[s] - mean;
      var += d * d;
    }
  }
  var /= count;
  return {static_cast<float>(mean),
          static_cast<float>(1.0 / std::sqrt(var + v.eps))};
}

} // namespace

Status verifyBatchNorm(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  LOOM_ASSIGN_OR_RETURN(ChannelView v, channelView(op, 0));
  LOOM_RETURN_IF_ERROR(expectInShape(op, 1, {v.c}, "scale"));
  LOOM_RETURN_IF_ERROR(expectInShape(op, 2, {v.c}, "bias"));
  return expectOutShape(op, 0, op.inShape(0), "output");
}

StatusOr<KernelFn> bindBatchNorm(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(ChannelView v, channelView(op, 0));
  const float *x = ctx.f32(op.inputs[0]), *scale = ctx.f32(op.inputs[1]),
              *bias = ctx.f32(op.inputs[2]);
  float *y = ctx.f32(op.outputs[0]);
  if (v.n * v.spatial == 0)
    return noopKernel();
  bool big = v.n * v.c * v.spatial >= kParallelThreshold;
  return KernelFn([=](const StepContext &) {
#pragma omp parallel for schedule(static) if (big)
    for (int64_t c = 0; c < v.c; ++c) {
      RowStats s = channelStats(x, v, c);
      float a = s.rstd * scale[c], b = bias[c] - s.mean * a;
      for (int64_t n = 0; n < v.n; ++n) {
        const float *px = x + (n * v.c + c) * v.spatial;
        float *py = y + (n * v.c + c) * v.spatial;
        for (int64_t i = 0; i < v.spatial; ++i)
          py[i] = px[i] * a + b;
      }
    }
    return Status::ok();
  });
}

Status verifyBatchNormGrad(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  LOOM_ASSIGN_OR_RETURN(ChannelView v, channelView(op, 1));
  LOOM_RETURN_IF_ERROR(expectInShape(op, 0, op.inShape(1), "gradient"));
  LOOM_RETURN_IF_ERROR(expectInShape(op, 2, {v.c}, "scale"));
  LOOM_RETURN_IF_ERROR(expectOutShape(op, 0, op.inShape(1), "input gradient"));
  LOOM_RETURN_IF_ERROR(expectOutShape(op, 1, {v.c}, "scale gradient"));
  return expectOutShape(op, 2, {v.c}, "bias gradient");
}

StatusOr<KernelFn> bindBatchNormGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(ChannelView v, channelView(op, 1));
  const float *dy = ctx.f32(op.inputs[0]), *x = ctx.f32(op.inputs[1]),
              *scale = ctx.f32(op.inputs[2]);
  float *dx = ctx.f32(op.outputs[0]), *dscale = ctx.f32(op.outputs[1]),
        *dbias = ctx.f32(op.outputs[2]);
  bool big = v.n * v.c * v.spatial >= kParallelThreshold;
  double count = static_cast<double>(v.n) * v.spatial;
  return KernelFn([=](const StepContext &) {
#pragma omp parallel for schedule(static) if (big)
    for (int64_t c = 0; c < v.c; ++c) {
      if (count == 0) {
        dscale[c] = dbias[c] = 0;
        continue;
      }
      RowStats s = channelStats(x, v, c);
      double sumDy = 0, sumDyXhat = 0;
      for (int64_t n = 0; n < v.n; ++n) {
        const float *px = x + (n * v.c + c) * v.spatial;
        const float *pdy = dy + (n * v.c + c) * v.spatial;
        for (int64_t i = 0; i < v.spatial; ++i) {
          sumDy += pdy[i];
          sumDyXhat += pdy[i] * ((px[i] - s.mean) * s.rstd);
        }
      }
      dbias[c] = static_cast<float>(sumDy);
      dscale[c] = static_cast<float>(sumDyXhat);
      // dx = scale rstd (dy - mean(dy) - xhat mean(dy xhat)).
      float k = scale[c] * s.rstd;
      float mDy = static_cast<float>(sumDy / count);
      float mDyX = static_cast<float>(sumDyXhat / count);
      for (int64_t n = 0; n < v.n; ++n) {
        const float *px = x + (n * v.c + c) * v.spatial;
        const float *pdy = dy + (n * v.c + c) * v.spatial;
        float *pdx = dx + (n * v.c + c) * v.spatial;
        for (int64_t i = 0; i < v.spatial; ++i)
          pdx[i] = k * (pdy[i] - mDy - (px[i] - s.mean) * s.rstd * mDyX);
      }
    }
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
