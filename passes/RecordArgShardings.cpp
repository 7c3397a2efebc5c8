//===- RecordArgShardings.cpp - Keep the arguments' splits for the plan -*- C++ -*-===//
//
// `shard-partition` gives each argument its local type and drops its
// `shard.shard`. The plan still needs the global shape and the split of a
// parameter, its optimizer state and a running statistic (docs/plan-format.md,
// "Sharded buffers"), so this pass writes each such split argument's sharding
// as `loom.split_axes` before partition. Data arguments need none: the plan
// places their samples by the rank's dp coordinate.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMRECORDARGSHARDINGSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct RecordArgShardingsPass
    : public loom::impl::LoomRecordArgShardingsPassBase<
          RecordArgShardingsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Builder b(&getContext());
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      bool persistent = func.getArgAttr(i, attr::kParam) ||
                        func.getArgAttr(i, attr::kRunningMean) ||
                        func.getArgAttr(i, attr::kRunningVar);
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!persistent || !type || !arg.hasOneUse())
        continue;
      auto shardOp = dyn_cast<shard::ShardOp>(*arg.user_begin());
      if (!shardOp)
        continue;
      shard::Sharding sharding(shardOp.getSharding());
      SmallVector<Attribute> dims;
      bool split = false;
      for (int64_t d = 0; d < type.getRank(); ++d) {
        SmallVector<int64_t> axes;
        if (d < static_cast<int64_t>(sharding.getSplitAxes().size()))
          for (shard::GridAxis a : sharding.getSplitAxes()[d].asArrayRef())
            axes.push_back(a);
        split |= !axes.empty();
        dims.push_back(b.getDenseI64ArrayAttr(axes));
      }
      if (split)
        func.setArgAttr(i, attr::kSplitAxes,
                        b.getArrayAttr(dims));
    }
  }
};

} // namespace
