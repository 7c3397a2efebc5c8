//===- HostStagedCommunicator.h - Device collectives via MPI ----*- C++ -*-===//
//
// Internal to `LoomRuntimeCuda`; others use `createHostStagedWorld`
// (runtime/cuda/CudaBackend.h). Takes DEVICE pointers, as
// `NcclCommunicator` does, but runs each collective on the host: the
// device's bytes are copied on the device's stream into a pinned staging
// buffer, the stream is synchronised, the host communicator (MPI) runs the
// collective, and the result is copied back on the stream. It lets ranks
// share one GPU (NCCL refuses two ranks on one device) and runs where NCCL
// does not; it is not fast (two PCIe copies and a stream drain per call).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_HOSTSTAGEDCOMMUNICATOR_H
#define LOOM_RUNTIME_COMM_HOSTSTAGEDCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <cuda_runtime.h>

namespace loom::runtime::cuda {

class HostStagedCommunicator final : public Communicator {
public:
  /// A communicator over the ranks of `host` (which must outlive it) whose
  /// copies run on `stream`. `owned` (may be null) is kept alive with it
  /// and is `host` itself for split communicators. Not collective: the
  /// staging buffer is allocated by the first collective that needs it.
  HostStagedCommunicator(Communicator &host,
                         std::unique_ptr<Communicator> owned,
                         cudaStream_t stream)
      : host(host), owned(std::move(owned)), stream(stream) {}
  ~HostStagedCommunicator() override;

  int rank() const override { return host.rank(); }
  int size() const override { return host.size(); }
  Status allReduceSum(float *deviceData, int64_t count) override;
  Status allGather(const void *deviceSend, void *deviceRecv,
                   int64_t bytesPerRank) override;
  Status reduceScatterSum(const float *deviceSend, float *deviceRecv,
                          int64_t countPerRank) override;
  Status allToAll(const void *deviceSend, void *deviceRecv,
                  int64_t bytesPerRank) override;
  /// Copies the device's bytes to host memory of the send's own (waited for
  /// on the stream), then sends them from there.
  StatusOr<std::unique_ptr<PendingCollective>>
  startSend(const void *deviceData, int64_t bytes, int peer,
            int tag) override;
  Status recv(void *deviceData, int64_t bytes, int peer, int tag) override;
  StatusOr<int> allReduceMin(int value) override {
    return host.allReduceMin(value);
  }
  Status barrier() override { return host.barrier(); }
  Status broadcast(void *data, int64_t bytes, int root) override {
    return host.broadcast(data, bytes, root);
  }
  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override;

  /// Bytes of pinned host memory held for staging (grows, never shrinks).
  int64_t stagingBytes() const { return capacity; }

private:
  /// Grows the staging buffer to at least `bytes` (pinned by
  /// `cudaMallocHost`; the stream is drained first, since copies may still
  /// read the old buffer).
  Status reserve(int64_t bytes);
  /// `bytes` from the device at `src` into staging at byte `at`, then waits
  /// for the stream (the copy and everything enqueued before it).
  Status stageIn(const void *src, int64_t at, int64_t bytes);
  /// `bytes` of staging at byte `at` to the device at `dst`, on the stream
  /// (not waited for: the next host use of staging follows a `stageIn`).
  Status stageOut(void *dst, int64_t at, int64_t bytes);

  Communicator &host;
  std::unique_ptr<Communicator> owned;
  cudaStream_t stream;
  char *staging = nullptr;
  int64_t capacity = 0;
};

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_COMM_HOSTSTAGEDCOMMUNICATOR_H
