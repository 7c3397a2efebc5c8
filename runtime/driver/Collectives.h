//===- Collectives.h - NCCL or host-staged collectives ----------*- C++ -*-===//
//
// `loom-run --device cuda --collectives nccl|host|auto` picks the
// communicator of the device's kernels: NCCL (one GPU per rank), or
// host staging through MPI (runtime/comm/HostStagedCommunicator.h), which
// lets ranks share a GPU. The decision is a pure function of what the
// ranks found, so it is tested without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DRIVER_COLLECTIVES_H
#define LOOM_RUNTIME_DRIVER_COLLECTIVES_H

#include "runtime/support/Status.h"

#include <string>

namespace loom::runtime {

enum class CollectivesMode { Auto, Nccl, Host };

/// `auto`, `nccl` or `host`; anything else is an error naming the value.
StatusOr<CollectivesMode> parseCollectivesMode(const std::string &value);
const char *collectivesModeName(CollectivesMode mode);

struct CollectivesChoice {
  bool hostStaged = false;
  /// Why, for loom-run's start-up line: e.g. "2 ranks share 1 GPU".
  std::string reason;
};

/// The communicator `mode` asks for, given the world size, the number of
/// distinct GPUs its ranks use and whether NCCL loaded (the same on every
/// rank, so every rank decides alike). `auto` takes host staging when two
/// ranks share a GPU or NCCL is missing, else NCCL; `nccl` fails on what
/// NCCL cannot do; `host` always stages.
StatusOr<CollectivesChoice> chooseCollectives(CollectivesMode mode,
                                              int worldSize,
                                              int distinctDevices,
                                              bool ncclAvailable);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_COLLECTIVES_H
