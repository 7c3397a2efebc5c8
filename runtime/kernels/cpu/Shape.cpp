//===- Shape.cpp - transpose, expand, slice, concat -------------*- C++ -*-===//
//
// Layout ops copy rows: each computes, per output row, where its elements
// live in the input (hoisted strides) and copies with memcpy when the
// innermost dimension is contiguous. `transpose` merges dimensions that stay
// adjacent and copies in 32x32 tiles when the innermost one moves.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/Broadcast.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/kernels/cpu/StridedView.h"

#include <algorithm>
#include <cstring>

namespace loom::runtime::cpu {

namespace {

using Dim = StridedDim; // stride in the other buffer's elements

/// Offset of row `row` (an index over all of `dims` but the last).
int64_t rowOffsetOf(int64_t row, const std::vector<Dim> &dims) {
  int64_t off = 0;
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) {
    off += (row % dims[d].size) * dims[d].stride;
    row /= dims[d].size;
  }
  return off;
}

/// Copies `y[row-major over dims] = x[offsets]` (`dims` strides index `x`).
/// With `scatter`, writes `x[offsets] = y[...]` instead (y is the source).
void stridedCopy(const std::vector<Dim> &dims, int64_t n, float *dense,
                 float *strided, bool scatter) {
  if (n == 0)
    return;
  if (dims.empty()) {
    if (scatter)
      strided[0] = dense[0];
    else
      dense[0] = strided[0];
    return;
  }
  int64_t inner = dims.back().size, is = dims.back().stride;
  int64_t rows = n / inner;
  // Rows in order from `r0`, the strided offset kept by an odometer over
  // the outer dims (no divisions per row).
  auto copyRows = [&](int64_t r0, int64_t r1) {
    int nd = static_cast<int>(dims.size()) - 1;
    constexpr int kMaxDims = 16; // merged dims; more fall back to division
    int64_t idx[kMaxDims] = {};
    bool odometer = nd <= kMaxDims;
    if (!odometer)
      nd = 0;
    int64_t rem = r0;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = rem % dims[d].size;
      rem /= dims[d].size;
    }
    int64_t off = rowOffsetOf(r0, dims);
    for (int64_t r = r0; r < r1; ++r) {
      float *d = dense + r * inner;
      float *st = strided + (odometer ? off : rowOffsetOf(r, dims));
      if (is == 1 && inner >= 64) {
        if (scatter)
          std::memcpy(st, d, inner * sizeof(float));
        else
          std::memcpy(d, st, inner * sizeof(float));
      } else if (scatter) {
        for (int64_t i = 0; i < inner; ++i)
          st[i * is] = d[i];
      } else {
        for (int64_t i = 0; i < inner; ++i)
          d[i] = st[i * is];
      }
      for (int dd = nd - 1; dd >= 0; --dd) {
        off += dims[dd].stride;
        if (++idx[dd] < dims[dd].size)
          break;
        off -= dims[dd].stride * dims[dd].size;
        idx[dd] = 0;
      }
    }
  };
  if (n < kParallelThreshold || maxThreads() == 1) {
    copyRows(0, rows);
    return;
  }
#pragma omp parallel
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t per = (rows + nt - 1) / nt;
    int64_t r0 = std::min(rows, t * per), r1 = std::min(rows, r0 + per);
    if (r0 < r1)
      copyRows(r0, r1);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

Status verifyTranspose(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  std::vector<int64_t> xs = op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                        intsAttrOfSize(op, "permutation", xs.size()));
  std::vector<bool> seen(xs.size(), false);
  std::vector<int64_t> want;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(xs.size()) || seen[p])
      return makeError("permutation %s is not a permutation of [0, %zu)",
                       shapeToString(perm).c_str(), xs.size());
    seen[p] = true;
    want.push_back(xs[p]);
  }
  return expectOutShape(op, 0, want, "output");
}

StatusOr<KernelFn> bindTranspose(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> perm, op.intsAttr("permutation"));
  std::vector<int64_t> xs = op.inShape(0);
  float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = numElements(xs);
  std::vector<Dim> dims = transposeDims(xs, perm);
  if (n == 0)
    return noopKernel();
  if (dims.size() <= 1 || dims.back().stride == 1)
    return KernelFn([=](const StepContext &) {
      stridedCopy(dims, n, y, x, false);
      return Status::ok();
    });
  // The innermost output dim moves: copy 32x32 tiles of the last two dims.
  const int64_t tile = 32;
  Dim a = dims[dims.size() - 2], b = dims.back();
  std::vector<Dim> outer(dims.begin(), dims.end() - 2);
  outer.push_back({1, 0}); // rowOffsetOf ignores the last entry
  int64_t outerCount = n / (a.size * b.size);
  int64_t aTiles = (a.size + tile - 1) / tile;
  return KernelFn([=](const StepContext &) {
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t t = 0; t < outerCount * aTiles; ++t) {
      int64_t o = t / aTiles, a0 = (t % aTiles) * tile;
      int64_t a1 = std::min(a.size, a0 + tile);
      const float *src = x + rowOffsetOf(o, outer);
      float *dst = y + o * a.size * b.size;
      for (int64_t b0 = 0; b0 < b.size; b0 += tile) {
        int64_t b1 = std::min(b.size, b0 + tile);
        for (int64_t i = a0; i < a1; ++i)
          for (int64_t j = b0; j < b1; ++j)
            dst[i * b.size + j] = src[i * a.stride + j * b.stride];
      }
    }
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// expand, broadcast_like
//===----------------------------------------------------------------------===//

Status verifyExpand(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  if (!broadcastsTo(op.inShape(0), op.outShape(0)))
    return makeError("input shape %s does not broadcast to the output shape "
                     "%s",
                     shapeToString(op.inShape(0)).c_str(),
                     shapeToString(op.outShape(0)).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindExpand(const OpView &op, BindContext &ctx) {
  float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  std::vector<int64_t> ys = op.outShape(0), xs = op.inShape(0);
  int64_t n = numElements(ys);
  if (n == 0)
    return noopKernel();
  std::vector<int64_t> strides = broadcastStrides(xs, ys);
  std::vector<Dim> dims;
  for (size_t d = 0; d < ys.size(); ++d)
    dims.push_back({ys[d], strides[d]});
  if (numElements(xs) == 1)
    return KernelFn([=](const StepContext &) {
      float v = x[0];
      std::fill(y, y + n, v);
      return Status::ok();
    });
  return KernelFn([=](const StepContext &) {
    stridedCopy(dims, n, y, x, false);
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// slice, slice_grad
//===----------------------------------------------------------------------===//

Status verifySlice(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  bool grad = op.inst.op() == "slice_grad";
  std::vector<int64_t> full = grad ? op.outShape(0) : op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(SliceView v, sliceView(op, full));
  if (grad)
    return expectInShape(op, 0, v.sliced, "gradient");
  return expectOutShape(op, 0, v.sliced, "output");
}

StatusOr<KernelFn> bindSlice(const OpView &op, BindContext &ctx) {
  bool grad = op.inst.op() == "slice_grad";
  std::vector<int64_t> full = grad ? op.outShape(0) : op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(SliceView v, sliceView(op, full));
  std::vector<Dim> dims = v.dims;
  int64_t base = v.base;
  float *in = ctx.f32(op.inputs[0]);
  float *out = ctx.f32(op.outputs[0]);
  int64_t n = numElements(v.sliced), nFull = numElements(full);
  if (grad)
    return KernelFn([=](const StepContext &) {
      std::memset(out, 0, nFull * sizeof(float));
      stridedCopy(dims, n, in, out + base, true);
      return Status::ok();
    });
  return KernelFn([=](const StepContext &) {
    stridedCopy(dims, n, out, in + base, false);
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// concat
//===----------------------------------------------------------------------===//

Status verifyConcat(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  std::vector<int64_t> first = op.inShape(0);
  if (first.empty())
    return makeError("inputs must have rank >= 1");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", first.size()));
  std::vector<int64_t> want = first;
  want[axis] = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    std::vector<int64_t> s = op.inShape(i);
    bool ok = s.size() == first.size();
    for (size_t d = 0; ok && d < s.size(); ++d)
      ok = static_cast<int64_t>(d) == axis || s[d] == first[d];
    if (!ok)
      return makeError("input %zu has shape %s, which differs from input 0's "
                       "%s outside axis %lld",
                       i, shapeToString(s).c_str(),
                       shapeToString(first).c_str(), (long long)axis);
    want[axis] += s[axis];
  }
  return expectOutShape(op, 0, want, "output");
}

StatusOr<KernelFn> bindConcat(const OpView &op, BindContext &ctx) {
  std::vector<int64_t> ys = op.outShape(0);
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", ys.size()));
  int64_t outer = product(ys, 0, axis),
          inner = product(ys, axis + 1, ys.size());
  int64_t rowLen = ys[axis] * inner, n = numElements(ys);
  std::vector<const float *> srcs;
  std::vector<int64_t> lens, offs;
  int64_t off = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    srcs.push_back(ctx.f32(op.inputs[i]));
    lens.push_back(op.inShape(i)[axis] * inner);
    offs.push_back(off);
    off += lens.back();
  }
  float *y = ctx.f32(op.outputs[0]);
  if (n == 0)
    return noopKernel();
  return KernelFn([=](const StepContext &) {
    size_t parts = srcs.size();
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < parts; ++i)
        std::memcpy(y + o * rowLen + offs[i], srcs[i] + o * lens[i],
                    lens[i] * sizeof(float));
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
