//===- MeshUtils.h - The planned device mesh --------------------*- C++ -*-===//

#ifndef LOOM_PASSES_MESHUTILS_H
#define LOOM_PASSES_MESHUTILS_H

#include "ir/LoomOps.h"
#include "passes/planner/PipelineSchedule.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::loom {

/// The symbol of the mesh `loom-choose-mesh` creates.
inline constexpr llvm::StringLiteral kMeshName = "mesh";
/// Names of the mesh axes, outermost first, on the `shard.grid`.
inline constexpr llvm::StringLiteral kMeshAxesAttr =
    LoomDialect::MeshAxesAttrHelper::getNameStr();
/// Axis indices in the `pp x dp x tp` mesh. When the step runs in
/// micro-batches, the mesh has a fourth axis, `micro`, from `loom-choose-mesh`
/// to `loom-unroll-micro-batches`: the batch is split over dp and then micro,
/// so the partition gives each micro-batch's local shapes, and each device
/// then runs the micro "ranks" one after another.
enum MeshAxis : int16_t {
  kPipelineAxis = 0,
  kDataAxis = 1,
  kTensorAxis = 2,
  kMicroAxis = 3
};

/// Whether `grid` is a planned mesh: `pp x dp x tp`, or `pp x dp x tp x
/// micro` before `loom-unroll-micro-batches`.
inline bool isPlannedMesh(shard::GridOp grid) {
  return grid && (grid.getRank() == 3 || grid.getRank() == 4);
}

/// The number of micro-batches the mesh still splits the batch into (1 once
/// `loom-unroll-micro-batches` has run).
inline int64_t microAxisSize(shard::GridOp grid) {
  return grid.getRank() == 4 ? grid.getShape()[kMicroAxis] : 1;
}

/// The planned mesh of `module`, or null.
inline shard::GridOp lookupMesh(ModuleOp module) {
  return module.lookupSymbol<shard::GridOp>(kMeshName);
}

/// The `loom.pipeline` of a mesh (loom-partition-stages), or null.
inline DictionaryAttr pipelineOf(shard::GridOp grid) {
  return grid ? grid->getAttrOfType<DictionaryAttr>(
                    LoomDialect::PipelineAttrHelper::getNameStr())
              : nullptr;
}

/// The schedule of the mesh's `loom.pipeline`, rebuilt from its kind,
/// virtual stages and the mesh's pp size and micro-batches (after
/// loom-unroll-micro-batches, `loom.num_micro_batches`; before, its micro
/// axis). An error without one.
inline llvm::Expected<planner::PipelineSchedule>
pipelineScheduleOf(shard::GridOp grid) {
  DictionaryAttr pipeline = pipelineOf(grid);
  auto kindName = pipeline ? pipeline.getAs<StringAttr>("schedule") : nullptr;
  std::optional<planner::ScheduleKind> kind =
      kindName ? planner::parseSchedule(kindName.getValue()) : std::nullopt;
  if (!kind)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "pp = " + std::to_string(grid ? grid.getShape()[kPipelineAxis] : 1) +
            " but the mesh has no loom.pipeline schedule (run "
            "loom-partition-stages first)");
  int64_t chunks = 1;
  if (auto v = pipeline.getAs<IntegerAttr>("virtual_stages"))
    chunks = v.getInt();
  int64_t micro = microAxisSize(grid);
  if (auto m = grid->getAttrOfType<IntegerAttr>(
          LoomDialect::NumMicroBatchesAttrHelper::getNameStr()))
    micro = m.getInt();
  return planner::buildSchedule(*kind, grid.getShape()[kPipelineAxis], micro,
                                chunks);
}

/// Whether argument `i` of `func` holds data (a model input or the loss
/// target), filled from the data files each step.
inline bool isDataArgument(func::FuncOp func, unsigned i) {
  return func.getArgAttr(i, attr::kInput) || func.getArgAttr(i, attr::kTarget);
}

/// `input 'x'` or `the loss target` for data argument `i` of `func`.
inline std::string describeDataArg(func::FuncOp func, unsigned i) {
  if (auto name = func.getArgAttrOfType<StringAttr>(i, attr::kInput))
    return "input '" + name.getValue().str() + "'";
  return "the loss target";
}

} // namespace mlir::loom

#endif // LOOM_PASSES_MESHUTILS_H
