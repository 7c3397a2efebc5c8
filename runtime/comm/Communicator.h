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
#include <memory>
#include <vector>

namespace loom::runtime {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Sums `count` floats over all ranks, in place.
  virtual Status allReduceSum(float *data, int64_t count) = 0;
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
};

/// A world of one rank: collectives are identities.
class LocalCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allReduceSum(float *, int64_t) override { return Status::ok(); }
  StatusOr<int> allReduceMin(int value) override { return value; }
  Status barrier() override { return Status::ok(); }
  Status broadcast(void *, int64_t, int) override { return Status::ok(); }
  StatusOr<std::unique_ptr<Communicator>> split(int, int) override {
    return std::unique_ptr<Communicator>(new LocalCommunicator());
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
