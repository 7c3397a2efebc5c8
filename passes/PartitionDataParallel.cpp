//===- PartitionDataParallel.cpp - One data-parallel rank's step -*- C++ -*-===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMPARTITIONDATAPARALLELPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct PartitionDataParallelPass
    : public loom::impl::LoomPartitionDataParallelPassBase<
          PartitionDataParallelPass> {

  /// Re-infers the result types of every op after argument types changed.
  LogicalResult reinferTypes(func::FuncOp func) {
    for (Operation &op : func.getBody().front().without_terminator()) {
      auto infer = dyn_cast<InferTypeOpInterface>(&op);
      if (!infer) {
        if (op.getNumResults() == 0 ||
            isa<shard::AllReduceOp>(op)) // collectives keep their type
          continue;
        return op.emitError("loom-partition-data-parallel: cannot re-infer "
                            "the result type of '")
               << op.getName() << "'";
      }
      SmallVector<Type> types;
      if (failed(infer.inferReturnTypes(
              &getContext(), op.getLoc(), op.getOperands(),
              op.getRawDictionaryAttrs(), op.getPropertiesStorage(),
              op.getRegions(), types)))
        return op.emitError("after splitting the batch, this op no longer "
                            "type-checks; the model may mix the batch "
                            "dimension into others");
      for (auto [result, type] : llvm::zip(op.getResults(), types))
        result.setType(type);
    }
    return success();
  }

  /// `shard.all_reduce` over the data axis followed by a `1/dp` scale.
  Value averageOverData(OpBuilder &b, Location loc, Value v, int64_t dp) {
    Value sum = shard::AllReduceOp::create(
        b, loc, v, kMeshName, ArrayRef<shard::GridAxis>{kDataAxis},
        shard::ReductionKind::Sum);
    return ScaleOp::create(b, loc, sum, b.getF64FloatAttr(1.0 / dp));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid = lookupMesh(module);
    auto func = lookupEntryFunction(module);
    if (!grid || !func) {
      module.emitError("loom-partition-data-parallel needs a planned mesh "
                       "and @main (run loom-choose-mesh first)");
      return signalPassFailure();
    }
    if (grid.getRank() != 3) {
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
    if (dp == 1)
      return;

    // Split the batch of every data argument.
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      if (!func.getArgAttr(i, attr::kInput) && !func.getArgAttr(i, attr::kTarget))
        continue;
      BlockArgument arg = func.getArgument(i);
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0 || type.isDynamicDim(0) ||
          type.getDimSize(0) % dp != 0) {
        func.emitError("the batch of ")
            << describeDataArg(func, i) << " does not split over dp = " << dp;
        return signalPassFailure();
      }
      SmallVector<int64_t> shape(type.getShape());
      shape[0] /= dp;
      arg.setType(type.clone(shape));
    }
    if (failed(reinferTypes(func)))
      return signalPassFailure();

    // Average gradients before the optimizer consumes them.
    OpBuilder b(&getContext());
    func.walk([&](Operation *op) {
      if (!isa<AdamwOp, SgdOp>(op))
        return;
      b.setInsertionPoint(op);
      op->setOperand(1, averageOverData(b, op->getLoc(), op->getOperand(1), dp));
    });
    // Average the loss and any returned gradient.
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    b.setInsertionPoint(ret);
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      if (func.getResultAttr(r, attr::kLoss) || func.getResultAttr(r, attr::kGrad))
        ret.setOperand(r, averageOverData(b, ret.getLoc(), ret.getOperand(r), dp));

    func.setType(FunctionType::get(&getContext(),
                                   func.getBody().getArgumentTypes(),
                                   ret.getOperandTypes()));
  }
};

} // namespace
