//===- ShardZero.cpp - ZeRO: the optimizer's state split over dp -*- C++ -*-===//
//
// ZeRO (Rajbhandari et al., 2020) as shardings on an annotated step: each
// optimizer update runs on the rank's block of its parameter along `dp`
// (one dimension the mesh's other splits leave divisible), so
//   stage 1: the optimizer state arguments hold that block only; the update
//            reads its block of the all-reduced gradient and of the
//            parameter, and the updated blocks are gathered back into the
//            whole parameter;
//   stage 2: also the gradient: loom-reduce-scatter then turns the
//            gradient's all-reduce and slice into one reduce-scatter;
//   stage 3: also the parameter: its argument holds the block, each use
//            gathers it whole, and the update returns the block.
// `shard-partition` makes the slices, gathers and local shapes from these
// annotations. Every sharding here only adds `dp` as the last axis of one
// dimension, one resharding step from what propagation left.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSHARDZEROPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;
using shard::Sharding;

namespace {

/// The `shard.shard` that annotates `v` as produced (its one user).
shard::ShardOp producerAnnotation(Value v) {
  if (!v.hasOneUse())
    return {};
  auto op = dyn_cast<shard::ShardOp>(*v.user_begin());
  return op && !op.getAnnotateForUsers() ? op : shard::ShardOp();
}

/// The `annotate_for_users` `shard.shard` an operand is read through.
shard::ShardOp useAnnotation(Value operand) {
  auto op = operand.getDefiningOp<shard::ShardOp>();
  return op && op.getAnnotateForUsers() ? op : shard::ShardOp();
}

void setSharding(shard::ShardOp op, const Sharding &s) {
  OpBuilder b(op);
  op.getSharding().replaceUsesWithIf(
      shard::ShardingOp::create(b, op.getLoc(), s).getResult(),
      [&](OpOperand &use) { return use.getOwner() == op; });
}

/// `s` with `axis` appended to dimension `dim`'s axes.
Sharding withAxis(const Sharding &s, int64_t dim, shard::GridAxis axis,
                  FlatSymbolRefAttr grid, MLIRContext *ctx) {
  SmallVector<shard::GridAxesAttr> split;
  if (s)
    split.assign(s.getSplitAxes().begin(), s.getSplitAxes().end());
  while (static_cast<int64_t>(split.size()) <= dim)
    split.push_back(shard::GridAxesAttr::get(ctx, {}));
  SmallVector<shard::GridAxis> axes(split[dim].asArrayRef());
  axes.push_back(axis);
  split[dim] = shard::GridAxesAttr::get(ctx, axes);
  return Sharding::get(grid, split);
}

struct ShardZeroPass
    : public loom::impl::LoomShardZeroPassBase<ShardZeroPass> {
  using LoomShardZeroPassBase::LoomShardZeroPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t zero = stage;
    if (zero < 0 || zero > 3) {
      module.emitError("ZeRO stage must be 0 to 3, got ") << zero;
      return signalPassFailure();
    }
    shard::GridOp grid = lookupMesh(module);
    func::FuncOp func = lookupEntryFunction(module);
    if (!isPlannedMesh(grid) || !func) {
      module.emitError("loom-shard-zero needs a pp x dp x tp mesh and the "
                       "entry function (run loom-choose-mesh first)");
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    grid->setAttr(LoomDialect::ZeroStageAttrHelper::getNameStr(),
                  IntegerAttr::get(IntegerType::get(ctx, 64), zero));
    int64_t dp = grid.getShape()[kDataAxis];
    if (zero == 0)
      return;
    if (dp == 1) {
      module.emitError("ZeRO stage ")
          << zero << " splits over dp, which is 1 on this mesh; use zero=0 "
          << "or a mesh with dp > 1";
      return signalPassFailure();
    }
    auto gridRef = FlatSymbolRefAttr::get(grid.getSymNameAttr());
    Operation *ret = func.getBody().front().getTerminator();

    // Each argument's returned update, by role.
    auto returnedUse = [&](BlockArgument arg) -> OpOperand * {
      unsigned i = arg.getArgNumber();
      for (unsigned r = 0; r < func.getNumResults(); ++r)
        if (func.getResultAttr(r, attr::kParam) ==
                func.getArgAttr(i, attr::kParam) &&
            func.getResultAttr(r, attr::kState) ==
                func.getArgAttr(i, attr::kState))
          return &ret->getOpOperand(r);
      return nullptr;
    };

    auto walk = func.walk([&](Operation *op) {
      if (!isa<AdamwOp, SgdOp>(op))
        return WalkResult::advance();
      // Operands: param, grad, states...; results: param, states...
      if (op->getNumOperands() == 2 && zero < 3)
        return WalkResult::advance(); // plain SGD holds no state
      shard::ShardOp paramUse = useAnnotation(op->getOperand(0));
      if (!paramUse)
        return WalkResult::advance();
      auto type = cast<RankedTensorType>(op->getOperand(0).getType());
      Sharding current(paramUse.getSharding());
      // A fused parameter's blocks stay whole (loom-split-fused-projections).
      int64_t blocksDim = -1;
      if (auto produced = paramUse.getSrc().getDefiningOp<shard::ShardOp>())
        if (auto param = dyn_cast<BlockArgument>(produced.getSrc()))
          if (auto fused = func.getArgAttrOfType<DenseI64ArrayAttr>(
                  param.getArgNumber(), attr::kFusedBlocks))
            blocksDim = fused[0];
      // The first dimension whose block under the other splits dp divides.
      int64_t dim = -1;
      for (int64_t d = 0; d < type.getRank() && dim < 0; ++d) {
        if (d == blocksDim)
          continue;
        int64_t n = 1;
        if (current && d < static_cast<int64_t>(current.getSplitAxes().size()))
          for (shard::GridAxis a : current.getSplitAxes()[d].asArrayRef())
            n *= grid.getShape()[a];
        if (type.getDimSize(d) % (n * dp) == 0)
          dim = d;
      }
      if (dim < 0)
        return WalkResult::advance(); // too small to split: replicated
      // Partition reshards one step at a time: every operand must arrive
      // as the parameter is read, so adding dp is that one step (a
      // gradient that tensor parallelism left split otherwise keeps the
      // update whole).
      for (Value operand : op->getOperands()) {
        shard::ShardOp use = useAnnotation(operand);
        auto produced =
            use ? use.getSrc().getDefiningOp<shard::ShardOp>() : shard::ShardOp();
        if (!produced || Sharding(produced.getSharding()) != current)
          return WalkResult::advance();
      }
      Sharding zeroSharding =
          withAxis(current, dim, kDataAxis, gridRef, ctx);
      for (OpOperand &operand : op->getOpOperands()) {
        shard::ShardOp use = useAnnotation(operand.get());
        if (!use)
          return op->emitOpError("operand ")
                     << operand.getOperandNumber()
                     << " is not annotated; run sharding propagation first",
                 WalkResult::interrupt();
        setSharding(use, zeroSharding);
        // The optimizer state (and with stage 3 the parameter) lives split.
        bool isParam = operand.getOperandNumber() == 0;
        bool isState = operand.getOperandNumber() >= 2;
        if (!(isState || (isParam && zero == 3)))
          continue;
        // use -> the argument's producer annotation -> the argument.
        auto produced = use.getSrc().getDefiningOp<shard::ShardOp>();
        auto arg = produced ? dyn_cast<BlockArgument>(produced.getSrc())
                            : BlockArgument();
        if (!arg)
          continue;
        // Partition reshards one step at a time: a parameter that some use
        // reads with another split (a bias that tensor parallelism slices)
        // stays whole over dp, its state still split.
        if (isParam &&
            llvm::any_of(produced->getUsers(), [&](Operation *user) {
              auto other = dyn_cast<shard::ShardOp>(user);
              return user != use.getOperation() &&
                     (!other || Sharding(other.getSharding()) !=
                                    Sharding(produced.getSharding()));
            }))
          continue;
        setSharding(producerAnnotation(arg), zeroSharding);
        if (OpOperand *back = returnedUse(arg))
          if (shard::ShardOp retUse = useAnnotation(back->get()))
            setSharding(retUse, zeroSharding);
      }
      for (OpResult result : op->getResults())
        if (shard::ShardOp produced = producerAnnotation(result))
          setSharding(produced, zeroSharding);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    // Shardings left without users.
    for (Operation &op :
         llvm::make_early_inc_range(func.getBody().front()))
      if (isa<shard::ShardingOp>(op) && op.use_empty())
        op.erase();
  }
};

} // namespace
