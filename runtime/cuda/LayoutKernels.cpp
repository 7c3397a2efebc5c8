//===- LayoutKernels.cpp - Binds of the layout, gather, reduce ops -*- C++
//-*-===//
//
// transpose, expand / broadcast_like, slice / slice_grad, concat, gather /
// gather_grad, select, convert and reduce_*: shapes and attributes are read
// as the CPU kernels read them (runtime/kernels/cpu/Shape.cpp, Gather.cpp,
// Reduce.cpp, Elementwise.cpp) and turned into the index descriptions of
// runtime/cuda/CudaLaunch.h once, at bind. slice_grad of a window of whole
// rows becomes one `launchPadRows` (no separate zeroing).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CopyMerge.h"
#include "runtime/cuda/CudaBind.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/LayoutPlan.h"

#include "runtime/Plan.h"
#include "runtime/kernels/cpu/Broadcast.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace loom::runtime::cuda {

namespace {

/// The same copy the other way round: a dense source scattered through the
/// strides (slice_grad).
CopyIndex swapped(CopyIndex ix) {
  for (int k = 0; k < ix.rank; ++k)
    std::swap(ix.srcStride[k], ix.dstStride[k]);
  return ix;
}

template <typename P> P *advance(P *p, int64_t elements, Elem e) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P *>(reinterpret_cast<Byte *>(p) +
                               elements * elemBytes(e));
}

} // namespace

// --- transpose ---------------------------------------------------------------

StatusOr<KernelFn> bindTranspose(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> perm, op.intsAttr("permutation"));
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  std::vector<int64_t> xs = op.inShape(0);
  int64_t n = numElements(xs);
  if (n == 0)
    return noopKernel();
  LOOM_ASSIGN_OR_RETURN(TransposePlan plan, planTranspose(xs, perm));
  cudaStream_t s = cudaDevice(ctx).stream();
  if (plan.tiled)
    return KernelFn([=](const StepContext &) {
      return launchTranspose2d(x, y, plan.batch, plan.a, plan.b, plan.ldSrc,
                               plan.index, s);
    });
  return KernelFn([=](const StepContext &) {
    return launchStridedCopy(x, y, n, plan.index, s);
  });
}

// --- expand, broadcast_like --------------------------------------------------

StatusOr<KernelFn> bindExpand(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  std::vector<int64_t> ys = op.outShape(0), xs = op.inShape(0);
  int64_t n = numElements(ys);
  if (n == 0)
    return noopKernel();
  std::vector<int64_t> strides = cpu::broadcastStrides(xs, ys);
  std::vector<Dim> dims;
  for (size_t d = 0; d < ys.size(); ++d)
    if (ys[d] != 1)
      dims.push_back({ys[d], strides[d]});
  LOOM_ASSIGN_OR_RETURN(CopyIndex index, gatherIndex(dims));
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    return launchStridedCopy(x, y, n, index, s);
  });
}

// --- slice, slice_grad -------------------------------------------------------

namespace {

/// The slice's window (kernels/cpu/StridedView.h) without its size-1 dims,
/// which the copy index does not need.
StatusOr<cpu::SliceView> sliceView(const OpView &op,
                                   const std::vector<int64_t> &full) {
  LOOM_ASSIGN_OR_RETURN(cpu::SliceView v, cpu::sliceView(op, full));
  std::vector<Dim> kept;
  for (const Dim &d : v.dims)
    if (d.size != 1)
      kept.push_back(d);
  v.dims = std::move(kept);
  return v;
}

} // namespace

StatusOr<KernelFn> bindSlice(const OpView &op, BindContext &ctx) {
  bool grad = op.inst.op() == "slice_grad";
  std::vector<int64_t> full = grad ? op.outShape(0) : op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(cpu::SliceView v, sliceView(op, full));
  LOOM_ASSIGN_OR_RETURN(FloatIn in, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut out, floatOut(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(CopyIndex index, gatherIndex(v.dims));
  int64_t n = numElements(v.sliced), nFull = numElements(full);
  cudaStream_t s = cudaDevice(ctx).stream();
  if (grad && n > 0) {
    // A window of whole rows (the q/k/v split): zeros and window in one pass.
    // The index's destination is dense, so its source strides alone decide
    // which dims merge.
    CopyIndex m = mergedCopyIndex(index);
    int64_t rows = 1, rowLen = nFull, len = 1;
    bool padRows = false;
    if (m.rank == 0 || (m.rank == 1 && m.srcStride[0] == 1)) {
      len = m.rank == 0 ? 1 : m.dims[0];
      padRows = true;
    } else if (m.rank == 2 && m.srcStride[1] == 1) {
      rows = m.dims[0];
      rowLen = m.srcStride[0];
      len = m.dims[1];
      padRows = rows * rowLen == nFull && v.base + len <= rowLen;
    }
    if (padRows) {
      int64_t start = v.base;
      return KernelFn([=](const StepContext &) {
        return launchPadRows(in, out, rows, rowLen, start, len, s);
      });
    }
  }
  if (grad) {
    FloatOut at{advance(out.p, v.base, out.e), out.e};
    CopyIndex scatter = swapped(index);
    return KernelFn([=](const StepContext &) {
      LOOM_RETURN_IF_ERROR(launchZero(out.p, nFull * elemBytes(out.e), s));
      if (n == 0)
        return Status::ok();
      return launchStridedCopy(in, at, n, scatter, s);
    });
  }
  if (n == 0)
    return noopKernel();
  FloatIn at{advance(in.p, v.base, in.e), in.e};
  return KernelFn([=](const StepContext &) {
    return launchStridedCopy(at, out, n, index, s);
  });
}

// --- concat ------------------------------------------------------------------

StatusOr<KernelFn> bindConcat(const OpView &op, BindContext &ctx) {
  std::vector<int64_t> ys = op.outShape(0);
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", ys.size()));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  int64_t outer = product(ys, 0, axis),
          inner = product(ys, axis + 1, ys.size());
  int64_t rowLen = ys[axis] * inner;
  // One strided copy per input: [outer, len] rows into the output's rows.
  struct Part {
    FloatIn src;
    FloatOut dst;
    int64_t n;
    CopyIndex index;
  };
  std::vector<Part> parts;
  int64_t off = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, i));
    int64_t len = op.inShape(i)[axis] * inner;
    Part p{x, {advance(y.p, off, y.e), y.e}, outer * len, {}};
    p.index.rank = 2;
    p.index.dims[0] = outer;
    p.index.dims[1] = len;
    p.index.srcStride[0] = len;
    p.index.srcStride[1] = 1;
    p.index.dstStride[0] = rowLen;
    p.index.dstStride[1] = 1;
    off += len;
    if (p.n > 0)
      parts.push_back(p);
  }
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    for (const Part &p : parts)
      LOOM_RETURN_IF_ERROR(launchStridedCopy(p.src, p.dst, p.n, p.index, s));
    return Status::ok();
  });
}

// --- gather, gather_grad -----------------------------------------------------

namespace {

StatusOr<GatherDims> gatherDims(const OpView &op,
                                const std::vector<int64_t> &full) {
  if (full.empty())
    return makeError("data must have rank >= 1");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", full.size()));
  LOOM_RETURN_IF_ERROR(expectDType(op, false, 1, plan::I64));
  return GatherDims{product(full, 0, axis), full[axis],
                    product(full, axis + 1, full.size()), op.inNumel(1)};
}

/// The CPU kernel's message (runtime/kernels/cpu/Gather.cpp).
constexpr const char *kIndexCheck =
    "index %2$lld out of range [0, %3$lld) at position %1$lld of the indices";

} // namespace

StatusOr<KernelFn> bindGather(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(GatherDims g, gatherDims(op, op.inShape(0)));
  LOOM_ASSIGN_OR_RETURN(FloatIn data, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  const int64_t *idx = ctx.i64(op.inputs[1]);
  CudaDevice &dev = cudaDevice(ctx);
  int check = dev.registerCheck(checkContext(op), kIndexCheck);
  DataCheckRecord *record = dev.checkRecord();
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchGather(data, idx, y, g, check, record, s);
  });
}

StatusOr<KernelFn> bindGatherGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(GatherDims g, gatherDims(op, op.outShape(0)));
  LOOM_ASSIGN_OR_RETURN(FloatIn dy, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut dx, floatOut(op, ctx, 0));
  const int64_t *idx = ctx.i64(op.inputs[1]);
  CudaDevice &dev = cudaDevice(ctx);
  LOOM_ASSIGN_OR_RETURN(int64_t wsBytes, gatherGradWorkspace(g));
  LOOM_ASSIGN_OR_RETURN(DeviceBuffer ws,
                        dev.allocateWorkspace(std::max<int64_t>(wsBytes, 1)));
  int check = dev.registerCheck(checkContext(op), kIndexCheck);
  DataCheckRecord *record = dev.checkRecord();
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchGatherGrad(dy, idx, dx, g, ws.get(), wsBytes, check, record,
                            s);
  });
}

/// `full` (the data, or the gradient's target) as `[outer, dim, inner]`; the
/// CPU verifier checked the indices' shape.
StatusOr<ElementsDims> elementsDims(const OpView &op,
                                    const std::vector<int64_t> &full) {
  if (full.empty())
    return makeError("data must have rank >= 1");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", full.size()));
  LOOM_RETURN_IF_ERROR(expectDType(op, false, 1, plan::I64));
  return ElementsDims{product(full, 0, axis), full[axis],
                      op.inShape(1)[axis],
                      product(full, axis + 1, full.size())};
}

StatusOr<KernelFn> bindGatherElements(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(ElementsDims g, elementsDims(op, op.inShape(0)));
  LOOM_ASSIGN_OR_RETURN(FloatIn data, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  const int64_t *idx = ctx.i64(op.inputs[1]);
  CudaDevice &dev = cudaDevice(ctx);
  int check = dev.registerCheck(checkContext(op), kIndexCheck);
  DataCheckRecord *record = dev.checkRecord();
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchGatherElements(data, idx, y, g, check, record, s);
  });
}

StatusOr<KernelFn> bindGatherElementsGrad(const OpView &op,
                                          BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(ElementsDims g, elementsDims(op, op.outShape(0)));
  LOOM_ASSIGN_OR_RETURN(FloatIn dy, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut dx, floatOut(op, ctx, 0));
  const int64_t *idx = ctx.i64(op.inputs[1]);
  CudaDevice &dev = cudaDevice(ctx);
  int check = dev.registerCheck(checkContext(op), kIndexCheck);
  DataCheckRecord *record = dev.checkRecord();
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchGatherElementsGrad(dy, idx, dx, g, check, record, s);
  });
}

/// `full` (the data) read by the op's `[..., k]` indices; the CPU verifier
/// checked the shapes.
StatusOr<NdDims> ndDims(const OpView &op, const std::vector<int64_t> &full) {
  std::vector<int64_t> idx = op.inShape(1);
  LOOM_RETURN_IF_ERROR(expectDType(op, false, 1, plan::I64));
  if (idx.empty() || idx.back() < 1 ||
      idx.back() > static_cast<int64_t>(full.size()) || idx.back() > kMaxDims)
    return makeError("indices %s do not name slices of %s on CUDA",
                     shapeToString(idx).c_str(), shapeToString(full).c_str());
  NdDims g;
  g.k = static_cast<int>(idx.back());
  g.rows = product(idx, 0, idx.size() - 1);
  g.slice = product(full, g.k, full.size());
  for (int j = 0; j < g.k; ++j)
    g.dims[j] = full[j];
  return g;
}

/// The CPU kernel's message (runtime/kernels/cpu/ScatterNd.cpp).
constexpr const char *kNdIndexCheck =
    "index %2$lld out of range [0, %3$lld) at position %1$lld of the indices";

StatusOr<KernelFn> bindScatterNd(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(NdDims g, ndDims(op, op.inShape(0)));
  LOOM_ASSIGN_OR_RETURN(std::string reduction, op.strAttr("reduction", "none"));
  int mode = reduction == "none" ? 0 : reduction == "add" ? 1 : 2;
  LOOM_ASSIGN_OR_RETURN(FloatIn data, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn updates, floatIn(op, ctx, 2));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  const int64_t *idx = ctx.i64(op.inputs[1]);
  int64_t n = op.outNumel(0);
  CudaDevice &dev = cudaDevice(ctx);
  int check = dev.registerCheck(checkContext(op), kNdIndexCheck);
  DataCheckRecord *record = dev.checkRecord();
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchScatterNd(data, idx, updates, y, n, g, mode, check, record,
                           s);
  });
}

StatusOr<KernelFn> bindGatherNd(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(NdDims g, ndDims(op, op.inShape(0)));
  LOOM_ASSIGN_OR_RETURN(FloatIn data, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  const int64_t *idx = ctx.i64(op.inputs[1]);
  CudaDevice &dev = cudaDevice(ctx);
  int check = dev.registerCheck(checkContext(op), kNdIndexCheck);
  DataCheckRecord *record = dev.checkRecord();
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchGatherNd(data, idx, y, g, check, record, s);
  });
}

// --- select, convert ---------------------------------------------------------

StatusOr<KernelFn> bindSelect(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(FloatIn cond, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn a, floatIn(op, ctx, 1));
  LOOM_ASSIGN_OR_RETURN(FloatIn b, floatIn(op, ctx, 2));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  std::vector<int64_t> ys = op.outShape(0);
  int64_t n = numElements(ys);
  if (n == 0)
    return noopKernel();
  if (ys.size() > static_cast<size_t>(kMaxDims))
    return tooManyDims(ys);
  SelectIndex index;
  index.rank = static_cast<int>(ys.size());
  std::vector<int64_t> sc = cpu::broadcastStrides(op.inShape(0), ys),
                       sa = cpu::broadcastStrides(op.inShape(1), ys),
                       sb = cpu::broadcastStrides(op.inShape(2), ys);
  for (size_t d = 0; d < ys.size(); ++d) {
    index.dims[d] = ys[d];
    index.strideCond[d] = sc[d];
    index.strideA[d] = sa[d];
    index.strideB[d] = sb[d];
  }
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    return launchSelect(cond, a, b, y, n, index, s);
  });
}

StatusOr<KernelFn> bindConvert(const OpView &op, BindContext &ctx) {
  // i64, f32 or bf16 in; f32 or bf16 out (dtypes from the buffers); or f32
  // holding integers in, i64 out.
  if (op.outputs[0]->dtype() == plan::I64) {
    LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
    int64_t *y = ctx.i64(op.outputs[0]);
    int64_t n = op.outNumel(0);
    cudaStream_t s = cudaDevice(ctx).stream();
    return KernelFn(
        [=](const StepContext &) { return launchConvertToI64(x, y, n, s); });
  }
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  const int64_t *xI64 = nullptr;
  FloatIn x;
  if (op.inputs[0]->dtype() == plan::I64) {
    xI64 = ctx.i64(op.inputs[0]);
  } else {
    LOOM_ASSIGN_OR_RETURN(x, floatIn(op, ctx, 0));
  }
  if (op.inNumel(0) != op.outNumel(0))
    return makeError("convert of %lld elements into %lld",
                     (long long)op.inNumel(0), (long long)op.outNumel(0));
  int64_t n = op.outNumel(0);
  cudaStream_t s = cudaDevice(ctx).stream();
  if (!xI64 && x.e == y.e) // same storage: a copy
    return KernelFn([=](const StepContext &) {
      return cudaCheck(cudaMemcpyAsync(y.p, x.p, n * elemBytes(y.e),
                                       cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpyAsync (convert)");
    });
  return KernelFn(
      [=](const StepContext &) { return launchConvert(xI64, x, y, n, s); });
}

// --- reduce_sum, reduce_mean, reduce_max -------------------------------------

StatusOr<KernelFn> bindReduce(const OpView &op, BindContext &ctx) {
  const std::string &name = op.inst.op();
  ReduceKind kind = name == "reduce_sum"    ? ReduceKind::Sum
                    : name == "reduce_mean" ? ReduceKind::Mean
                                            : ReduceKind::Max;
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  std::vector<int64_t> xs = op.inShape(0);
  int64_t nx = numElements(xs), ny = op.outNumel(0);
  cudaStream_t s = cudaDevice(ctx).stream();
  if (ny == 0)
    return noopKernel();
  if (nx == 0) { // sum of nothing is 0, the mean NaN (as in PyTorch)
    float v = kind == ReduceKind::Mean ? std::numeric_limits<float>::quiet_NaN()
                                       : 0.0f;
    return KernelFn(
        [=](const StepContext &) { return launchFill(y, ny, v, s); });
  }
  std::vector<bool> reduced(xs.size(), false);
  for (int64_t a : axes)
    if (a >= 0 && a < static_cast<int64_t>(xs.size()))
      reduced[a] = true;
  LOOM_ASSIGN_OR_RETURN(SumToIndex index, reductionIndex(xs, reduced));
  LOOM_ASSIGN_OR_RETURN(DeviceBuffer ws, reduceWorkspace(ctx, ny, index));
  return KernelFn([=](const StepContext &) {
    return launchReduce(kind, x, y, ny, index, static_cast<float *>(ws.get()),
                        s);
  });
}

} // namespace loom::runtime::cuda
