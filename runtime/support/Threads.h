//===- Threads.h - Threads per rank for OpenMP and OpenBLAS -------*- C++ -*-===//

#ifndef LOOM_RUNTIME_SUPPORT_THREADS_H
#define LOOM_RUNTIME_SUPPORT_THREADS_H

namespace loom::runtime {

/// Sets the OpenMP thread count of this process to `LOOM_NUM_THREADS`
/// (default 1: several MPI ranks usually share the cores) and OpenBLAS to
/// one thread (the kernels split big GEMMs over the OpenMP threads; see
/// kernels/cpu/KernelUtil.h), and returns the count used.
int configureThreads();

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_THREADS_H
