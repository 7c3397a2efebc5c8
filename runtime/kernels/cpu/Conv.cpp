//===- Conv.cpp - conv2d and its input / filter gradients -------*- C++ -*-===//
//
// im2col + GEMM, per image and group. The column buffer `[C/g * kh * kw,
// OH * OW]` is kernel workspace allocated once at bind time (one per thread
// slot); a 1x1 convolution with unit stride and no padding uses the image
// itself as the column matrix. Small images (runtime/ConvLayout.h) run one
// product for the batch instead: every image's columns side by side in
// `[K, N * OH * OW]`, and the output (or its gradient) gathered from or
// scattered to NCHW through a `[O, N * OH * OW]` buffer. Images whose GEMMs are
// small run on OpenMP threads (each GEMM on its thread); big ones run in order,
// `sgemm` splitting each GEMM over the threads and OpenMP splitting
// im2col/col2im over channels.
//
//   conv2d:             y_g  = W_g * col(x_g)
//   conv2d_grad_input:  dx_g = col2im(W_g^T * dy_g)
//   conv2d_grad_filter: dW_g = sum over images of dy_g * col(x_g)^T
//
//===----------------------------------------------------------------------===//

#include "runtime/ConvLayout.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cstring>

namespace loom::runtime::cpu {

namespace {

struct ConvGeom {
  int64_t n, c, h, w; // input
  int64_t o, kh, kw;  // filter [o, c/groups, kh, kw]
  int64_t oh, ow;     // output
  int64_t sh, sw, pt, pl, dh, dw, groups;
  int64_t cg, og, k, p; // per group: channels, filters, K, OH*OW

  bool direct() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 &&
           oh == h && ow == w;
  }
};

/// Output extent of a window, or -1 when it does not fit.
int64_t windowOut(int64_t size, int64_t k, int64_t s, int64_t d, int64_t lo,
                  int64_t hi) {
  int64_t span = d * (k - 1) + 1, padded = size + lo + hi;
  if (padded < span)
    return -1;
  return (padded - span) / s + 1;
}

/// Reads the geometry from `x` (NCHW), `w` (OIHW) and the attributes, and
/// checks `y` against it.
StatusOr<ConvGeom> convGeom(const OpView &op, const std::vector<int64_t> &x,
                            const std::vector<int64_t> &w,
                            const std::vector<int64_t> &y) {
  if (x.size() != 4 || w.size() != 4)
    return makeError("needs an NCHW input and an OIHW filter, got %s and %s",
                     shapeToString(x).c_str(), shapeToString(w).c_str());
  LOOM_ASSIGN_OR_RETURN(auto strides, intsAttrOfSize(op, "strides", 2));
  LOOM_ASSIGN_OR_RETURN(auto pads, intsAttrOfSize(op, "pads", 4));
  LOOM_ASSIGN_OR_RETURN(auto dil, intsAttrOfSize(op, "dilations", 2));
  LOOM_ASSIGN_OR_RETURN(int64_t groups, intAttr(op, "groups"));
  for (int64_t v : strides)
    if (v < 1)
      return makeError("strides must be positive");
  for (int64_t v : dil)
    if (v < 1)
      return makeError("dilations must be positive");
  for (int64_t v : pads)
    if (v < 0)
      return makeError("pads must be non-negative");
  if (groups < 1 || x[1] % groups || w[0] % groups || w[1] * groups != x[1])
    return makeError("input channels %lld do not match filter %s with %lld "
                     "group(s)",
                     (long long)x[1], shapeToString(w).c_str(),
                     (long long)groups);
  ConvGeom g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.sh = strides[0], g.sw = strides[1], g.pt = pads[0], g.pl = pads[1];
  g.dh = dil[0], g.dw = dil[1], g.groups = groups;
  g.oh = windowOut(g.h, g.kh, g.sh, g.dh, pads[0], pads[2]);
  g.ow = windowOut(g.w, g.kw, g.sw, g.dw, pads[1], pads[3]);
  if (g.oh < 0 || g.ow < 0 || g.kh < 1 || g.kw < 1)
    return makeError("the %lldx%lld window does not fit the padded %lldx%lld "
                     "input",
                     (long long)g.kh, (long long)g.kw, (long long)g.h,
                     (long long)g.w);
  g.cg = g.c / groups, g.og = g.o / groups;
  g.k = g.cg * g.kh * g.kw, g.p = g.oh * g.ow;
  std::vector<int64_t> want = {g.n, g.o, g.oh, g.ow};
  if (y != want)
    return makeError("output gradient or output has shape %s, expected %s",
                     shapeToString(y).c_str(), shapeToString(want).c_str());
  return g;
}

/// The `[lo, hi)` range of output positions whose input position
/// `o * s + off` lies in `[0, size)`.
inline void validRange(int64_t off, int64_t s, int64_t size, int64_t outs,
                       int64_t &lo, int64_t &hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = size - off <= 0 ? 0 : (size - off + s - 1) / s;
  lo = std::min(lo, outs);
  hi = std::clamp(hi, lo, outs);
}

/// `col[K, P]` (rows `ld` floats apart) from one group of one image, `x`
/// `[cg, h, w]`.
void im2col(const ConvGeom &g, const float *x, float *col, int64_t ld,
            bool threads) {
#pragma omp parallel for schedule(static) if (threads)
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        float *row = col + ((c * g.kh + i) * g.kw + j) * ld;
        int64_t offW = j * g.dw - g.pl, lo, hi;
        validRange(offW, g.sw, g.w, g.ow, lo, hi);
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          float *out = row + oy * g.ow;
          int64_t iy = oy * g.sh - g.pt + i * g.dh;
          if (iy < 0 || iy >= g.h) {
            std::memset(out, 0, g.ow * sizeof(float));
            continue;
          }
          const float *in = x + (c * g.h + iy) * g.w + offW;
          for (int64_t ox = 0; ox < lo; ++ox)
            out[ox] = 0;
          if (g.sw == 1)
            std::memcpy(out + lo, in + lo, (hi - lo) * sizeof(float));
          else
            for (int64_t ox = lo; ox < hi; ++ox)
              out[ox] = in[ox * g.sw];
          for (int64_t ox = hi; ox < g.ow; ++ox)
            out[ox] = 0;
        }
      }
}

/// Adds `col[K, P]` (rows `ld` floats apart) back into one group of one
/// image, `x` `[cg, h, w]`.
void col2im(const ConvGeom &g, const float *col, float *x, int64_t ld,
            bool threads) {
  // Channels own disjoint planes of `x`, so they can run on threads.
#pragma omp parallel for schedule(static) if (threads)
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float *row = col + ((c * g.kh + i) * g.kw + j) * ld;
        int64_t offW = j * g.dw - g.pl, lo, hi;
        validRange(offW, g.sw, g.w, g.ow, lo, hi);
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          int64_t iy = oy * g.sh - g.pt + i * g.dh;
          if (iy < 0 || iy >= g.h)
            continue;
          const float *in = row + oy * g.ow;
          float *out = x + (c * g.h + iy) * g.w + offW;
          for (int64_t ox = lo; ox < hi; ++ox)
            out[ox * g.sw] += in[ox];
        }
      }
}

/// How images are spread over threads, and the column workspace.
struct ConvPlan {
  int slots;
  bool parallel;     // images on threads
  bool innerThreads; // im2col / col2im on threads (images in order)
  CallScratch cols;  // slots x K x P, empty for direct convolutions
};

/// `m, n, k`: the per-image GEMM.
ConvPlan planConv(const ConvGeom &g, int64_t m, int64_t n, int64_t k,
                  BindContext &ctx) {
  int threads = maxThreads();
  ConvPlan p;
  p.parallel = threads > 1 && g.n > 1 && !bigGemm(m, n, k) &&
               g.n * g.groups * m * n * k >= kParallelThreshold;
  p.slots = p.parallel ? static_cast<int>(std::min<int64_t>(threads, g.n)) : 1;
  p.innerThreads =
      !p.parallel && threads > 1 && g.k * g.p >= kParallelThreshold;
  p.cols = CallScratch(ctx, 0, g.direct() ? 0 : p.slots * g.k * g.p);
  return p;
}

/// The stacked layout of a convolution of small images: its columns
/// `[K, N * P]` and its output-shaped `[O, N * P]`, in the shared scratch.
struct Stacked {
  bool on = false;
  int64_t ld = 0; // N * P
  CallScratch cols, out;
};

Stacked planStacked(const ConvGeom &g, BindContext &ctx) {
  Stacked st;
  st.on = convStacksImages(g.n, g.groups, g.p);
  if (st.on) {
    st.ld = g.n * g.p;
    st.cols = CallScratch(ctx, 0, g.k * st.ld);
    st.out = CallScratch(ctx, 1, g.o * st.ld);
  }
  return st;
}

/// NCHW `y` `[N, O, P]` as `[O, N * P]`.
void stackImages(const ConvGeom &g, const float *y, float *stacked) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      std::memcpy(stacked + o * g.n * g.p + n * g.p, y + (n * g.o + o) * g.p,
                  g.p * sizeof(float));
}

/// `[O, N * P]` back as NCHW `y` `[N, O, P]`.
void unstackImages(const ConvGeom &g, const float *stacked, float *y) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      std::memcpy(y + (n * g.o + o) * g.p, stacked + o * g.n * g.p + n * g.p,
                  g.p * sizeof(float));
}

/// Every image's columns side by side in `cols` `[K, N * P]`.
void stackColumns(const ConvGeom &g, const float *x, float *cols) {
  for (int64_t n = 0; n < g.n; ++n)
    im2col(g, x + n * g.c * g.h * g.w, cols + n * g.p, g.n * g.p, false);
}

} // namespace

Status verifyConv2d(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  const std::string &name = op.inst.op();
  if (name == "conv2d")
    return convGeom(op, op.inShape(0), op.inShape(1), op.outShape(0)).status();
  if (name == "conv2d_grad_input")
    return convGeom(op, op.outShape(0), op.inShape(1), op.inShape(0)).status();
  return convGeom(op, op.inShape(1), op.outShape(0), op.inShape(0)).status();
}

StatusOr<KernelFn> bindConv2d(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(
      ConvGeom g, convGeom(op, op.inShape(0), op.inShape(1), op.outShape(0)));
  const float *x = ctx.f32(op.inputs[0]), *w = ctx.f32(op.inputs[1]);
  float *y = ctx.f32(op.outputs[0]);
  if (g.n * g.o * g.p == 0)
    return noopKernel();
  if (Stacked st = planStacked(g, ctx); st.on)
    return KernelFn([=](const StepContext &) {
      stackColumns(g, x, st.cols.floats());
      sgemm(false, false, g.o, st.ld, g.k, 1.0f, w, g.k, st.cols.floats(),
            st.ld, 0.0f, st.out.floats(), st.ld);
      unstackImages(g, st.out.floats(), y);
      return Status::ok();
    });
  ConvPlan plan = planConv(g, g.og, g.p, g.k, ctx);
  return KernelFn([=](const StepContext &) {
    forEachSlot(g.n, plan.slots, plan.parallel, [&](int64_t n, int slot) {
      // A direct (1x1) convolution has no columns: no offset on null.
      float *col = g.direct() ? nullptr : plan.cols.floats() + slot * g.k * g.p;
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        const float *xg = x + (n * g.c + gr * g.cg) * g.h * g.w;
        if (!g.direct())
          im2col(g, xg, col, g.p, plan.innerThreads);
        sgemm(false, false, g.og, g.p, g.k, 1.0f, w + gr * g.og * g.k, g.k,
              g.direct() ? xg : col, g.p, 0.0f, y + (n * g.o + gr * g.og) * g.p,
              g.p);
      }
    });
    return Status::ok();
  });
}

StatusOr<KernelFn> bindConv2dGradInput(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(
      ConvGeom g, convGeom(op, op.outShape(0), op.inShape(1), op.inShape(0)));
  const float *dy = ctx.f32(op.inputs[0]), *w = ctx.f32(op.inputs[1]);
  float *dx = ctx.f32(op.outputs[0]);
  int64_t image = g.c * g.h * g.w;
  if (Stacked st = planStacked(g, ctx); st.on)
    return KernelFn([=](const StepContext &) {
      stackImages(g, dy, st.out.floats());
      sgemm(true, false, g.k, st.ld, g.o, 1.0f, w, g.k, st.out.floats(), st.ld,
            0.0f, st.cols.floats(), st.ld);
      std::memset(dx, 0, g.n * image * sizeof(float));
      for (int64_t n = 0; n < g.n; ++n)
        col2im(g, st.cols.floats() + n * g.p, dx + n * image, st.ld, false);
      return Status::ok();
    });
  ConvPlan plan = planConv(g, g.k, g.p, g.og, ctx);
  return KernelFn([=](const StepContext &) {
    forEachSlot(g.n, plan.slots, plan.parallel, [&](int64_t n, int slot) {
      // A direct (1x1) convolution has no columns: no offset on null.
      float *col = g.direct() ? nullptr : plan.cols.floats() + slot * g.k * g.p;
      if (!g.direct())
        std::memset(dx + n * image, 0, image * sizeof(float));
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        float *dxg = dx + (n * g.c + gr * g.cg) * g.h * g.w;
        sgemm(true, false, g.k, g.p, g.og, 1.0f, w + gr * g.og * g.k, g.k,
              dy + (n * g.o + gr * g.og) * g.p, g.p, 0.0f,
              g.direct() ? dxg : col, g.p);
        if (!g.direct())
          col2im(g, col, dxg, g.p, plan.innerThreads);
      }
    });
    return Status::ok();
  });
}

StatusOr<KernelFn> bindConv2dGradFilter(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(
      ConvGeom g, convGeom(op, op.inShape(1), op.outShape(0), op.inShape(0)));
  const float *dy = ctx.f32(op.inputs[0]), *x = ctx.f32(op.inputs[1]);
  float *dw = ctx.f32(op.outputs[0]);
  int64_t wSize = g.o * g.k;
  if (Stacked st = planStacked(g, ctx); st.on)
    return KernelFn([=](const StepContext &) {
      stackColumns(g, x, st.cols.floats());
      stackImages(g, dy, st.out.floats());
      sgemm(false, true, g.o, g.k, st.ld, 1.0f, st.out.floats(), st.ld,
            st.cols.floats(), st.ld, 0.0f, dw, g.k);
      return Status::ok();
    });
  ConvPlan plan = planConv(g, g.og, g.k, g.p, ctx);
  // Each thread slot but the first sums its images into its own copy of
  // the filter gradient; the copies are added up at the end.
  Workspace partial = makeWorkspace((plan.slots - 1) * wSize);
  return KernelFn([=](const StepContext &) {
    std::memset(dw, 0, wSize * sizeof(float));
    if (plan.slots > 1)
      std::memset(partial->data(), 0, partial->size() * sizeof(float));
    forEachSlot(g.n, plan.slots, plan.parallel, [&](int64_t n, int slot) {
      // A direct (1x1) convolution has no columns: no offset on null.
      float *col = g.direct() ? nullptr : plan.cols.floats() + slot * g.k * g.p;
      float *acc = slot == 0 ? dw : partial->data() + (slot - 1) * wSize;
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        const float *xg = x + (n * g.c + gr * g.cg) * g.h * g.w;
        if (!g.direct())
          im2col(g, xg, col, g.p, plan.innerThreads);
        sgemm(false, true, g.og, g.k, g.p, 1.0f,
              dy + (n * g.o + gr * g.og) * g.p, g.p, g.direct() ? xg : col, g.p,
              1.0f, acc + gr * g.og * g.k, g.k);
      }
    });
    for (int s = 1; s < plan.slots; ++s) {
      const float *src = partial->data() + (s - 1) * wSize;
      for (int64_t i = 0; i < wSize; ++i)
        dw[i] += src[i];
    }
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
