//===- ShardDataParallel.cpp - The data-parallel split, at the boundary -*- C++ -*-===//
//
// Only the entry function's arguments and results are annotated: the batch
// of the data splits over `dp`, everything else is replicated. Upstream
// `sharding-propagation` carries the split through the ops (their
// `ShardingInterface`, ir/sharding/) and `shard-partition` rewrites the step.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSHARDDATAPARALLELPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct ShardDataParallelPass
    : public loom::impl::LoomShardDataParallelPassBase<ShardDataParallelPass> {

  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid = lookupMesh(module);
    auto func = lookupEntryFunction(module);
    if (!grid || !func) {
      module.emitError("loom-shard-data-parallel needs a planned mesh and "
                       "the entry function (run loom-choose-mesh first)");
      return signalPassFailure();
    }
    if (!isPlannedMesh(grid)) {
      grid.emitError("expected a pp x dp x tp mesh, got rank ")
          << grid.getRank();
      return signalPassFailure();
    }
    int64_t dp = grid.getShape()[kDataAxis];
    if (dp <= 0) {
      grid.emitError("the data-parallel axis must have a static positive "
                     "size, got ")
          << dp;
      return signalPassFailure();
    }
    // Under tensor parallelism the batch is annotated even when dp = 1: the
    // split over a size-1 axis marks which loops are the batch's, which
    // loom-auto-shard leaves to dp (and drops from the shardings it writes).
    int64_t micro = microAxisSize(grid);
    if (dp == 1 && grid.getShape()[kTensorAxis] == 1 && micro == 1)
      return;

    MLIRContext *ctx = &getContext();
    Block &body = func.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    Location loc = func.getLoc();
    auto gridRef = FlatSymbolRefAttr::get(ctx, kMeshName);
    Value replicated = shard::ShardingOp::create(b, loc, gridRef, {});
    // With micro-batches the batch splits over dp and then micro: rank d's
    // block of the batch, in micro-batches one after another.
    SmallVector<shard::GridAxis> batchAxes{kDataAxis};
    if (micro > 1)
      batchAxes.push_back(kMicroAxis);
    Value batchSplit = shard::ShardingOp::create(
        b, loc, gridRef, {shard::GridAxesAttr::get(ctx, batchAxes)});

    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      BlockArgument arg = func.getArgument(i);
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0)
        continue;
      bool data = isDataArgument(func, i);
      if (data &&
          (type.isDynamicDim(0) || type.getDimSize(0) % (dp * micro) != 0)) {
        InFlightDiagnostic diag = func.emitError("the batch of ");
        diag << describeDataArg(func, i) << " (" << type.getDimSize(0)
             << ") does not split over dp = " << dp;
        if (micro > 1)
          diag << " x micro = " << micro;
        return signalPassFailure();
      }
      auto shardOp = shard::ShardOp::create(b, arg.getLoc(), arg,
                                            data ? batchSplit : replicated);
      arg.replaceAllUsesExcept(shardOp.getResult(), shardOp);
    }

    // Each use of a constant gets its own, so each may take its own block
    // (a constant batch of token type ids is whole in one op and split in
    // another); CSE merges what stays alike after partition.
    for (ConstantOp constant :
         llvm::make_early_inc_range(body.getOps<ConstantOp>())) {
      for (OpOperand &use :
           llvm::make_early_inc_range(llvm::drop_begin(constant->getUses()))) {
        b.setInsertionPoint(use.getOwner());
        use.set(b.clone(*constant)->getResult(0));
      }
    }

    Operation *ret = body.getTerminator();
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.get().getType());
      if (!type || type.getRank() == 0)
        continue;
      operand.set(shard::ShardOp::create(b, ret->getLoc(), operand.get(),
                                         replicated,
                                         /*annotate_for_users=*/true));
    }
  }
};

} // namespace
