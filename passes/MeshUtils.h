//===- MeshUtils.h - The planned device mesh --------------------*- C++ -*-===//

#ifndef LOOM_PASSES_MESHUTILS_H
#define LOOM_PASSES_MESHUTILS_H

#include "ir/LoomOps.h"
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

/// `input 'x'` or `the loss target` for data argument `i` of `func`.
inline std::string describeDataArg(func::FuncOp func, unsigned i) {
  if (auto name = func.getArgAttrOfType<StringAttr>(i, attr::kInput))
    return "input '" + name.getValue().str() + "'";
  return "the loss target";
}

} // namespace mlir::loom

#endif // LOOM_PASSES_MESHUTILS_H
