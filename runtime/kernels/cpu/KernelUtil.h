//===- KernelUtil.h - Helpers shared by the CPU kernels ---------*- C++ -*-===//
//
// Shape checks, per-kernel workspace, element ranges over threads, and GEMMs
// split over OpenMP threads (OpenBLAS itself single-threaded, so thread pools
// do not multiply). The attribute readers and `product` live in the plan
// format library (runtime/OpView.h, support/HostTensor.h), which the
// compiler links too.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_CPU_KERNELUTIL_H
#define LOOM_RUNTIME_KERNELS_CPU_KERNELUTIL_H

#include "runtime/kernels/Kernel.h"
#include "runtime/support/HostTensor.h"
#include "runtime/support/MemoryLedger.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::runtime::cpu {

/// Checks that input `i` has `shape`.
Status expectInShape(const OpView &op, size_t i,
                     const std::vector<int64_t> &shape, const char *what);
/// Checks that output `i` has `shape`.
Status expectOutShape(const OpView &op, size_t i,
                      const std::vector<int64_t> &shape, const char *what);

/// A kernel that does nothing (empty outputs).
KernelFn noopKernel();

/// Kernel workspace: float scratch allocated once at bind time and owned by
/// the prepared call (docs/runtime.md, "Kernel workspace"), counted in the
/// host ledger.
using Workspace = std::shared_ptr<CountedVector<float>>;
inline Workspace makeWorkspace(int64_t floats) {
  return std::make_shared<CountedVector<float>>(
      static_cast<size_t>(std::max<int64_t>(floats, 0)));
}

/// Float scratch a kernel uses only inside one call, shared by the
/// program's instructions (BindContext::sharedScratch): read `floats()` when
/// the kernel runs, not at bind.
class CallScratch {
public:
  CallScratch() = default;
  CallScratch(BindContext &ctx, int slot, int64_t floats)
      : bytes(ctx.sharedScratch(
            slot, std::max<int64_t>(floats, 0) * int64_t(sizeof(float)))) {}
  float *floats() const { return reinterpret_cast<float *>(bytes->data()); }

private:
  std::shared_ptr<CountedVector<uint8_t>> bytes;
};

/// OpenMP threads a kernel may use (LOOM_NUM_THREADS, read at bind time).
int maxThreads();

/// Runs `body(i, slot)` for `i` in `[0, n)`. With `parallel` and more than
/// one slot, iterations run on up to `slots` OpenMP threads (`slot` is the
/// thread number, < `slots`, for per-thread workspace); otherwise in order on
/// slot 0. `sgemm` calls inside a parallel `body` run on the calling thread
/// (OpenBLAS is single-threaded; see `sgemm`).
template <typename F>
void forEachSlot(int64_t n, int slots, bool parallel, F body);

/// Runs `body(lo, hi)` over `[0, n)`: one range of whole cache lines per
/// OpenMP thread when `n >= minParallel` and more than one thread is
/// allowed, else one range on the calling thread. For element-wise loops
/// whose body is an out-of-line vectorised function.
template <typename F>
void forRanges(int64_t n, int64_t minParallel, F body) {
  if (n < minParallel || maxThreads() == 1) {
    if (n > 0)
      body(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    int64_t lo = std::min(n, t * per), hi = std::min(n, lo + per);
    if (lo < hi)
      body(lo, hi);
  }
}

/// Single-precision row-major GEMM: `c = alpha op(a) op(b) + beta c`.
/// OpenBLAS runs single-threaded (support/Threads.cpp); a `bigGemm` called
/// outside an OpenMP parallel region is split into one slice of C's rows
/// (or columns) per OpenMP thread, so there is one thread pool, OpenMP's.
/// (Two pools, OpenBLAS's pthreads and OpenMP's, spin against each other
/// on the same cores: 2 threads ran slower than 1.)
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *c, int64_t ldc);

/// Whether one GEMM is big enough to split over threads (m*n*k >= 2^18);
/// smaller ones run on the calling thread, and callers run batches of them
/// on threads (`forEachSlot`) instead.
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
