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
/// Axis indices in the `pp x dp x tp` mesh.
enum MeshAxis : int16_t { kPipelineAxis = 0, kDataAxis = 1, kTensorAxis = 2 };

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
