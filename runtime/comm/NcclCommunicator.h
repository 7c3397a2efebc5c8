//===- NcclCommunicator.h - Communicator over NCCL ----------------*- C++
//-*-===//
//
// Internal to `LoomRuntimeCuda`; others use `createNcclWorld`
// (runtime/cuda/CudaBackend.h). `allReduceSum`, `allGather`,
// `reduceScatterSum` and `allToAll` take DEVICE pointers and are enqueued on
// the device's stream: they are ordered with the kernels around them and
// have completed at the device's next synchronize, not on return.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define LOOM_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

namespace loom::runtime::cuda {

class NcclCommunicator final : public Communicator {
public:
  /// Collective over `host`: rank 0 makes the unique id, `host` broadcasts
  /// it, every rank joins. `owned` (may be null) is kept alive with it and is
  /// `host` itself for split communicators.
  static StatusOr<std::unique_ptr<Communicator>>
  create(Communicator &host, std::unique_ptr<Communicator> owned,
         cudaStream_t stream);
  ~NcclCommunicator() override;

  int rank() const override { return host.rank(); }
  int size() const override { return host.size(); }
  Status allReduceSum(float *deviceData, int64_t count) override;
  Status allGather(const void *deviceSend, void *deviceRecv,
                   int64_t bytesPerRank) override;
  Status reduceScatterSum(const float *deviceSend, float *deviceRecv,
                          int64_t countPerRank) override;
  Status allToAll(const void *deviceSend, void *deviceRecv,
                  int64_t bytesPerRank) override;
  StatusOr<int> allReduceMin(int value) override {
    return host.allReduceMin(value);
  }
  Status barrier() override { return host.barrier(); }
  Status broadcast(void *data, int64_t bytes, int root) override {
    return host.broadcast(data, bytes, root);
  }
  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override;

private:
  NcclCommunicator(Communicator &host, std::unique_ptr<Communicator> owned,
                   cudaStream_t stream)
      : host(host), owned(std::move(owned)), stream(stream) {}

  Communicator &host;
  std::unique_ptr<Communicator> owned;
  cudaStream_t stream;
  ncclComm_t comm = nullptr; // null for a world of one rank
};

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_COMM_NCCLCOMMUNICATOR_H
