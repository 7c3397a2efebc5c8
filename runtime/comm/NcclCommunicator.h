//===- NcclCommunicator.h - Communicator over NCCL ----------------*- C++
//-*-===//
//
// Internal to `LoomRuntimeCuda`; others use `createNcclWorld`
// (runtime/cuda/CudaBackend.h). `allReduceSum`, `allGather`,
// `reduceScatterSum` and `allToAll` take DEVICE pointers and are ordered
// with the kernels around them on the device's stream: each runs on the
// communicator's own stream between two events (it waits for the work
// enqueued before it, and the device's stream waits for it), and has
// completed at the device's next synchronize, not on return.
// `startAllReduceSum` leaves out the second event until its `wait`, so the
// kernels enqueued in between run while NCCL reduces.
//
// Point-to-point transfers (pipeline stages) have no tags in NCCL: each
// pair of ranks that talks in one direction gets a two-rank communicator
// and a stream of its own (`preparePointToPoint`), on which its transfers
// run in the order they are made, so the plan must receive them in the
// order they were sent (loom-split-stages does). A send waits for the
// kernels before it and returns; the device's stream waits for it only at
// the transfer's `wait` (the step's end). A receive makes the device's
// stream wait for its bytes. Never run yet: no GPU has executed it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define LOOM_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

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
  StatusOr<std::unique_ptr<PendingCollective>>
  startAllReduceSum(float *deviceData, int64_t count) override;
  StatusOr<std::unique_ptr<PendingCollective>>
  startAllGather(const void *deviceSend, void *deviceRecv,
                 int64_t bytesPerRank) override;
  StatusOr<std::unique_ptr<PendingCollective>>
  startReduceScatterSum(const float *deviceSend, float *deviceRecv,
                        int64_t countPerRank) override;
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
  Status preparePointToPoint(
      const std::vector<std::pair<int, int>> &pairs) override;
  StatusOr<std::unique_ptr<PendingCollective>>
  startSend(const void *deviceData, int64_t bytes, int peer,
            int tag) override;
  Status recv(void *deviceData, int64_t bytes, int peer, int tag) override;

private:
  NcclCommunicator(Communicator &host, std::unique_ptr<Communicator> owned,
                   cudaStream_t stream)
      : host(host), owned(std::move(owned)), stream(stream) {}
  /// Makes the communication stream wait for the work enqueued so far on
  /// the device's stream.
  Status enterCommStream();
  /// Makes the device's stream wait for the communication stream's work
  /// so far.
  Status leaveCommStream();
  /// Enqueues `launch` (an NCCL call on `commStream`) after the device's
  /// work so far and returns it in flight: the device's stream waits for
  /// it at the pending collective's `wait`.
  template <typename Launch>
  StatusOr<std::unique_ptr<PendingCollective>>
  startOnCommStream(Launch launch, const char *what);

  Communicator &host;
  std::unique_ptr<Communicator> owned;
  cudaStream_t stream;
  ncclComm_t comm = nullptr; // null for a world of one rank
  /// The stream every collective of `comm` runs on, and the events that
  /// order it with `stream` (created with `comm`).
  cudaStream_t commStream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
  /// The two-rank communicator of one direction of transfers (this rank
  /// is its rank 0 when it sends, 1 when it receives), whose own
  /// `commStream` and events order its transfers.
  std::map<int, std::unique_ptr<Communicator>> sendLinks, recvLinks;
};

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_COMM_NCCLCOMMUNICATOR_H
