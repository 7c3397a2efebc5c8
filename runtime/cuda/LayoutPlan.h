//===- LayoutPlan.h - Index descriptions of the layout kernels ----*- C++
//-*-===//
//
// Internal to `LoomRuntimeCuda`: how a transpose (and the strided copies
// of the other layout ops) turns into the `CopyIndex` of
// runtime/cuda/CudaLaunch.h. Header-only and free of CUDA calls, so the
// host emulation tests (test/unit/cuda/CudaEmulation*Test.cpp) run the same
// planning as the binds.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_LAYOUTPLAN_H
#define LOOM_RUNTIME_CUDA_LAYOUTPLAN_H

#include "runtime/cuda/CudaLaunch.h"
#include "runtime/kernels/cpu/StridedView.h"
#include "runtime/support/HostTensor.h"

#include <vector>

namespace loom::runtime::cuda {

/// A dim of a strided view: its size and its stride in the source.
using Dim = cpu::StridedDim;
using cpu::denseStrides;

/// A copy whose destination is dense over `dims` (sizes with source
/// strides).
inline StatusOr<CopyIndex> gatherIndex(const std::vector<Dim> &dims) {
  if (dims.size() > static_cast<size_t>(kMaxDims)) {
    std::vector<int64_t> shape;
    for (const Dim &d : dims)
      shape.push_back(d.size);
    return makeError("the CUDA backend handles at most %d dims here, got %s",
                     kMaxDims, shapeToString(shape).c_str());
  }
  CopyIndex ix;
  ix.rank = static_cast<int>(dims.size());
  int64_t stride = 1;
  for (int k = ix.rank - 1; k >= 0; --k) {
    ix.dims[k] = dims[k].size;
    ix.srcStride[k] = dims[k].stride;
    ix.dstStride[k] = stride;
    stride *= dims[k].size;
  }
  return ix;
}

/// A transpose as `launchTranspose2d` (`tiled`: `index` enumerates the
/// batch entries, each an `a x b` tile job with source row stride `ldSrc`)
/// or as one `launchStridedCopy` over `index`.
struct TransposePlan {
  bool tiled = false;
  CopyIndex index;
  int64_t batch = 1, a = 0, b = 0, ldSrc = 0;
};

/// Output dims of `x` (shape `xs`) permuted by `perm` with their input
/// strides, size-1 dims dropped and runs that stay adjacent merged (as the
/// CPU kernel). When the innermost input dim becomes the second-innermost
/// output dim, the last two output dims go through shared-memory tiles;
/// otherwise the innermost output dim is contiguous in the input (both
/// sides coalesce) or the copy is a plain gather.
inline StatusOr<TransposePlan> planTranspose(const std::vector<int64_t> &xs,
                                             const std::vector<int64_t> &perm) {
  std::vector<Dim> dims = cpu::transposeDims(xs, perm);
  TransposePlan plan;
  size_t r = dims.size();
  if (r >= 2 && dims[r - 2].stride == 1) {
    plan.tiled = true;
    plan.a = dims[r - 2].size;
    plan.b = dims[r - 1].size;
    plan.ldSrc = dims[r - 1].stride;
    plan.batch = numElements(xs) / (plan.a * plan.b);
    dims.resize(r - 2);
  }
  LOOM_ASSIGN_OR_RETURN(plan.index, gatherIndex(dims));
  return plan;
}

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_LAYOUTPLAN_H
