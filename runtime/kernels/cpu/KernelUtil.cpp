//===- KernelUtil.cpp - Helpers shared by the CPU kernels -------*- C++ -*-===//

#include "runtime/kernels/cpu/KernelUtil.h"

#include <cblas.h>

namespace loom::runtime::cpu {

Status expectInShape(const OpView &op, size_t i,
                     const std::vector<int64_t> &shape, const char *what) {
  if (op.inShape(i) != shape)
    return makeError("%s has shape %s, expected %s", what,
                     shapeToString(op.inShape(i)).c_str(),
                     shapeToString(shape).c_str());
  return Status::ok();
}

Status expectOutShape(const OpView &op, size_t i,
                      const std::vector<int64_t> &shape, const char *what) {
  if (op.outShape(i) != shape)
    return makeError("%s has shape %s, expected %s", what,
                     shapeToString(op.outShape(i)).c_str(),
                     shapeToString(shape).c_str());
  return Status::ok();
}

KernelFn noopKernel() {
  return [](const StepContext &) { return Status::ok(); };
}

int maxThreads() { return std::max(1, omp_get_max_threads()); }

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    // BLAS leaves `c` alone for k = 0 only when beta = 1; spell it out.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  // (A process that left OpenBLAS threaded, not calling configureThreads,
  // keeps OpenBLAS's own threading.)
  int threads = maxThreads();
  if (threads > 1 && bigGemm(m, n, k) && !omp_in_parallel() &&
      openblas_get_num_threads() == 1) {
    // One slice of C's rows (or columns, when there are more) per OpenMP
    // thread, each a single-threaded OpenBLAS call: OpenBLAS's own threads
    // would compete for the cores with OpenMP's spinning ones.
    bool byRows = m >= n;
    int64_t len = byRows ? m : n;
    int64_t per = ((len + threads - 1) / threads + 15) / 16 * 16;
#pragma omp parallel num_threads(threads)
    {
      int64_t lo = std::min<int64_t>(len, omp_get_thread_num() * per);
      int64_t hi = std::min<int64_t>(len, lo + per);
      if (lo < hi) {
        if (byRows)
          cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                      tb ? CblasTrans : CblasNoTrans, hi - lo, n, k, alpha,
                      ta ? a + lo : a + lo * lda, lda, b, ldb, beta,
                      c + lo * ldc, ldc);
        else
          cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                      tb ? CblasTrans : CblasNoTrans, m, hi - lo, k, alpha, a,
                      lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
      }
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

} // namespace loom::runtime::cpu
