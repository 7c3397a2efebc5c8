//===- Collectives.cpp - NCCL or host-staged collectives --------*- C++ -*-===//

#include "runtime/driver/Collectives.h"

namespace loom::runtime {

StatusOr<CollectivesMode> parseCollectivesMode(const std::string &value) {
  if (value == "auto")
    return CollectivesMode::Auto;
  if (value == "nccl")
    return CollectivesMode::Nccl;
  if (value == "host")
    return CollectivesMode::Host;
  return makeError("--collectives must be nccl, host or auto, got '%s'",
                   value.c_str());
}

const char *collectivesModeName(CollectivesMode mode) {
  switch (mode) {
  case CollectivesMode::Auto:
    return "auto";
  case CollectivesMode::Nccl:
    return "nccl";
  case CollectivesMode::Host:
    return "host";
  }
  return "auto";
}

namespace {

std::string sharing(int worldSize, int distinctDevices) {
  return std::to_string(worldSize) + " ranks share " +
         std::to_string(distinctDevices) +
         (distinctDevices == 1 ? " GPU" : " GPUs");
}

} // namespace

StatusOr<CollectivesChoice> chooseCollectives(CollectivesMode mode,
                                              int worldSize,
                                              int distinctDevices,
                                              bool ncclAvailable) {
  bool shared = worldSize > 1 && distinctDevices < worldSize;
  switch (mode) {
  case CollectivesMode::Host:
    return CollectivesChoice{true, "--collectives host"};
  case CollectivesMode::Nccl:
    if (!ncclAvailable)
      return makeError("--collectives nccl: NCCL is not available (its "
                       "library did not answer ncclGetVersion); use "
                       "--collectives host or auto");
    if (shared)
      return makeError("--collectives nccl: %s, and NCCL takes one rank per "
                       "GPU; use --collectives host or auto",
                       sharing(worldSize, distinctDevices).c_str());
    return CollectivesChoice{false, "--collectives nccl"};
  case CollectivesMode::Auto:
    break;
  }
  if (worldSize <= 1)
    return CollectivesChoice{false, "one rank"};
  if (!ncclAvailable)
    return CollectivesChoice{true, "NCCL is not available"};
  if (shared)
    return CollectivesChoice{true, sharing(worldSize, distinctDevices)};
  return CollectivesChoice{false, "one GPU per rank"};
}

} // namespace loom::runtime
