//===- PlanCost.h - The lowered step as the planner's request ---*- C++ -*-===//
//
// The adapter between the IR and LoomPlanner's plain data: one op record per
// op a rank executes (its FLOPs, bytes and arithmetic), one collective record
// per `shard` collective (kind, bytes, mesh axes), the mesh laid over the
// cluster's nodes, and the emitted arena as the memory model's breakdown.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PLANCOST_H
#define LOOM_COMPILER_PLANCOST_H

#include "emit/PlanEmitter.h"
#include "passes/OpCost.h"
#include "passes/planner/CostModel.h"
#include "passes/planner/MemoryModel.h"
#include "passes/planner/MeshTopology.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace mlir::loom {

/// One step of the lowered function `func` (the entry function, or a
/// pipeline device's) as the planner sees it; FLOPs count against the peak
/// of `precision` for MFU; `hostKernels` costs ops as the CPU kernels run
/// them (opRecordOf).
planner::StepRequest stepRequestOf(func::FuncOp func,
                                   planner::Precision precision,
                                   bool hostKernels = false);
/// The same for the lowered `module`'s entry function.
planner::StepRequest stepRequestOf(ModuleOp module,
                                   planner::Precision precision,
                                   bool hostKernels = false);

/// The pipeline stages of a lowered module (`loom.pipeline` on its mesh):
/// the schedule, each stage's first and last layer and the seconds
/// loom-partition-stages predicted for it, and the schedule's stretch
/// (`PipelineSchedule::stretch`). Empty `layers` without stages.
struct PipelineStages {
  std::string schedule = "none";
  int64_t devices = 1;
  std::vector<std::pair<int64_t, int64_t>> layers;
  std::vector<double> plannedSeconds;
  /// Per pp device, the micro-batches its schedule keeps in flight.
  std::vector<int64_t> inFlight;
  double stretch = 1;
};
PipelineStages pipelineStagesOf(ModuleOp module);

/// The recomputation loom-choose-recompute chose (`loom.remat` on the
/// program functions): its mode ("none" without), the layers that run again
/// in full or selectively, summed over the programs (a layer on each pipeline
/// device counts once per device), of how many, the gathers over `tp` the
/// backward makes again (sequence parallelism's), and the recomputed ops'
/// predicted seconds a step on the busiest device.
struct RematFigures {
  std::string mode = "none";
  int64_t layers = 0, fullLayers = 0, selectiveLayers = 0, regathered = 0;
  double seconds = 0;
};
RematFigures rematFiguresOf(ModuleOp module);

/// The mesh of `module` (`shard.grid @mesh`, pp x dp x tp; one device when
/// it has none) on `cluster`'s nodes.
planner::MeshTopology meshTopologyOf(ModuleOp module, const Cluster &cluster);

/// A program's arena of `arenaBytes` by what it holds, plus the kernels'
/// workspace, from the emitter's accounting.
planner::DeviceMemory deviceMemoryOf(const MemoryBreakdown &emitted,
                                     int64_t arenaBytes);

} // namespace mlir::loom

#endif // LOOM_COMPILER_PLANCOST_H
