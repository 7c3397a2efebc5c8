//===- Gather.cpp - gather and gather_grad (ONNX Gather) --------*- C++ -*-===//
//
// Both views their operands as `[pre, axis, post]` and move rows of `post`
// elements. Indices are data, so they are checked every step before any
// write: an index outside `[-dim, dim)` fails the step with a Status
// (negative indices count from the end).
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cstring>

namespace loom::runtime::cpu {

namespace {

/// Shapes of a gather: `full` is the data (gather) or the gradient's target
/// (gather_grad), `rows` the indices, `taken` the gathered tensor.
struct GatherShape {
  int64_t axis, pre, dim, post, count;
  std::vector<int64_t> taken;
};

StatusOr<GatherShape> describeGather(const OpView &op,
                                     const std::vector<int64_t> &full) {
  if (full.empty())
    return makeError("data must have rank >= 1");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", full.size()));
  std::vector<int64_t> idx = op.inShape(1);
  GatherShape g{axis,
                product(full, 0, axis),
                full[axis],
                product(full, axis + 1, full.size()),
                numElements(idx),
                {}};
  g.taken.assign(full.begin(), full.begin() + axis);
  g.taken.insert(g.taken.end(), idx.begin(), idx.end());
  g.taken.insert(g.taken.end(), full.begin() + axis + 1, full.end());
  return g;
}

Status checkGatherTypes(const OpView &op, int dataIn) {
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  if (op.inputs[dataIn]->dtype() != plan::F32)
    return makeError("input %d is %s, expected f32", dataIn,
                     dtypeName(op.inputs[dataIn]->dtype()));
  if (op.inputs[1]->dtype() != plan::I64)
    return makeError("indices are %s, expected i64",
                     dtypeName(op.inputs[1]->dtype()));
  if (op.outputs[0]->dtype() != plan::F32)
    return makeError("output is %s, expected f32",
                     dtypeName(op.outputs[0]->dtype()));
  return Status::ok();
}

/// Resolves negative indices into `out`; fails on the first out-of-range one.
Status resolveIndices(const int64_t *idx, int64_t count, int64_t dim,
                      int64_t *out) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = idx[i] < 0 ? idx[i] + dim : idx[i];
    if (v < 0 || v >= dim)
      return makeError("index %lld out of range [0, %lld) at position %lld "
                       "of the indices",
                       (long long)idx[i], (long long)dim, (long long)i);
    out[i] = v;
  }
  return Status::ok();
}

using IndexWorkspace = std::shared_ptr<CountedVector<int64_t>>;

/// Shapes of a gather_elements: `full` (the data, or the gradient's target)
/// viewed as `[outer, dim, inner]`, the indices as `[outer, count, inner]`.
struct ElementsShape {
  int64_t outer, dim, count, inner;
  std::vector<int64_t> indices;
};

StatusOr<ElementsShape> describeElements(const OpView &op,
                                         const std::vector<int64_t> &full) {
  if (full.empty())
    return makeError("data must have rank >= 1");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", full.size()));
  std::vector<int64_t> idx = op.inShape(1);
  bool same = idx.size() == full.size();
  for (size_t d = 0; same && d < full.size(); ++d)
    same = static_cast<int64_t>(d) == axis || idx[d] == full[d];
  if (!same)
    return makeError("indices %s do not index %s outside axis %lld",
                     shapeToString(idx).c_str(), shapeToString(full).c_str(),
                     (long long)axis);
  return ElementsShape{product(full, 0, axis), full[axis], idx[axis],
                       product(full, axis + 1, full.size()), idx};
}

} // namespace

Status verifyGather(const OpView &op) {
  LOOM_RETURN_IF_ERROR(checkGatherTypes(op, 0));
  LOOM_ASSIGN_OR_RETURN(GatherShape g, describeGather(op, op.inShape(0)));
  return expectOutShape(op, 0, g.taken, "output");
}

StatusOr<KernelFn> bindGather(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(GatherShape g, describeGather(op, op.inShape(0)));
  const float *data = ctx.f32(op.inputs[0]);
  const int64_t *idx = ctx.i64(op.inputs[1]);
  float *y = ctx.f32(op.outputs[0]);
  IndexWorkspace rows = std::make_shared<CountedVector<int64_t>>(g.count);
  int64_t n = g.pre * g.count * g.post;
  return KernelFn([=](const StepContext &) {
    int64_t *r = rows->data();
    LOOM_RETURN_IF_ERROR(resolveIndices(idx, g.count, g.dim, r));
    if (n == 0)
      return Status::ok();
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t t = 0; t < g.pre * g.count; ++t) {
      int64_t p = t / g.count, i = t % g.count;
      std::memcpy(y + t * g.post, data + (p * g.dim + r[i]) * g.post,
                  g.post * sizeof(float));
    }
    return Status::ok();
  });
}

Status verifyGatherGrad(const OpView &op) {
  LOOM_RETURN_IF_ERROR(checkGatherTypes(op, 0));
  LOOM_ASSIGN_OR_RETURN(GatherShape g, describeGather(op, op.outShape(0)));
  return expectInShape(op, 0, g.taken, "gradient");
}

StatusOr<KernelFn> bindGatherGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(GatherShape g, describeGather(op, op.outShape(0)));
  const float *dy = ctx.f32(op.inputs[0]);
  const int64_t *idx = ctx.i64(op.inputs[1]);
  float *dx = ctx.f32(op.outputs[0]);
  IndexWorkspace rows = std::make_shared<CountedVector<int64_t>>(g.count);
  int64_t nx = g.pre * g.dim * g.post, ny = g.pre * g.count * g.post;
  // Tasks own disjoint (pre, column block) strips of dx, so duplicate
  // indices accumulate without races.
  const int64_t block = 256;
  int64_t blocks = (g.post + block - 1) / block;
  return KernelFn([=](const StepContext &) {
    int64_t *r = rows->data();
    LOOM_RETURN_IF_ERROR(resolveIndices(idx, g.count, g.dim, r));
    std::memset(dx, 0, nx * sizeof(float));
#pragma omp parallel for schedule(static) if (ny >= kParallelThreshold)
    for (int64_t t = 0; t < g.pre * blocks; ++t) {
      int64_t p = t / blocks, c0 = (t % blocks) * block;
      int64_t len = std::min(block, g.post - c0);
      for (int64_t i = 0; i < g.count; ++i) {
        const float *src = dy + (p * g.count + i) * g.post + c0;
        float *dst = dx + (p * g.dim + r[i]) * g.post + c0;
        for (int64_t c = 0; c < len; ++c)
          dst[c] += src[c];
      }
    }
    return Status::ok();
  });
}

// `y[o, j, i] = data[o, idx[o, j, i], i]`; the gradient adds `dy[o, j, i]`
// into `dx[o, idx[o, j, i], i]`, each (o, i) column in the order of j, so
// repeated indices sum in one order whatever the threads.

Status verifyGatherElements(const OpView &op) {
  LOOM_RETURN_IF_ERROR(checkGatherTypes(op, 0));
  LOOM_ASSIGN_OR_RETURN(ElementsShape g, describeElements(op, op.inShape(0)));
  return expectOutShape(op, 0, g.indices, "output");
}

StatusOr<KernelFn> bindGatherElements(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(ElementsShape g, describeElements(op, op.inShape(0)));
  const float *data = ctx.f32(op.inputs[0]);
  const int64_t *idx = ctx.i64(op.inputs[1]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = g.outer * g.count * g.inner;
  IndexWorkspace rows = std::make_shared<CountedVector<int64_t>>(n);
  return KernelFn([=](const StepContext &) {
    int64_t *r = rows->data();
    LOOM_RETURN_IF_ERROR(resolveIndices(idx, n, g.dim, r));
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t t = 0; t < n; ++t) {
      int64_t o = t / (g.count * g.inner), i = t % g.inner;
      y[t] = data[(o * g.dim + r[t]) * g.inner + i];
    }
    return Status::ok();
  });
}

Status verifyGatherElementsGrad(const OpView &op) {
  LOOM_RETURN_IF_ERROR(checkGatherTypes(op, 0));
  LOOM_ASSIGN_OR_RETURN(ElementsShape g,
                        describeElements(op, op.outShape(0)));
  return expectInShape(op, 0, g.indices, "gradient");
}

StatusOr<KernelFn> bindGatherElementsGrad(const OpView &op,
                                          BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(ElementsShape g,
                        describeElements(op, op.outShape(0)));
  const float *dy = ctx.f32(op.inputs[0]);
  const int64_t *idx = ctx.i64(op.inputs[1]);
  float *dx = ctx.f32(op.outputs[0]);
  int64_t n = g.outer * g.count * g.inner, nx = g.outer * g.dim * g.inner;
  IndexWorkspace rows = std::make_shared<CountedVector<int64_t>>(n);
  return KernelFn([=](const StepContext &) {
    int64_t *r = rows->data();
    LOOM_RETURN_IF_ERROR(resolveIndices(idx, n, g.dim, r));
    std::memset(dx, 0, nx * sizeof(float));
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t c = 0; c < g.outer * g.inner; ++c) {
      int64_t o = c / g.inner, i = c % g.inner;
      for (int64_t j = 0; j < g.count; ++j) {
        int64_t t = (o * g.count + j) * g.inner + i;
        dx[(o * g.dim + r[t]) * g.inner + i] += dy[t];
      }
    }
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
