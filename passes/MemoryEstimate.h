//===- MemoryEstimate.h - A planned step's memory, before emission -*- C++
//-*-===//
//
// What each device holds at its peak, read from the planned step (the mesh,
// each value's sharding, the pipeline stages and micro-batches as the plan
// phase annotates them) without emitting a plan: a copy of the step is
// lowered by the lowering's own passes and its buffers simulated as the
// emitter places them (LiveBytes.h), so the figure is the live-set bound
// the emitted arena reports. Without pipeline stages only the first, the
// second and the last micro-batch are written out (every micro-batch
// between them holds what the second holds) and the data of the others is
// added, so the cost does not grow with the micro-batches; with stages
// every micro-batch is (docs/planner.md, "Memory before emission").
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_MEMORYESTIMATE_H
#define LOOM_PASSES_MEMORYESTIMATE_H

#include "passes/planner/MemoryModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlir::loom {

struct MemoryEstimate {
  /// Each pipeline device's peak by what it holds (one when pp = 1); the
  /// kernels' workspace is not estimated (0).
  std::vector<planner::DeviceMemory> devices;

  /// The busiest device's bytes.
  int64_t peakBytes() const;
};

/// What the lowering would be asked for beside the planned module.
struct MemoryEstimateOptions {
  /// loom-choose-recompute's mode (none, selective, full, auto), cluster
  /// and budget.
  std::string remat = "none", cluster = "cpu:1";
  double memoryBudgetGib = 0;
  /// loom-bucket-all-reduces' bucket size (0: from the cluster, -1: none).
  int64_t bucketBytes = 0;
  /// loom-bucket-block-collectives' bucket size (0: from the cluster, -1:
  /// none).
  int64_t blockBucketBytes = 0;
};

/// The estimate of `planned`, a module after the plan phase
/// (loom-choose-mesh and what follows it, before loom-verify-sharding).
llvm::Expected<MemoryEstimate>
estimateMemory(ModuleOp planned, const MemoryEstimateOptions &options = {});

} // namespace mlir::loom

#endif // LOOM_PASSES_MEMORYESTIMATE_H
