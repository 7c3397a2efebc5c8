//===- InFlightBuckets.h - Buckets started and not waited for ---*- C++ -*-===//
//
// A plan's `all_reduce_start` starts the sum of a bucket and its
// `all_reduce_wait` waits for it (docs/plan-format.md, "Overlapped
// collectives"). The two calls meet here, by bucket id; the executor lets
// every bucket in flight advance between instructions, so a non-blocking
// MPI collective progresses while the kernels run. A plan's `send`s are
// kept here too: each is waited for when the step ends.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_INFLIGHTBUCKETS_H
#define LOOM_RUNTIME_COMM_INFLIGHTBUCKETS_H

#include "runtime/comm/Communicator.h"

#include <map>
#include <memory>
#include <vector>

namespace loom::runtime {

class InFlightBuckets {
public:
  /// Keeps `bucket`'s started collective; fails if it is in flight already.
  Status put(int64_t bucket, std::unique_ptr<PendingCollective> collective);
  /// Waits for `bucket`'s collective and forgets it; fails if it was not
  /// started.
  Status wait(int64_t bucket);
  /// Keeps a started point-to-point send until the step ends.
  void addSend(std::unique_ptr<PendingCollective> send) {
    sends.push_back(std::move(send));
  }
  /// Lets every collective and send in flight advance.
  Status progress();
  bool empty() const { return inFlight.empty() && sends.empty(); }
  /// Waits for the sends, then fails naming the buckets still in flight (a
  /// step must wait for every bucket it starts), and waits for them, so the
  /// next step starts clean.
  Status finishStep();

private:
  std::map<int64_t, std::unique_ptr<PendingCollective>> inFlight;
  std::vector<std::unique_ptr<PendingCollective>> sends;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMM_INFLIGHTBUCKETS_H
