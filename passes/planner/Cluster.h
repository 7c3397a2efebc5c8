//===- Cluster.h - The cluster a plan is made for ---------------*- C++ -*-===//

#ifndef LOOM_PASSES_PLANNER_CLUSTER_H
#define LOOM_PASSES_PLANNER_CLUSTER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::loom {

/// One level of the interconnect: what each device can push through it.
struct Link {
  double bandwidthGBps = 0; // per device, one direction
  double latencyUs = 0;
};

/// Which link a group of devices talks over: all members inside one node, or
/// not.
enum class LinkLevel { IntraNode, InterNode };

/// Nodes x devices and what the devices and links can do
/// (docs/cluster-spec.md).
struct Cluster {
  std::string spec; // as the user gave it
  int64_t nodes = 1, devicesPerNode = 1;
  std::string deviceName;
  double memoryGiB = 0;
  /// Of it, what the runtime cannot plan: on a GPU the CUDA context, NCCL's
  /// buffers and cudaMalloc's rounding (docs/cluster-spec.md).
  double reserveGiB = 0;
  double peakTflopsFp32 = 0, peakTflopsBf16 = 0;
  double hbmGBps = 0;
  Link intraNode, interNode;

  int64_t numDevices() const { return nodes * devicesPerNode; }
  double memoryBytes() const { return memoryGiB * 1024.0 * 1024.0 * 1024.0; }
  /// What a plan may hold: the memory less the reserve.
  double usableMemoryBytes() const {
    return (memoryGiB - reserveGiB) * 1024.0 * 1024.0 * 1024.0;
  }
  /// The link of `level`.
  const Link &link(LinkLevel level) const {
    return level == LinkLevel::IntraNode ? intraNode : interNode;
  }
};

/// Parses a preset (`cpu:N`, `a100-80g:NODESxGPUS`, `h100:…`, `h200:…`) or a
/// JSON cluster file.
llvm::Expected<Cluster> parseCluster(llvm::StringRef spec);

} // namespace mlir::loom

#endif // LOOM_PASSES_PLANNER_CLUSTER_H
