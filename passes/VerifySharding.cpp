//===- VerifySharding.cpp - Every value annotated before partition -*- C++ -*-===//
//
// `shard-partition` reads the sharding of each value from the `shard.shard`
// ops around it and assumes they are all there. This pass checks that, so
// a value that propagation left unannotated is reported at its op.
//
//===----------------------------------------------------------------------===//

#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMVERIFYSHARDINGPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Values partition may leave unannotated: non-tensors and 0-d tensors.
bool needsSharding(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() > 0;
}

/// The `shard.shard` that annotates `v` as produced, or null.
shard::ShardOp resultAnnotation(Value v) {
  if (!v.hasOneUse())
    return {};
  auto shardOp = dyn_cast<shard::ShardOp>(*v.user_begin());
  return shardOp && !shardOp.getAnnotateForUsers() ? shardOp
                                                   : shard::ShardOp();
}

LogicalResult verifyOp(Operation *op) {
  if (isa<shard::ShardDialect>(op->getDialect()) ||
      op->hasTrait<OpTrait::ConstantLike>())
    return success();
  for (OpOperand &operand : op->getOpOperands()) {
    if (!needsSharding(operand.get()))
      continue;
    auto shardOp = operand.get().getDefiningOp<shard::ShardOp>();
    if (!shardOp || !shardOp.getAnnotateForUsers())
      return op->emitError("sharding propagation left operand ")
             << operand.getOperandNumber() << " of '" << op->getName()
             << "' without a sharding; the step cannot be partitioned";
  }
  for (OpResult result : op->getResults())
    if (needsSharding(result) && !result.use_empty() &&
        !resultAnnotation(result))
      return op->emitError("sharding propagation left result ")
             << result.getResultNumber() << " of '" << op->getName()
             << "' without a sharding; the step cannot be partitioned";
  return success();
}

struct VerifyShardingPass
    : public loom::impl::LoomVerifyShardingPassBase<VerifyShardingPass> {
  void runOnOperation() override {
    FunctionOpInterface func = getOperation();
    // Partition leaves a step without shard ops alone (one rank).
    if (func.isExternal() ||
        !func.getFunctionBody()
             .walk([](shard::ShardOp) { return WalkResult::interrupt(); })
             .wasInterrupted())
      return;
    for (BlockArgument arg : func.getFunctionBody().getArguments()) {
      if (!needsSharding(arg) || resultAnnotation(arg))
        continue;
      emitError(arg.getLoc(), "argument ")
          << arg.getArgNumber() << " of '" << func.getName()
          << "' is not annotated by exactly one shard.shard; the step "
             "cannot be partitioned";
      return signalPassFailure();
    }
    WalkResult walk = func.getFunctionBody().walk([](Operation *op) {
      return failed(verifyOp(op)) ? WalkResult::interrupt()
                                  : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
