//===- ScatterNd.cpp - scatter_nd and gather_nd (ONNX ScatterND) -*- C++ -*-===//
//
// Both read `indices` as rows of `k` indices, each naming the slice
// `data[i0, ..., ik-1]` of `slice` elements (data's dimensions from k on);
// rows are checked every step before any write (negative indices count from
// the end). scatter_nd copies `data` and then applies the rows in order, so
// repeated rows replace (none) or accumulate (add, mul) deterministically.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cstring>

namespace loom::runtime::cpu {

namespace {

/// `data` of shape `full` read by `[rows..., k]` indices.
struct NdShape {
  int64_t k, rows, slice;
  std::vector<int64_t> dims;   // data's first k dimensions
  std::vector<int64_t> slices; // indices.shape[:-1] + full[k:]
};

StatusOr<NdShape> describeNd(const OpView &op,
                             const std::vector<int64_t> &full) {
  std::vector<int64_t> idx = op.inShape(1);
  if (op.inputs[1]->dtype() != plan::I64)
    return makeError("indices are %s, expected i64",
                     dtypeName(op.inputs[1]->dtype()));
  if (idx.empty() || idx.back() < 1 ||
      idx.back() > static_cast<int64_t>(full.size()))
    return makeError("indices %s do not name slices of %s",
                     shapeToString(idx).c_str(), shapeToString(full).c_str());
  NdShape s;
  s.k = idx.back();
  s.rows = product(idx, 0, idx.size() - 1);
  s.slice = product(full, s.k, full.size());
  s.dims.assign(full.begin(), full.begin() + s.k);
  s.slices.assign(idx.begin(), idx.end() - 1);
  s.slices.insert(s.slices.end(), full.begin() + s.k, full.end());
  return s;
}

/// Each row's first element in `data` into `out`; fails on the first index
/// out of range.
Status rowOffsets(const int64_t *idx, const NdShape &s, int64_t *out) {
  for (int64_t r = 0; r < s.rows; ++r) {
    int64_t off = 0;
    for (int64_t j = 0; j < s.k; ++j) {
      int64_t raw = idx[r * s.k + j], dim = s.dims[j];
      int64_t v = raw < 0 ? raw + dim : raw;
      if (v < 0 || v >= dim)
        return makeError("index %lld out of range [0, %lld) at position "
                         "%lld of the indices",
                         (long long)raw, (long long)dim,
                         (long long)(r * s.k + j));
      off = off * dim + v;
    }
    out[r] = off * s.slice;
  }
  return Status::ok();
}

using OffsetWorkspace = std::shared_ptr<CountedVector<int64_t>>;

Status checkFloats(const OpView &op, std::initializer_list<int> inputs) {
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  for (int i : inputs)
    if (op.inputs[i]->dtype() != plan::F32)
      return makeError("input %d is %s, expected f32", i,
                       dtypeName(op.inputs[i]->dtype()));
  if (op.outputs[0]->dtype() != plan::F32)
    return makeError("output is %s, expected f32",
                     dtypeName(op.outputs[0]->dtype()));
  return Status::ok();
}

} // namespace

Status verifyScatterNd(const OpView &op) {
  LOOM_RETURN_IF_ERROR(checkFloats(op, {0, 2}));
  LOOM_ASSIGN_OR_RETURN(NdShape s, describeNd(op, op.inShape(0)));
  LOOM_ASSIGN_OR_RETURN(std::string reduction, op.strAttr("reduction", "none"));
  if (reduction != "none" && reduction != "add" && reduction != "mul")
    return makeError("reduction '%s' is not one of none, add, mul",
                     reduction.c_str());
  LOOM_RETURN_IF_ERROR(expectInShape(op, 2, s.slices, "updates"));
  return expectOutShape(op, 0, op.inShape(0), "output");
}

StatusOr<KernelFn> bindScatterNd(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(NdShape s, describeNd(op, op.inShape(0)));
  LOOM_ASSIGN_OR_RETURN(std::string reduction, op.strAttr("reduction", "none"));
  const float *data = ctx.f32(op.inputs[0]);
  const int64_t *idx = ctx.i64(op.inputs[1]);
  const float *upd = ctx.f32(op.inputs[2]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  int mode = reduction == "none" ? 0 : reduction == "add" ? 1 : 2;
  OffsetWorkspace offsets = std::make_shared<CountedVector<int64_t>>(s.rows);
  return KernelFn([=](const StepContext &) {
    int64_t *off = offsets->data();
    LOOM_RETURN_IF_ERROR(rowOffsets(idx, s, off));
    if (n > 0)
      std::memcpy(y, data, n * sizeof(float));
    for (int64_t r = 0; r < s.rows; ++r) {
      float *dst = y + off[r];
      const float *src = upd + r * s.slice;
      if (mode == 0)
        std::memcpy(dst, src, s.slice * sizeof(float));
      else if (mode == 1)
        for (int64_t e = 0; e < s.slice; ++e)
          dst[e] += src[e];
      else
        for (int64_t e = 0; e < s.slice; ++e)
          dst[e] *= src[e];
    }
    return Status::ok();
  });
}

Status verifyGatherNd(const OpView &op) {
  LOOM_RETURN_IF_ERROR(checkFloats(op, {0}));
  LOOM_ASSIGN_OR_RETURN(NdShape s, describeNd(op, op.inShape(0)));
  return expectOutShape(op, 0, s.slices, "output");
}

StatusOr<KernelFn> bindGatherNd(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(NdShape s, describeNd(op, op.inShape(0)));
  const float *data = ctx.f32(op.inputs[0]);
  const int64_t *idx = ctx.i64(op.inputs[1]);
  float *y = ctx.f32(op.outputs[0]);
  OffsetWorkspace offsets = std::make_shared<CountedVector<int64_t>>(s.rows);
  return KernelFn([=](const StepContext &) {
    int64_t *off = offsets->data();
    LOOM_RETURN_IF_ERROR(rowOffsets(idx, s, off));
    for (int64_t r = 0; r < s.rows; ++r)
      if (s.slice > 0)
        std::memcpy(y + r * s.slice, data + off[r], s.slice * sizeof(float));
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
