//===- HostStagedCommunicator.cpp - Device collectives via MPI --*- C++ -*-===//

#include "runtime/comm/HostStagedCommunicator.h"

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/support/MemoryLedger.h"

#include <vector>

namespace loom::runtime::cuda {

HostStagedCommunicator::~HostStagedCommunicator() {
  if (staging) {
    // The last copy out of staging may still be in flight.
    cudaStreamSynchronize(stream);
    cudaFreeHost(staging);
    MemoryLedger::host().remove(capacity);
  }
}

Status HostStagedCommunicator::reserve(int64_t bytes) {
  if (bytes <= capacity)
    return Status::ok();
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaStreamSynchronize(stream),
                                 "cudaStreamSynchronize (host staging)"));
  if (staging) {
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaFreeHost(staging), "cudaFreeHost (host staging)"));
    MemoryLedger::host().remove(capacity);
    staging = nullptr;
    capacity = 0;
  }
  void *p = nullptr;
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaMallocHost(&p, static_cast<size_t>(bytes)),
                                 "cudaMallocHost (host staging)"));
  staging = static_cast<char *>(p);
  capacity = bytes;
  MemoryLedger::host().add(bytes);
  return Status::ok();
}

Status HostStagedCommunicator::stageIn(const void *src, int64_t at,
                                       int64_t bytes) {
  if (bytes > 0)
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaMemcpyAsync(staging + at, src, static_cast<size_t>(bytes),
                                  cudaMemcpyDeviceToHost, stream),
                  "cudaMemcpyAsync (device to host staging)"));
  // Also when nothing is copied: the host collective must see every kernel
  // before it finished (the sum's inputs were written on the stream).
  return cudaCheck(cudaStreamSynchronize(stream),
                   "cudaStreamSynchronize (host staging)");
}

Status HostStagedCommunicator::stageOut(void *dst, int64_t at, int64_t bytes) {
  if (bytes == 0)
    return Status::ok();
  return cudaCheck(cudaMemcpyAsync(dst, staging + at,
                                   static_cast<size_t>(bytes),
                                   cudaMemcpyHostToDevice, stream),
                   "cudaMemcpyAsync (host staging to device)");
}

namespace {

/// A host send of a copy that lives as long as the send.
class StagedSend final : public PendingCollective {
public:
  explicit StagedSend(int64_t bytes) : copy(static_cast<size_t>(bytes)) {}
  StatusOr<bool> test() override { return inner->test(); }
  Status wait() override { return inner->wait(); }

  std::vector<char> copy;
  std::unique_ptr<PendingCollective> inner;
};

} // namespace

StatusOr<std::unique_ptr<PendingCollective>>
HostStagedCommunicator::startSend(const void *deviceData, int64_t bytes,
                                  int peer, int tag) {
  auto send = std::make_unique<StagedSend>(bytes);
  if (bytes > 0)
    LOOM_RETURN_IF_ERROR(cudaCheck(
        cudaMemcpyAsync(send->copy.data(), deviceData,
                        static_cast<size_t>(bytes), cudaMemcpyDeviceToHost,
                        stream),
        "cudaMemcpyAsync (device to host send)"));
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaStreamSynchronize(stream),
                                 "cudaStreamSynchronize (host send)"));
  LOOM_ASSIGN_OR_RETURN(send->inner,
                        host.startSend(send->copy.data(), bytes, peer, tag));
  return std::unique_ptr<PendingCollective>(std::move(send));
}

Status HostStagedCommunicator::recv(void *deviceData, int64_t bytes, int peer,
                                    int tag) {
  LOOM_RETURN_IF_ERROR(reserve(bytes));
  // Staging may still be copied out to the device: drain the stream first.
  LOOM_RETURN_IF_ERROR(stageIn(nullptr, 0, 0));
  LOOM_RETURN_IF_ERROR(host.recv(staging, bytes, peer, tag));
  return stageOut(deviceData, 0, bytes);
}

Status HostStagedCommunicator::allReduceSum(float *deviceData, int64_t count) {
  if (size() == 1 || count == 0)
    return Status::ok();
  int64_t bytes = count * int64_t(sizeof(float));
  LOOM_RETURN_IF_ERROR(reserve(bytes));
  LOOM_RETURN_IF_ERROR(stageIn(deviceData, 0, bytes));
  LOOM_RETURN_IF_ERROR(
      host.allReduceSum(reinterpret_cast<float *>(staging), count));
  return stageOut(deviceData, 0, bytes);
}

Status HostStagedCommunicator::allGather(const void *deviceSend,
                                         void *deviceRecv,
                                         int64_t bytesPerRank) {
  if (size() == 1)
    return cuda::copyOwnBlock(deviceSend, deviceRecv, bytesPerRank, stream);
  if (bytesPerRank == 0)
    return Status::ok();
  // [own block | every rank's block]: the host's send and receive buffers
  // must not overlap.
  int64_t all = size() * bytesPerRank;
  LOOM_RETURN_IF_ERROR(reserve(bytesPerRank + all));
  LOOM_RETURN_IF_ERROR(stageIn(deviceSend, 0, bytesPerRank));
  LOOM_RETURN_IF_ERROR(
      host.allGather(staging, staging + bytesPerRank, bytesPerRank));
  return stageOut(deviceRecv, bytesPerRank, all);
}

Status HostStagedCommunicator::reduceScatterSum(const float *deviceSend,
                                                float *deviceRecv,
                                                int64_t countPerRank) {
  int64_t block = countPerRank * int64_t(sizeof(float));
  if (size() == 1)
    return cuda::copyOwnBlock(deviceSend, deviceRecv, block, stream);
  if (countPerRank == 0)
    return Status::ok();
  // [every rank's blocks | this rank's sum].
  int64_t all = size() * block;
  LOOM_RETURN_IF_ERROR(reserve(all + block));
  LOOM_RETURN_IF_ERROR(stageIn(deviceSend, 0, all));
  LOOM_RETURN_IF_ERROR(host.reduceScatterSum(
      reinterpret_cast<const float *>(staging),
      reinterpret_cast<float *>(staging + all), countPerRank));
  return stageOut(deviceRecv, all, block);
}

Status HostStagedCommunicator::allToAll(const void *deviceSend,
                                        void *deviceRecv,
                                        int64_t bytesPerRank) {
  if (size() == 1)
    return cuda::copyOwnBlock(deviceSend, deviceRecv, bytesPerRank, stream);
  if (bytesPerRank == 0)
    return Status::ok();
  // [blocks sent | blocks received].
  int64_t all = size() * bytesPerRank;
  LOOM_RETURN_IF_ERROR(reserve(2 * all));
  LOOM_RETURN_IF_ERROR(stageIn(deviceSend, 0, all));
  LOOM_RETURN_IF_ERROR(host.allToAll(staging, staging + all, bytesPerRank));
  return stageOut(deviceRecv, all, all);
}

StatusOr<std::unique_ptr<Communicator>> HostStagedCommunicator::split(int color,
                                                                      int key) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                        host.split(color, key));
  Communicator &subRef = *sub;
  return std::unique_ptr<Communicator>(
      new HostStagedCommunicator(subRef, std::move(sub), stream));
}

StatusOr<std::unique_ptr<Communicator>>
createHostStagedWorld(Communicator &host, Device &device) {
  auto &cudaDev = static_cast<CudaDevice &>(device);
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaSetDevice(cudaDev.ordinal()), "cudaSetDevice"));
  return std::unique_ptr<Communicator>(
      new HostStagedCommunicator(host, nullptr, cudaDev.stream()));
}

} // namespace loom::runtime::cuda
