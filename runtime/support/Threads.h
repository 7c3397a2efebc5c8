//===- Threads.h - Threads per rank for OpenMP and OpenBLAS -------*- C++ -*-===//

#ifndef LOOM_RUNTIME_SUPPORT_THREADS_H
#define LOOM_RUNTIME_SUPPORT_THREADS_H

namespace loom::runtime {

/// Sets the OpenMP thread count of this process to `LOOM_NUM_THREADS`
/// (default 1: several MPI ranks usually share the cores) and OpenBLAS to
/// one thread (the kernels split big GEMMs over the OpenMP threads; see
/// kernels/cpu/KernelUtil.h), and returns the count used.
int configureThreads();

/// The OpenMP threads of the calling thread only (a rank that is a thread
/// of the process, runtime/comm/ThreadCommunicator.h); OpenMP gives other
/// threads the process default.
void setThreadsOfThisThread(int threads);

/// `LOOM_NUM_THREADS`, or 1.
int requestedThreads();

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_THREADS_H
