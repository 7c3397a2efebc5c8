//===- NcclCommunicator.cpp - Communicator over NCCL -------------*- C++
//-*-===//

#include "runtime/comm/NcclCommunicator.h"

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaDevice.h"

#include <cstring>

namespace loom::runtime::cuda {

StatusOr<std::unique_ptr<Communicator>>
NcclCommunicator::create(Communicator &host,
                         std::unique_ptr<Communicator> owned,
                         cudaStream_t stream) {
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(host, std::move(owned), stream));
  if (c->host.size() == 1)
    return std::unique_ptr<Communicator>(std::move(c));
  // Rank 0's outcome travels with the id, so a failure there cannot leave
  // the other ranks waiting in ncclCommInitRank.
  struct {
    int ok;
    ncclUniqueId id;
  } boot;
  std::memset(&boot, 0, sizeof(boot));
  Status made = Status::ok();
  if (c->host.rank() == 0) {
    made = ncclCheck(ncclGetUniqueId(&boot.id), "ncclGetUniqueId");
    boot.ok = made.isOk() ? 1 : 0;
  }
  LOOM_RETURN_IF_ERROR(c->host.broadcast(&boot, sizeof(boot), 0));
  LOOM_RETURN_IF_ERROR(made);
  if (!boot.ok)
    return makeError("ncclGetUniqueId failed on rank 0");
  LOOM_RETURN_IF_ERROR(ncclCheck(
      ncclCommInitRank(&c->comm, c->host.size(), boot.id, c->host.rank()),
      "ncclCommInitRank"));
  return std::unique_ptr<Communicator>(std::move(c));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm) {
    cudaStreamSynchronize(stream);
    ncclCommDestroy(comm);
  }
}

Status NcclCommunicator::allReduceSum(float *deviceData, int64_t count) {
  if (!comm || count == 0)
    return Status::ok();
  return ncclCheck(ncclAllReduce(deviceData, deviceData,
                                 static_cast<size_t>(count), ncclFloat32,
                                 ncclSum, comm, stream),
                   "ncclAllReduce");
}

StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::split(int color,
                                                                int key) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                        host.split(color, key));
  Communicator &subRef = *sub;
  return create(subRef, std::move(sub), stream);
}

StatusOr<std::unique_ptr<Communicator>> createNcclWorld(Communicator &host,
                                                        Device &device) {
  auto &cudaDev = static_cast<CudaDevice &>(device);
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaSetDevice(cudaDev.ordinal()), "cudaSetDevice"));
  return NcclCommunicator::create(host, nullptr, cudaDev.stream());
}

} // namespace loom::runtime::cuda
