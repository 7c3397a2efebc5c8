//===- Communicator.h - Collectives behind an interface -----------*- C++ -*-===//
//
// The executor talks to other ranks only through `Communicator`, so an NCCL
// implementation can sit next to the MPI one. `LocalCommunicator` is the
// world of one rank, used without MPI (unit tests, `loom-run --forward`).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_COMMUNICATOR_H
#define LOOM_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace loom::runtime {

/// A collective started and not finished yet (`startAllReduceSum`). Its
/// buffer must not be touched until `wait` returns.
class PendingCollective {
public:
  virtual ~PendingCollective() = default;
  /// Lets the collective advance without blocking (MPI progresses
  /// non-blocking collectives only inside its calls); whether it is done.
  virtual StatusOr<bool> test() = 0;
  /// Returns when the collective is done (for a device communicator: when
  /// the device's stream waits for it, as its other calls are ordered).
  virtual Status wait() = 0;
};

/// A collective that was done when it was started.
class FinishedCollective final : public PendingCollective {
public:
  StatusOr<bool> test() override { return true; }
  Status wait() override { return Status::ok(); }
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Sums `count` floats over all ranks, in place.
  virtual Status allReduceSum(float *data, int64_t count) = 0;
  /// Starts `allReduceSum(data, count)` and returns without waiting for it
  /// where the communicator can (MPI, NCCL); every rank must start its
  /// collectives in the same order. By default the sum is done on return.
  virtual StatusOr<std::unique_ptr<PendingCollective>>
  startAllReduceSum(float *data, int64_t count) {
    LOOM_RETURN_IF_ERROR(allReduceSum(data, count));
    return std::unique_ptr<PendingCollective>(new FinishedCollective());
  }
  /// Every rank's `bytesPerRank` bytes of `send`, rank `i`'s at
  /// `recv + i * bytesPerRank` (`size() * bytesPerRank` bytes; the two do
  /// not overlap).
  virtual Status allGather(const void *send, void *recv,
                           int64_t bytesPerRank) = 0;
  /// Sums `size() * countPerRank` floats of `send` over all ranks; this rank
  /// keeps block `rank()` of the sum (`countPerRank` floats) in `recv`.
  virtual Status reduceScatterSum(const float *send, float *recv,
                                  int64_t countPerRank) = 0;
  /// Start `allGather` and `reduceScatterSum` and return without waiting
  /// for them where the communicator can (MPI, NCCL), as
  /// `startAllReduceSum`: `send` and `recv` must stay untouched until the
  /// returned collective is waited for. By default they are done on return.
  virtual StatusOr<std::unique_ptr<PendingCollective>>
  startAllGather(const void *send, void *recv, int64_t bytesPerRank) {
    LOOM_RETURN_IF_ERROR(allGather(send, recv, bytesPerRank));
    return std::unique_ptr<PendingCollective>(new FinishedCollective());
  }
  virtual StatusOr<std::unique_ptr<PendingCollective>>
  startReduceScatterSum(const float *send, float *recv, int64_t countPerRank) {
    LOOM_RETURN_IF_ERROR(reduceScatterSum(send, recv, countPerRank));
    return std::unique_ptr<PendingCollective>(new FinishedCollective());
  }
  /// Block `j` of `send` (`bytesPerRank` bytes at `send + j * bytesPerRank`)
  /// goes to rank `j`; block `i` of `recv` is the block rank `i` sent here.
  virtual Status allToAll(const void *send, void *recv,
                          int64_t bytesPerRank) = 0;
  /// Starts sending `bytes` bytes of `data` to rank `peer` under `tag` and
  /// returns without waiting for `peer` to receive them: `data` must stay
  /// unchanged until the returned transfer is waited for. `peer` receives
  /// them with one `recv` of the same tag and size; sends to one peer under
  /// one tag arrive in order. Not every communicator has point-to-point
  /// transfers: by default an error.
  virtual StatusOr<std::unique_ptr<PendingCollective>>
  startSend(const void *data, int64_t bytes, int peer, int tag);
  /// Receives `bytes` bytes from rank `peer` under `tag` into `data`,
  /// returning when they are there.
  virtual Status recv(void *data, int64_t bytes, int peer, int tag);
  /// Readies the transfers from rank `first` to rank `second` of each pair
  /// (every rank passes the same pairs in the same order: collective). A
  /// communicator that needs nothing for them (MPI, threads) does nothing.
  virtual Status preparePointToPoint(
      const std::vector<std::pair<int, int>> &pairs) {
    (void)pairs;
    return Status::ok();
  }
  /// The minimum of `value` over all ranks (used to agree on failures).
  virtual StatusOr<int> allReduceMin(int value) = 0;
  virtual Status barrier() = 0;
  /// Copies `bytes` host bytes from rank `root` to every rank (used to hand
  /// out NCCL's unique id).
  virtual Status broadcast(void *data, int64_t bytes, int root) = 0;
  /// Splits into sub-communicators of the ranks with equal `color`, ordered
  /// by `key` (collective over this communicator).
  virtual StatusOr<std::unique_ptr<Communicator>> split(int color,
                                                        int key) = 0;

protected:
  /// An error unless `peer` is another rank of this communicator.
  Status checkPeer(int peer) const;
};

/// A world of one rank: collectives are identities.
class LocalCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allReduceSum(float *, int64_t) override { return Status::ok(); }
  Status allGather(const void *send, void *recv,
                   int64_t bytesPerRank) override {
    return copyBlock(send, recv, bytesPerRank);
  }
  Status reduceScatterSum(const float *send, float *recv,
                          int64_t countPerRank) override {
    return copyBlock(send, recv, countPerRank * int64_t(sizeof(float)));
  }
  Status allToAll(const void *send, void *recv, int64_t bytesPerRank) override {
    return copyBlock(send, recv, bytesPerRank);
  }
  StatusOr<int> allReduceMin(int value) override { return value; }
  Status barrier() override { return Status::ok(); }
  Status broadcast(void *, int64_t, int) override { return Status::ok(); }
  StatusOr<std::unique_ptr<Communicator>> split(int, int) override {
    return std::unique_ptr<Communicator>(new LocalCommunicator());
  }

private:
  static Status copyBlock(const void *send, void *recv, int64_t bytes) {
    if (send != recv && bytes > 0)
      std::memmove(recv, send, static_cast<size_t>(bytes));
    return Status::ok();
  }
};

/// Coordinates of `rank` on a mesh of `sizes` (row-major: last axis fastest).
std::vector<int64_t> meshCoordinates(int64_t rank,
                                     const std::vector<int64_t> &sizes);

/// The communicator of the ranks that differ from `world.rank()` only in the
/// mesh axes `axes` (collective over `world`; every rank must call it with
/// the same arguments).
StatusOr<std::unique_ptr<Communicator>>
createAxesCommunicator(Communicator &world, const std::vector<int64_t> &sizes,
                       const std::vector<int64_t> &axes);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMM_COMMUNICATOR_H
