//===- LayerName.h - A name's kind of layer and its layer index -*- C++ -*-===//
//
// PyTorch names the layers of a ModuleList by their index, and exporters keep
// it in initializer and node names: `h.3.mlp.c_fc.weight`,
// `/transformer/h.3/attn/Add`. Taking the index out gives the kind of layer
// (`h.*.mlp.c_fc.weight`) that every layer shares: the summary groups
// shardings by it and loom-auto-shard solves identical layers once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_LAYERNAME_H
#define LOOM_PASSES_PLANNER_LAYERNAME_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::loom::planner {

struct LayerName {
  /// The name with each all-digit component (between `.` or `/`) as `*`.
  std::string kind;
  /// Those components, joined by `.` (empty: the name has none).
  std::string layer;
  /// The outermost numbered module: the first all-digit component with the
  /// one before it (`h.3`, `layer1.0`, `features.3`, `block.0`), the same in
  /// a node name and a parameter name; empty without one.
  std::string block;
};

LayerName splitLayerIndex(llvm::StringRef name);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_LAYERNAME_H
