//===- FoldAllSlices.cpp - Local slices instead of sliced values -*- C++ -*-===//
//
// `shard.all_slice` keeps one rank's block of a replicated value. Where the
// value is a uniform constant, or a loom op whose sliced dimension is a
// splittable parallel loop of its nest (ir/sharding/LoopNest.h), the block
// can be computed from blocks of the operands: the slice moves up until it
// meets a constant (which shrinks) or an argument. A parameter expanded to
// the batch (ViT's class token) is expanded to the local batch instead.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "ir/sharding/LoopNest.h"
#include "passes/PatternPass.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMFOLDALLSLICESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// The number of blocks `slice` cuts its axis into.
int64_t blocksOf(shard::AllSliceOp slice) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      slice, slice.getGridAttr());
  int64_t n = 1;
  for (int16_t axis : slice.getGridAxes())
    n *= grid ? grid.getShape()[axis] : ShapedType::kDynamic;
  return n;
}

struct SliceOfSplat : OpRewritePattern<shard::AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(shard::AllSliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto constant = slice.getInput().getDefiningOp<ConstantOp>();
    auto splat = constant ? dyn_cast<SplatElementsAttr>(constant.getValue())
                          : SplatElementsAttr();
    if (!splat)
      return rewriter.notifyMatchFailure(slice, "not a uniform constant");
    auto type = cast<ShapedType>(slice.getResult().getType());
    rewriter.replaceOpWithNewOp<ConstantOp>(slice, splat.resizeSplat(type));
    return success();
  }
};

struct SliceThroughOp : OpRewritePattern<shard::AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(shard::AllSliceOp slice,
                                PatternRewriter &rewriter) const override {
    Operation *op = slice.getInput().getDefiningOp();
    // Every user must take the same block (copies of one slice, as two
    // layers reading one mask make before CSE merges them).
    auto sameBlock = [&](Operation *user) {
      auto other = dyn_cast<shard::AllSliceOp>(user);
      return other && other.getSliceAxis() == slice.getSliceAxis() &&
             other.getGridAttr() == slice.getGridAttr() &&
             other.getGridAxes() == slice.getGridAxes();
    };
    if (!op || !isa<LoomDialect>(op->getDialect()) ||
        op->getNumResults() != 1 || isa<ConstantOp>(op) ||
        !llvm::all_of(op->getUsers(), sameBlock))
      return rewriter.notifyMatchFailure(
          slice, "not a loom op whose users all take this block");
    int64_t axis = slice.getSliceAxis().getSExtValue();
    int64_t n = blocksOf(slice);
    sharding::LoopNest nest = sharding::loopNestOf(op);
    unsigned numOperands = op->getNumOperands();
    int64_t loop = nest.maps[numOperands][axis];
    if (!nest.loops[loop].splittable ||
        nest.loops[loop].type != utils::IteratorType::parallel)
      return rewriter.notifyMatchFailure(slice, "the loop does not split");

    // The dimension of each operand that the loop indexes, if any.
    SmallVector<std::optional<int64_t>> splitDims;
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      auto dims = nest.maps[i];
      auto it = llvm::find(dims, loop);
      if (it == dims.end()) {
        splitDims.push_back(std::nullopt);
        continue;
      }
      int64_t d = it - dims.begin();
      if (cast<RankedTensorType>(operand.getType()).getDimSize(d) % n != 0)
        return rewriter.notifyMatchFailure(slice, "an operand does not split");
      splitDims.push_back(d);
    }
    // After `op`, so the block dominates every slice it replaces.
    rewriter.setInsertionPointAfter(op);
    SmallVector<Value> operands;
    for (auto [operand, d] : llvm::zip(op->getOperands(), splitDims)) {
      if (!d) {
        operands.push_back(operand);
        continue;
      }
      auto type = cast<RankedTensorType>(operand.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[*d] /= n;
      operands.push_back(shard::AllSliceOp::create(
          rewriter, slice.getLoc(), type.clone(shape), operand,
          slice.getGrid(), slice.getGridAxes(), *d));
    }
    Operation *local = rewriter.clone(*op);
    local->setOperands(operands);
    local->getResult(0).setType(slice.getResult().getType());
    // Reshape and expand name their result shape: now the local one.
    if (isa<ReshapeOp, ExpandOp>(local))
      local->setAttr("shape", rewriter.getDenseI64ArrayAttr(
                                  slice.getResult().getType().getShape()));
    for (Operation *user : llvm::make_early_inc_range(op->getUsers()))
      rewriter.replaceOp(user, local->getResults());
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

template class mlir::loom::PatternPass<loom::impl::LoomFoldAllSlicesPassBase,
                                       SliceOfSplat, SliceThroughOp>;
