//===- Calibration.h - A machine's measured curves ---------------*- C++ -*-===//
//
// `loomc --calibration FILE` replaces a cluster's datasheet figures with what
// `loom-run --profile` measured on the machine: the devices' product rate
// and its fall-off with size, their memory bandwidth, and the all-reduce's
// bandwidth and latency between the ranks of a node (docs/cluster-spec.md,
// "Calibration").
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_CALIBRATION_H
#define LOOM_PASSES_PLANNER_CALIBRATION_H

#include "passes/planner/Cluster.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace mlir::loom {

/// Reads the calibration file at `path` into `cluster`. Errors (one line):
/// an unreadable or malformed file, a missing or non-positive figure, or a
/// file measured with another number of ranks than the cluster has in a
/// node.
llvm::Error applyCalibration(llvm::StringRef path, Cluster &cluster);

} // namespace mlir::loom

#endif // LOOM_PASSES_PLANNER_CALIBRATION_H
