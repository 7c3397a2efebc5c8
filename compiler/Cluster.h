//===- Cluster.h - The cluster a plan is made for ---------------*- C++ -*-===//

#ifndef LOOM_COMPILER_CLUSTER_H
#define LOOM_COMPILER_CLUSTER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::loom {

struct Link {
  double bandwidthGBps = 0; // per device, one direction
  double latencyUs = 0;
};

/// Nodes x devices and what the devices and links can do
/// (docs/cluster-spec.md).
struct Cluster {
  std::string spec; // as the user gave it
  int64_t nodes = 1, devicesPerNode = 1;
  std::string deviceName;
  double memoryGiB = 0;
  double peakTflopsFp32 = 0, peakTflopsBf16 = 0;
  double hbmGBps = 0;
  Link intraNode, interNode;

  int64_t numDevices() const { return nodes * devicesPerNode; }
  double memoryBytes() const { return memoryGiB * 1024.0 * 1024.0 * 1024.0; }
};

/// Parses a preset (`cpu:N`, `a100-80g:NODESxGPUS`, `h100:…`, `h200:…`) or a
/// JSON cluster file.
llvm::Expected<Cluster> parseCluster(llvm::StringRef spec);

} // namespace mlir::loom

#endif // LOOM_COMPILER_CLUSTER_H
