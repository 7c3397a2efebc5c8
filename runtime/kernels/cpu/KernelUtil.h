//===- KernelUtil.h - Helpers shared by the CPU kernels ---------*- C++ -*-===//
//
// Attribute readers with the plan emitter's conventions (unit attributes are
// `i = 1` when set and absent otherwise), shape products, per-kernel
// workspace, and the rule that keeps OpenMP and OpenBLAS threads from
// multiplying.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_CPU_KERNELUTIL_H
#define LOOM_RUNTIME_KERNELS_CPU_KERNELUTIL_H

#include "runtime/kernels/Kernel.h"
#include "runtime/support/HostTensor.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::runtime::cpu {

/// Product of `shape[from, to)`.
inline int64_t product(const std::vector<int64_t> &shape, size_t from,
                       size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i)
    p *= shape[i];
  return p;
}

/// A unit attribute: absent means false; present must be 0 or 1.
StatusOr<bool> flagAttr(const OpView &op, const char *name);
/// An integer attribute (an `i`, or an `f` holding an integer).
StatusOr<int64_t> intAttr(const OpView &op, const char *name);
/// A normalised axis attribute in `[0, rank)` (negative counts from the end).
StatusOr<int64_t> axisAttr(const OpView &op, const char *name, int64_t rank);
/// An `ints` attribute of exactly `size` entries.
StatusOr<std::vector<int64_t>> intsAttrOfSize(const OpView &op,
                                              const char *name, size_t size);

/// Checks that input `i` has `shape`.
Status expectInShape(const OpView &op, size_t i,
                     const std::vector<int64_t> &shape, const char *what);
/// Checks that output `i` has `shape`.
Status expectOutShape(const OpView &op, size_t i,
                      const std::vector<int64_t> &shape, const char *what);

/// A kernel that does nothing (empty outputs).
KernelFn noopKernel();

/// Kernel workspace: float scratch allocated once at bind time and owned by
/// the prepared call (docs/runtime.md, "Kernel workspace").
using Workspace = std::shared_ptr<std::vector<float>>;
inline Workspace makeWorkspace(int64_t floats) {
  return std::make_shared<std::vector<float>>(
      static_cast<size_t>(std::max<int64_t>(floats, 0)));
}

/// OpenMP threads a kernel may use (LOOM_NUM_THREADS, read at bind time).
int maxThreads();

/// Runs `body(i, slot)` for `i` in `[0, n)`. With `parallel` and more than
/// one slot, iterations run on up to `slots` OpenMP threads (`slot` is the
/// thread number, < `slots`, for per-thread workspace); otherwise in order on
/// slot 0. BLAS calls inside a parallel `body` must be small (`!bigGemm`):
/// OpenBLAS runs those on the calling thread, so threads do not multiply.
/// (Switching OpenBLAS to one thread per call instead costs milliseconds
/// with the pthreads build.)
template <typename F>
void forEachSlot(int64_t n, int slots, bool parallel, F body);

/// Single-precision row-major GEMM: `c = alpha op(a) op(b) + beta c`.
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *c, int64_t ldc);

/// Whether one GEMM of this size is big enough for OpenBLAS to thread it:
/// OpenBLAS keeps GEMMs with m*n*k <= 65536 * GEMM_MULTITHREAD_THRESHOLD (4)
/// on the calling thread. Batches of big GEMMs run one after the other.
inline bool bigGemm(int64_t m, int64_t n, int64_t k) {
  return m * n * k >= (int64_t(1) << 18);
}

template <typename F>
void forEachSlot(int64_t n, int slots, bool parallel, F body) {
  if (!parallel || slots <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i)
      body(i, 0);
    return;
  }
#pragma omp parallel num_threads(slots)
  {
    int slot = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      body(i, slot);
  }
}

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_KERNELUTIL_H
