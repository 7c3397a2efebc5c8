//===- CudaStatus.h - CUDA, cuBLAS and NCCL errors as Status ------*- C++
//-*-===//
//
// Every call into the CUDA runtime, cuBLAS(Lt) or NCCL goes through one of
// these wrappers, so a failure becomes a one-line `Status` carrying the
// library's own message and the call that failed:
//   LOOM_RETURN_IF_ERROR(cudaCheck(cudaMalloc(&p, n), "cudaMalloc"));
//   -> "cudaMalloc failed: out of memory (cudaErrorMemoryAllocation)"
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDASTATUS_H
#define LOOM_RUNTIME_CUDA_CUDASTATUS_H

#include "runtime/support/Status.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace loom::runtime::cuda {

inline Status cudaCheck(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return Status::ok();
  return makeError("%s failed: %s (%s)", what, cudaGetErrorString(err),
                   cudaGetErrorName(err));
}

inline Status cublasCheck(cublasStatus_t st, const char *what) {
  if (st == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return makeError("%s failed: %s (%s)", what, cublasLtGetStatusString(st),
                   cublasLtGetStatusName(st));
}

inline Status ncclCheck(ncclResult_t res, const char *what) {
  if (res == ncclSuccess)
    return Status::ok();
  // ncclGetLastError holds the detail (which peer, which transport) when
  // NCCL recorded one.
  const char *detail = ncclGetLastError(nullptr);
  return makeError("%s failed: %s%s%s", what, ncclGetErrorString(res),
                   detail && *detail ? ": " : "", detail ? detail : "");
}

/// The error of the last kernel launch on this thread (launch configuration,
/// missing kernel image); execution errors surface at the next synchronize.
inline Status launchCheck(const char *kernel) {
  return cudaCheck(cudaGetLastError(), kernel);
}

/// A one-rank collective: `bytes` from `send` to `recv` on `stream` (nothing
/// when they are the same place).
inline Status copyOwnBlock(const void *send, void *recv, int64_t bytes,
                           cudaStream_t stream) {
  if (send == recv || bytes == 0)
    return Status::ok();
  return cudaCheck(cudaMemcpyAsync(recv, send, static_cast<size_t>(bytes),
                                   cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync (one-rank collective)");
}

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_CUDASTATUS_H
