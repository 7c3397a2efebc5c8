//===- StridedView.h - Strided views of the layout ops ----------*- C++ -*-===//
//
// How a slice or a transpose reads its source, as sizes and source strides:
// plain host code shared by the CPU kernels (kernels/cpu/Shape.cpp) and the
// CUDA backend's binds (runtime/cuda/LayoutKernels.cpp, LayoutPlan.h), so
// both backends accept the same attributes and walk the same elements.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_CPU_STRIDEDVIEW_H
#define LOOM_RUNTIME_KERNELS_CPU_STRIDEDVIEW_H

#include "runtime/kernels/Kernel.h"

#include <cstdint>
#include <vector>

namespace loom::runtime::cpu {

/// A dim of a strided view: its size and its stride in the source buffer's
/// elements.
struct StridedDim {
  int64_t size, stride;
};

/// Row-major strides of a dense `shape`.
std::vector<int64_t> denseStrides(const std::vector<int64_t> &shape);

/// Where a `slice` window of `full` lives: the sliced shape, one dim per
/// dim of `full` with `full`'s stride times the step, and the offset of the
/// first element.
struct SliceView {
  std::vector<int64_t> sliced;
  std::vector<StridedDim> dims;
  int64_t base = 0;
};

/// The window of a `slice` / `slice_grad` instruction (attributes `axes`,
/// `starts`, `ends`, `steps`; starts and ends clamped to the dim) over
/// `full`, or an error for inconsistent attributes.
StatusOr<SliceView> sliceView(const OpView &op,
                              const std::vector<int64_t> &full);

/// The output dims of a transpose of a dense `xs` by `perm`, each with its
/// input stride; size-1 dims dropped and runs that stay adjacent in the
/// input merged (`perm` must be a permutation of the dims).
std::vector<StridedDim> transposeDims(const std::vector<int64_t> &xs,
                                      const std::vector<int64_t> &perm);

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_STRIDEDVIEW_H
