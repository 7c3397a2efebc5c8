//===- LayerKey.h - The layer an op of the step belongs to ------*- C++ -*-===//
//
// The outermost numbered module in an op's ONNX node name (`/h.3/attn/Add`
// is layer "h.3"), or in the name of a parameter it reads
// (`h.3.mlp.c_fc.weight`): what
// loom-partition-stages cuts into stages and loom-choose-recompute
// recomputes. Backward ops carry their forward op's location, so their key
// is their forward op's.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_LAYERKEY_H
#define LOOM_PASSES_LAYERKEY_H

#include "ir/LoomOps.h"
#include "ir/NodeName.h"
#include "passes/planner/LayerName.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace mlir::loom {

/// `op`'s layer key, "" when neither its node name nor a parameter it reads
/// is numbered: its outermost numbered module (`LayerName::block`), so the
/// blocks of a ResNet stage (`layer1.0`, `layer2.0`) are told apart and the
/// sub-blocks of a MobileNet block (`features.3.conv.0`) kept together.
inline std::string layerKeyOf(func::FuncOp func, Operation *op) {
  std::string key = planner::splitLayerIndex(onnxNodeName(op->getLoc())).block;
  if (!key.empty())
    return key;
  for (Value v : op->getOperands())
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (auto p = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     attr::kParam))
        if (std::string k = planner::splitLayerIndex(p.getValue()).block;
            !k.empty())
          return k;
  return "";
}

} // namespace mlir::loom

#endif // LOOM_PASSES_LAYERKEY_H
