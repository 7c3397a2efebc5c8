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

#include "mlir/IR/BuiltinOps.h"

namespace mlir::loom {

/// One step of the lowered `module`'s entry function as the planner sees
/// it; FLOPs count against the peak of `precision` for MFU.
planner::StepRequest stepRequestOf(ModuleOp module,
                                   planner::Precision precision);

/// The mesh of `module` (`shard.grid @mesh`, pp x dp x tp; one device when
/// it has none) on `cluster`'s nodes.
planner::MeshTopology meshTopologyOf(ModuleOp module, const Cluster &cluster);

/// A program's arena of `arenaBytes` by what it holds, plus the kernels'
/// workspace, from the emitter's accounting.
planner::DeviceMemory deviceMemoryOf(const MemoryBreakdown &emitted,
                                     int64_t arenaBytes);

} // namespace mlir::loom

#endif // LOOM_COMPILER_PLANCOST_H
