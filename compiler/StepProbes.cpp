//===- StepProbes.cpp - What loomc reads off the pipeline as it runs ------===//

#include "compiler/StepProbes.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loomc;

void SequenceParallelProbe::runBeforePass(Pass *pass, Operation *op) {
  auto func = dyn_cast<func::FuncOp>(op);
  if (pass->getArgument() != "shard-partition" || !func ||
      func.getNumResults() == 0 || !func.getResultAttr(0, "loom.loss"))
    return;
  Operation *loss =
      func.getBody().front().getTerminator()->getOperand(0).getDefiningOp();
  func.walk([&](Operation *norm) {
    int64_t axis;
    if (auto ln = dyn_cast<LayerNormOp>(norm))
      axis = ln.getAxis();
    else if (auto rms = dyn_cast<RmsNormOp>(norm))
      axis = rms.getAxis();
    else
      return;
    if (!loss || !norm->isBeforeInBlock(loss))
      return;
    ++norms;
    FailureOr<std::pair<bool, shard::Sharding>> s =
        shard::getSharding(norm->getOpOperand(0));
    if (failed(s) || !s->second)
      return;
    for (auto [d, axes] : llvm::enumerate(s->second.getSplitAxes()))
      if (static_cast<int64_t>(d) < axis &&
          llvm::is_contained(axes.asArrayRef(), kTensorAxis)) {
        ++split;
        return;
      }
  });
}
void MemoryEstimateProbe::runBeforePass(Pass *pass, Operation *op) {
  if (out || pass->getArgument() != "loom-verify-sharding")
    return;
  auto module = op->getParentOfType<ModuleOp>();
  llvm::Expected<MemoryEstimate> e = estimateMemory(module, options);
  if (!e) {
    llvm::consumeError(e.takeError());
    return;
  }
  out = std::move(*e);
}
