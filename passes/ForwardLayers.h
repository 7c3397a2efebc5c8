//===- ForwardLayers.h - The training step's forward ops by layer -*- C++ -*-===//
//
// The forward pass of a training step (its ops up to the loss, in order) and
// the layer of each: its layer key (LayerKey.h) numbered in order of first
// appearance, -1 before the first layer (the embedding) and `numLayers`
// after the last (the head and the loss); an op without a key between two
// layers belongs to the one before it. What loom-partition-stages cuts into
// stages and the planner's request (ModelCostAnalysis.h) costs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_FORWARDLAYERS_H
#define LOOM_PASSES_FORWARDLAYERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::loom {

struct ForwardLayers {
  /// The forward ops, the loss last, and the layer of each.
  SmallVector<Operation *> ops;
  SmallVector<int64_t> layerOf;
  /// Each layer's key (`h.3`), by index.
  SmallVector<std::string> keys;
  Operation *loss = nullptr;

  int64_t numLayers() const { return int64_t(keys.size()); }
};

/// The forward layers of `func`, a training step whose first result is the
/// loss; an error on `func` when it is not one.
FailureOr<ForwardLayers> forwardLayersOf(func::FuncOp func);

} // namespace mlir::loom

#endif // LOOM_PASSES_FORWARDLAYERS_H
