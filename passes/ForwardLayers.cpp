//===- ForwardLayers.cpp - The training step's forward ops by layer -------===//

#include "passes/ForwardLayers.h"
#include "ir/LoomOps.h"
#include "passes/LayerKey.h"

#include <map>

using namespace mlir;
using namespace mlir::loom;

FailureOr<ForwardLayers> mlir::loom::forwardLayersOf(func::FuncOp func) {
  if (!func.getBody().hasOneBlock())
    return func.emitError("expected a single-block training step"), failure();
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (ret.getNumOperands() == 0 || !func.getResultAttr(0, attr::kLoss))
    return func.emitError("expected a training step (its first result the "
                          "loss)"),
           failure();
  ForwardLayers out;
  out.loss = ret.getOperand(0).getDefiningOp();
  if (!out.loss)
    return func.emitError("the loss is an argument of the step"), failure();
  for (Operation &op : body.without_terminator()) {
    out.ops.push_back(&op);
    if (&op == out.loss)
      break;
  }
  std::map<std::string, int64_t> indexOf;
  SmallVector<bool> keyed;
  int64_t current = -1;
  for (Operation *op : out.ops) {
    std::string key = layerKeyOf(func, op);
    keyed.push_back(!key.empty());
    if (!key.empty()) {
      auto [it, added] = indexOf.try_emplace(key, out.keys.size());
      if (added)
        out.keys.push_back(key);
      current = it->second;
    }
    out.layerOf.push_back(current);
  }
  // After the last layer's last op: the head.
  for (int64_t i = int64_t(out.ops.size()) - 1; i >= 0 && !keyed[i]; --i)
    out.layerOf[i] = out.numLayers();
  return out;
}
