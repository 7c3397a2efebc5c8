//===- Recompute.cpp - Run marked forward ops again in the backward -------===//
//
// The lowering of loom-choose-recompute's marks: each group is cloned where
// placeGroup (RecomputePlan.h) puts it, the same place the choice's peak
// was simulated with, and the backward reads the clones; an original that
// nothing reads any more is erased (unreadOriginals, LiveBytes.h).
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"
#include "passes/RecomputePlan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMRECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct RecomputePass : public loom::impl::LoomRecomputePassBase<RecomputePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func.getBody().hasOneBlock())
      return;
    StringRef mark = LoomDialect::RecomputeAttrHelper::getNameStr();
    std::map<int64_t, SmallVector<Operation *>> groups;
    func.walk([&](Operation *op) {
      if (auto g = op->getAttrOfType<IntegerAttr>(mark)) {
        groups[g.getInt()].push_back(op);
        op->removeAttr(mark);
      }
    });
    if (groups.empty())
      return;
    DenseSet<Operation *> backward = backwardOps(func);
    SmallVector<RecomputeGroup> placed;
    for (auto &[id, ops] : groups) {
      RecomputeGroup g{std::move(ops), nullptr};
      g.insertBefore = placeGroup(g.ops, backward);
      if (g.insertBefore)
        placed.push_back(std::move(g));
    }
    // What only the backward read (a gather made for it) is made there: the
    // original goes, as the choice's simulation left it out.
    DenseSet<Operation *> unread = unreadOriginals(placed);
    OpBuilder b(func.getContext());
    for (const RecomputeGroup &g : placed) {
      Operation *at = g.insertBefore;
      b.setInsertionPoint(at);
      IRMapping map;
      SmallVector<Operation *> clones;
      for (Operation *op : g.ops) {
        Operation *clone = b.clone(*op, map);
        clone->setAttr(LoomDialect::RecomputedAttrHelper::getNameStr(),
                       b.getUnitAttr());
        clones.push_back(clone);
      }
      for (auto [op, clone] : llvm::zip(g.ops, clones))
        for (auto [from, to] : llvm::zip(op->getResults(), clone->getResults()))
          from.replaceUsesWithIf(to, [&](OpOperand &use) {
            Operation *user = use.getOwner();
            return user == at || at->isBeforeInBlock(user);
          });
    }
    // Readers first.
    for (Operation &op : llvm::make_early_inc_range(
             llvm::reverse(func.getBody().front().getOperations())))
      if (unread.contains(&op))
        op.erase();
  }
};

} // namespace
