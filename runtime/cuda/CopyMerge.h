//===- CopyMerge.h - Merging the dims of a strided copy ---------*- C++ -*-===//
//
// Internal to `LoomRuntimeCuda`: the one merge step of a `CopyIndex`
// (runtime/cuda/CudaLaunch.h), shared by the chunked copy's planning
// (Layout.cu) and slice_grad's bind (LayoutKernels.cpp). Header-only and
// free of CUDA calls, so the host emulation tests run it too.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_COPYMERGE_H
#define LOOM_RUNTIME_CUDA_COPYMERGE_H

#include "runtime/cuda/CudaLaunch.h"

namespace loom::runtime::cuda {

/// `index` with its size-1 dims dropped and each dim merged into the one
/// outside it where the two stay adjacent on both sides (outer stride =
/// inner stride x inner size); rank 0 when every dim has size 1.
inline CopyIndex mergedCopyIndex(const CopyIndex &index) {
  CopyIndex m;
  int r = 0;
  for (int k = 0; k < index.rank; ++k) {
    if (index.dims[k] == 1)
      continue;
    if (r > 0 && m.srcStride[r - 1] == index.srcStride[k] * index.dims[k] &&
        m.dstStride[r - 1] == index.dstStride[k] * index.dims[k]) {
      m.dims[r - 1] *= index.dims[k];
      m.srcStride[r - 1] = index.srcStride[k];
      m.dstStride[r - 1] = index.dstStride[k];
      continue;
    }
    m.dims[r] = index.dims[k];
    m.srcStride[r] = index.srcStride[k];
    m.dstStride[r] = index.dstStride[k];
    ++r;
  }
  m.rank = r;
  return m;
}

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_COPYMERGE_H
