//===- RegatherParameters.cpp - Gather parameters again for the backward -===//
//
// At ZeRO stage 3 partition gathers each parameter over `dp` from the
// rank's shard where it is used, and CSE merges the forward's gather with
// the backward's: the
// whole parameter then stays in memory from its forward use to its
// backward one, for every layer at once, which is what ZeRO-3 exists to
// avoid. This pass gives the backward its own gather, made just before the
// first backward use, so each whole copy lives during one pass only.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMREGATHERPARAMETERSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Whether `op` makes a copy of a parameter from the arguments alone: an
/// all-gather over `dp` of an argument (ZeRO-3's), or a convert, reshape or
/// transpose of such a copy (the bf16 copy of a gathered master weight).
bool copiesParameter(Operation *op) {
  if (auto gather = dyn_cast<shard::AllGatherOp>(op))
    return isa<BlockArgument>(gather.getInput()) &&
           llvm::is_contained(gather.getGridAxes(), kDataAxis);
  if (isa<ConvertOp, ReshapeOp, TransposeOp>(op)) {
    Operation *def = op->getOperand(0).getDefiningOp();
    return def && copiesParameter(def);
  }
  return false;
}

/// Clones `v`'s chain of copies before `before`.
Value cloneChain(Value v, Operation *before, OpBuilder &b) {
  Operation *def = v.getDefiningOp();
  IRMapping map;
  if (def->getOperand(0).getDefiningOp())
    map.map(def->getOperand(0), cloneChain(def->getOperand(0), before, b));
  b.setInsertionPoint(before);
  return b.clone(*def, map)->getResult(0);
}

struct RegatherParametersPass
    : public loom::impl::LoomRegatherParametersPassBase<
          RegatherParametersPass> {
  using LoomRegatherParametersPassBase::LoomRegatherParametersPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.getNumResults() == 0 || !func.getResultAttr(0, attr::kLoss))
      return;
    Block &body = func.getBody().front();
    // The loss ends the forward pass (its sum over ranks may follow it).
    Operation *loss = body.getTerminator()->getOperand(0).getDefiningOp();
    while (loss && isa<shard::ShardDialect>(loss->getDialect()) &&
           loss->getNumOperands() == 1 && loss->getOperand(0).getDefiningOp())
      loss = loss->getOperand(0).getDefiningOp();
    if (!loss)
      return;
    OpBuilder b(func.getContext());
    SmallVector<Operation *> copies;
    for (Operation &op : body)
      if (op.isBeforeInBlock(loss) && copiesParameter(&op))
        copies.push_back(&op);
    for (Operation *copy : copies) {
      Value v = copy->getResult(0);
      SmallVector<OpOperand *> backward;
      bool forward = false;
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (loss->isBeforeInBlock(user))
          backward.push_back(&use);
        else if (!copiesParameter(user))
          forward = true;
      }
      if (!forward || backward.empty())
        continue;
      Operation *first = backward.front()->getOwner();
      for (OpOperand *use : backward)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      Value again = cloneChain(v, first, b);
      for (OpOperand *use : backward)
        use->set(again);
    }
  }
};

} // namespace
