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

#include <map>

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
    SmallVector<Operation *> bounds = passBoundaries(func);
    if (bounds.empty())
      return;
    OpBuilder b(func.getContext());
    // The copies made before the first boundary (the first forward pass):
    // partition makes each parameter's copy there, CSE merges the others.
    SmallVector<Operation *> copies;
    for (Operation &op : body)
      if (op.isBeforeInBlock(bounds.front()) && copiesParameter(&op))
        copies.push_back(&op);
    for (Operation *copy : copies) {
      Value v = copy->getResult(0);
      // The uses by pass: after boundary k and not after boundary k + 1.
      std::map<size_t, SmallVector<OpOperand *>> byPass;
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (copiesParameter(user))
          continue;
        size_t pass = 0;
        while (pass < bounds.size() && bounds[pass]->isBeforeInBlock(user))
          ++pass;
        byPass[pass].push_back(&use);
      }
      // The first pass keeps the copy; each later one makes its own just
      // before its first use.
      for (auto &[pass, uses] : byPass) {
        if (pass == byPass.begin()->first)
          continue;
        Operation *first = uses.front()->getOwner();
        for (OpOperand *use : uses)
          if (use->getOwner()->isBeforeInBlock(first))
            first = use->getOwner();
        Value again = cloneChain(v, first, b);
        for (OpOperand *use : uses)
          use->set(again);
      }
    }
  }

  /// Where one pass over the layers ends and the next begins, in order: each
  /// micro-batch's loss (the forward ends) and each later micro-batch's
  /// first read of its data (the next forward begins). One micro-batch: its
  /// loss only.
  SmallVector<Operation *> passBoundaries(func::FuncOp func) {
    Block &body = func.getBody().front();
    // The losses: what the returned loss sums (through the sums over ranks
    // and, with micro-batches, their accumulation: a loss that is itself a
    // sum ends the forward where it is made).
    bool microBatches = llvm::any_of(func.getArguments(), [&](BlockArgument a) {
      return func.getArgAttr(a.getArgNumber(), attr::kSampleOffset);
    });
    SmallVector<Operation *> bounds;
    SmallVector<Value> work{body.getTerminator()->getOperand(0)};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def)
        continue;
      if ((isa<shard::ShardDialect>(def->getDialect()) &&
           def->getNumOperands() == 1) ||
          (microBatches && isa<AddOp>(def))) {
        for (Value in : def->getOperands())
          work.push_back(in);
        continue;
      }
      bounds.push_back(def);
    }
    // Each later micro-batch's forward begins at the first read of its
    // data: the boundary is the op before it (a use belongs to the pass of
    // the last boundary strictly before it).
    for (BlockArgument arg : func.getArguments()) {
      auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                       attr::kSampleOffset);
      if (!offset || offset.getInt() == 0)
        continue;
      Operation *first = nullptr;
      for (Operation *user : arg.getUsers())
        if (!first || user->isBeforeInBlock(first))
          first = user;
      if (first && first->getPrevNode())
        bounds.push_back(first->getPrevNode());
    }
    llvm::sort(bounds, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    return bounds;
  }
};

} // namespace
