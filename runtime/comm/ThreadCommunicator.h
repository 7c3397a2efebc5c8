//===- ThreadCommunicator.h - Ranks as threads of one process ---*- C++ -*-===//
//
// N ranks of one plan run as N threads of one process and meet in shared
// memory: `loomc --verify-plan` runs a sharded plan this way beside its
// one-device program, without an MPI launcher, and the unit tests run
// their multi-rank cases so. Every collective meets at a barrier, reads
// the other ranks' posted buffers and meets again before anyone may reuse
// them; sums add the ranks in rank order, so a run is deterministic.
// `split` makes sub-worlds the same way, so `createAxesCommunicator` and
// the executor's sub-communicators run as under MPI.
//
// Example:
//   auto failures = runRanks(4, [&](Communicator &world) {
//     return world.allReduceSum(data[world.rank()], n);
//   });
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_THREADCOMMUNICATOR_H
#define LOOM_RUNTIME_COMM_THREADCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <functional>
#include <string>
#include <vector>

namespace loom::runtime {

/// Runs `body(world)` on `n` threads, one per rank of a world of `n`, and
/// returns each rank's failure message ("" when it succeeded).
std::vector<std::string>
runRanks(int n, const std::function<Status(Communicator &)> &body);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMM_THREADCOMMUNICATOR_H
