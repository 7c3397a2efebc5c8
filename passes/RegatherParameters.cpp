//===- RegatherParameters.cpp - Gather parameters again for the backward -===//
//
// At ZeRO stage 3 partition gathers each parameter over `dp` from the
// rank's shard where it is used, and CSE merges the forward's gather with
// the backward's: the
// whole parameter then stays in memory from its forward use to its
// backward one, for every layer at once, which is what ZeRO-3 exists to
// avoid. This pass gives the backward its own gather, made just before the
// first backward use, so each whole copy lives during one pass only. With
// micro-batches each micro-batch's forward and backward get their own; in
// a pipeline device's program (loom-split-stages), where the passes of the
// micro-batches interleave, the ops' micro-batch and backward marks say
// which pass each use is in.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <functional>
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
    Block &body = func.getBody().front();
    OpBuilder b(func.getContext());
    // A pass of a user: which forward or backward over the layers it is in
    // (-1: none, the user keeps the copy it reads).
    std::function<int64_t(Operation *)> passOf;
    SmallVector<Operation *> copies;
    StringRef backward = LoomDialect::BackwardAttrHelper::getNameStr();
    bool marked = llvm::any_of(
        body, [&](Operation &op) { return op.hasAttr(backward); });
    SmallVector<Operation *> bounds;
    if (marked) {
      // A pipeline device's program (loom-split-stages): its ops carry
      // their micro-batch and whether they are the backward's, and the
      // copies CSE merged serve every micro-batch's passes.
      // With one micro-batch no op carries one; with several, an op
      // without one runs once a step (the optimizer's update, the sums of
      // the micro-batches' gradients).
      StringRef micro = LoomDialect::MicroBatchAttrHelper::getNameStr();
      bool perMicroBatch = llvm::any_of(
          body, [&](Operation &op) { return op.hasAttr(micro); });
      passOf = [=](Operation *op) -> int64_t {
        auto mb = op->getAttrOfType<IntegerAttr>(micro);
        if ((!mb && perMicroBatch) || isa<AdamwOp, SgdOp>(op))
          return -1;
        return 2 * (mb ? mb.getInt() : 0) + (op->hasAttr(backward) ? 1 : 0);
      };
      for (Operation &op : body)
        if (copiesParameter(&op))
          copies.push_back(&op);
    } else {
      if (func.getNumResults() == 0 || !func.getResultAttr(0, attr::kLoss))
        return;
      bounds = passBoundaries(func);
      if (bounds.empty())
        return;
      passOf = [&](Operation *user) -> int64_t {
        int64_t pass = 0;
        while (pass < int64_t(bounds.size()) &&
               bounds[pass]->isBeforeInBlock(user))
          ++pass;
        return pass;
      };
      // The copies made before the first boundary (the first forward
      // pass): partition makes each parameter's copy there, CSE merges the
      // others.
      for (Operation &op : body)
        if (op.isBeforeInBlock(bounds.front()) && copiesParameter(&op))
          copies.push_back(&op);
    }
    for (Operation *copy : copies) {
      Value v = copy->getResult(0);
      // The uses by pass, and each pass's first user.
      std::map<int64_t, SmallVector<OpOperand *>> byPass;
      std::map<int64_t, Operation *> firstOf;
      Operation *earliest = nullptr;
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        int64_t pass = passOf(user);
        if (copiesParameter(user) || pass < 0)
          continue;
        byPass[pass].push_back(&use);
        Operation *&first = firstOf[pass];
        if (!first || user->isBeforeInBlock(first))
          first = user;
        if (!earliest || user->isBeforeInBlock(earliest))
          earliest = user;
      }
      // The pass that reads it first keeps the copy; each other one makes
      // its own just before its first use.
      for (auto &[pass, uses] : byPass) {
        if (firstOf[pass] == earliest)
          continue;
        Value again = cloneChain(v, firstOf[pass], b);
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
