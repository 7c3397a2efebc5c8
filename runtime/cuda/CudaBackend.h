//===- CudaBackend.h - The CUDA backend's entry points ------------*- C++
//-*-===//
//
// What code outside `LoomRuntimeCuda` may call. No CUDA header is included,
// so the driver can use it under `#if LOOM_HAVE_CUDA` without CUDA's include
// paths.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDABACKEND_H
#define LOOM_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Device.h"
#include "runtime/comm/Communicator.h"

#include <memory>

namespace loom::runtime::cuda {

/// Number of CUDA devices this process sees; 0 when there is none or no
/// driver (never an error, so tests can skip).
int deviceCount();

/// The device this process uses: the node-local rank (Open MPI's
/// `OMPI_COMM_WORLD_LOCAL_RANK`, Slurm's `SLURM_LOCALID`, MPICH's
/// `MPI_LOCALRANKID`, torchrun's `LOCAL_RANK`; 0 without a launcher) modulo
/// the device count. Creates its stream, cuBLASLt handle and workspace.
StatusOr<std::unique_ptr<Device>> createCudaDevice();

/// An NCCL communicator over the ranks of `host` (collective over `host`,
/// which must outlive it): rank 0 creates the unique id and broadcasts it
/// over `host`. Collectives run on `device`'s stream on device pointers;
/// `allReduceMin`, `barrier` and `broadcast` go through `host`. Splits
/// split `host` and create NCCL communicators the same way. A world of one
/// rank creates no NCCL communicator.
StatusOr<std::unique_ptr<Communicator>> createNcclWorld(Communicator &host,
                                                        Device &device);

/// A communicator over the ranks of `host` (which must outlive it) whose
/// collectives take device pointers, as NCCL's do, but run through `host`:
/// copied to pinned host memory on `device`'s stream, the stream drained,
/// `host`'s collective, copied back on the stream. Ranks may share a GPU.
/// Splits split `host`. Not collective.
StatusOr<std::unique_ptr<Communicator>>
createHostStagedWorld(Communicator &host, Device &device);

/// How many distinct GPUs the ranks of `host` use, by the UUID of each
/// rank's `device` (collective over `host`, reached by every rank even when
/// it fails on one): fewer than `host.size()` when ranks share a GPU, which
/// NCCL refuses.
StatusOr<int> countDistinctDevices(Communicator &host, Device &device);

/// Whether NCCL's library answers (`ncclGetVersion`).
bool ncclAvailable();

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_CUDABACKEND_H
