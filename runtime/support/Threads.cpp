//===- Threads.cpp - Threads per rank for OpenMP and OpenBLAS ----*- C++ -*-===//

#include "runtime/support/Threads.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>

namespace loom::runtime {

int requestedThreads() {
  int threads = 1;
  if (const char *env = std::getenv("LOOM_NUM_THREADS")) {
    char *end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1 && v <= 1024)
      threads = static_cast<int>(v);
  }
  return threads;
}

void setThreadsOfThisThread(int threads) { omp_set_num_threads(threads); }

int configureThreads() {
  int threads = requestedThreads();
  omp_set_num_threads(threads);
  // OpenBLAS stays on the calling thread; kernels split big GEMMs over the
  // OpenMP threads themselves (kernels/cpu/KernelUtil.h, `sgemm`).
  openblas_set_num_threads(1);
  return threads;
}

} // namespace loom::runtime
