//===- StepReshards.cpp - One mesh axis per resharding step -----*- C++ -*-===//
//
// `shard-partition` lowers a resharding that splits a value over one more
// mesh axis (an all-slice) but not one that adds two at once: with
// micro-batches the batch splits over `dp` and `micro`, so a replicated
// constant read as a batch (BERT's token type ids) is two steps from its
// users. This pass writes such a pair of annotations as a chain of one-axis
// steps.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSTEPRESHARDSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

using Split = SmallVector<SmallVector<shard::GridAxis>>;

/// The split axes of a plain sharding (no halos or offsets).
std::optional<Split> plainSplit(const shard::Sharding &s) {
  if (!s.getStaticHaloSizes().empty() ||
      !s.getStaticShardedDimsOffsets().empty() ||
      !s.getDynamicHaloSizes().empty() ||
      !s.getDynamicShardedDimsOffsets().empty())
    return std::nullopt;
  Split split;
  for (shard::GridAxesAttr axes : s.getSplitAxes())
    split.emplace_back(axes.asArrayRef());
  return split;
}

struct StepReshardsPass
    : public loom::impl::LoomStepReshardsPassBase<StepReshardsPass> {
  void runOnOperation() override {
    SmallVector<shard::ShardOp> users;
    getOperation().walk([&](shard::ShardOp op) {
      if (op.getAnnotateForUsers())
        users.push_back(op);
    });
    for (shard::ShardOp user : users)
      step(user);
  }

  /// Rewrites `user`'s pair with its source as steps of one axis, if it
  /// adds two or more axes and nothing else.
  void step(shard::ShardOp user) {
    auto source = user.getSrc().getDefiningOp<shard::ShardOp>();
    if (!source || source.getAnnotateForUsers())
      return;
    shard::Sharding from(source.getSharding()), to(user.getSharding());
    if (from.getGridAttr() != to.getGridAttr())
      return;
    std::optional<Split> have = plainSplit(from), want = plainSplit(to);
    if (!have || !want)
      return;
    have->resize(std::max(have->size(), want->size()));
    // (dimension, axis) to add, in order.
    SmallVector<std::pair<size_t, shard::GridAxis>> added;
    for (size_t d = 0; d < have->size(); ++d) {
      ArrayRef<shard::GridAxis> h = (*have)[d];
      ArrayRef<shard::GridAxis> w =
          d < want->size() ? ArrayRef<shard::GridAxis>((*want)[d])
                           : ArrayRef<shard::GridAxis>();
      if (w.size() < h.size() || w.take_front(h.size()) != h)
        return;
      for (shard::GridAxis a : w.drop_front(h.size()))
        added.push_back({d, a});
    }
    if (added.size() < 2)
      return;

    OpBuilder b(user);
    MLIRContext *ctx = user.getContext();
    Location loc = user.getLoc();
    Value prev = source.getResult();
    Split current = *have;
    for (auto [d, axis] : ArrayRef(added).drop_back()) {
      current[d].push_back(axis);
      SmallVector<shard::GridAxesAttr> axes;
      for (ArrayRef<shard::GridAxis> a : current)
        axes.push_back(shard::GridAxesAttr::get(ctx, a));
      while (!axes.empty() && axes.back().empty())
        axes.pop_back();
      Value sharding =
          shard::ShardingOp::create(b, loc, from.getGridAttr(), axes);
      Value forUsers = shard::ShardOp::create(b, loc, prev, sharding,
                                              /*annotate_for_users=*/true);
      prev = shard::ShardOp::create(b, loc, forUsers, sharding);
    }
    user.getSrcMutable().assign(prev);
  }
};

} // namespace
