//===- SinkAllReduces.cpp - Sum all-reduces after linear ops ----*- C++ -*-===//
//
// The partition all-reduces each partial sum where it is made. A sum
// commutes with linear ops, so the all-reduce may move past them: past a
// widening conversion it sums in f32 (also when a slice of the sum is
// widened), and two moved all-reduces that meet in an addition become one.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/PatternPass.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSINKALLREDUCESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// The single-use sum all-reduce defining `v`, or null.
shard::AllReduceOp movableSum(Value v) {
  auto ar = v.getDefiningOp<shard::AllReduceOp>();
  if (!ar || ar.getReduction() != shard::ReductionKind::Sum || !v.hasOneUse())
    return nullptr;
  return ar;
}

/// `op(all_reduce(x))` -> `all_reduce(op(x))` for a linear unary `op`.
template <typename Op>
struct SinkPastUnary : OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;
  LogicalResult matchAndRewrite(Op op, PatternRewriter &rewriter) const override {
    Operation *o = op.getOperation();
    shard::AllReduceOp ar = movableSum(o->getOperand(0));
    if (!ar)
      return rewriter.notifyMatchFailure(op, "input is not a movable sum");
    if constexpr (std::is_same_v<Op, ConvertOp>) {
      auto from = cast<RankedTensorType>(ar.getType()).getElementType();
      if (!from.isBF16() || !op.getTo().isF32())
        return rewriter.notifyMatchFailure(op, "not a bf16 to f32 widening");
    }
    Operation *moved = rewriter.clone(*o);
    moved->setOperand(0, ar.getInput());
    Value sum = shard::AllReduceOp::create(
        rewriter, ar.getLoc(), moved->getResult(0), ar.getGrid(),
        ar.getGridAxes(), shard::ReductionKind::Sum);
    rewriter.replaceOp(op, sum);
    rewriter.eraseOp(ar);
    return success();
  }
};

/// `convert(all_slice(all_reduce(x)))`, bf16 to f32 -> `all_slice(
/// all_reduce(convert(x)))`: a gradient that ZeRO updates block by block is
/// summed in f32 too (and then the slice of the sum is a reduce-scatter).
struct WidenBeforeSlicedSum : OpRewritePattern<ConvertOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertOp op,
                                PatternRewriter &rewriter) const override {
    auto slice = op.getInput().getDefiningOp<shard::AllSliceOp>();
    if (!slice || !slice->hasOneUse())
      return rewriter.notifyMatchFailure(op, "input is not a lone slice");
    shard::AllReduceOp ar = movableSum(slice.getInput());
    if (!ar)
      return rewriter.notifyMatchFailure(op, "slice of no movable sum");
    auto from = cast<RankedTensorType>(ar.getType());
    if (!from.getElementType().isBF16() || !op.getTo().isF32())
      return rewriter.notifyMatchFailure(op, "not a bf16 to f32 widening");
    Value converted =
        ConvertOp::create(rewriter, op.getLoc(), ar.getInput(), op.getTo());
    Value sum = shard::AllReduceOp::create(rewriter, ar.getLoc(), converted,
                                           ar.getGrid(), ar.getGridAxes(),
                                           shard::ReductionKind::Sum);
    Value sliced = shard::AllSliceOp::create(
        rewriter, slice.getLoc(), op.getType(), slice.getGridAttr(),
        slice.getGridAxesAttr(), sum, slice.getSliceAxisAttr());
    rewriter.replaceOp(op, sliced);
    rewriter.eraseOp(slice);
    rewriter.eraseOp(ar);
    return success();
  }
};

/// `all_reduce(a) + all_reduce(b)` -> `all_reduce(a + b)` over the same axes.
struct MergeSums : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    shard::AllReduceOp a = movableSum(op.getLhs()), b = movableSum(op.getRhs());
    if (!a || !b || a.getGrid() != b.getGrid() ||
        a.getGridAxes() != b.getGridAxes() ||
        a.getType() != op.getType() || b.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "not two like sums of one type");
    Value add = AddOp::create(rewriter, op.getLoc(), a.getInput(), b.getInput());
    Value sum = shard::AllReduceOp::create(rewriter, op.getLoc(), add,
                                           a.getGrid(), a.getGridAxes(),
                                           shard::ReductionKind::Sum);
    rewriter.replaceOp(op, sum);
    rewriter.eraseOp(a);
    rewriter.eraseOp(b);
    return success();
  }
};

} // namespace

template class mlir::loom::PatternPass<
    loom::impl::LoomSinkAllReducesPassBase, SinkPastUnary<TransposeOp>,
    SinkPastUnary<ReshapeOp>, SinkPastUnary<ScaleOp>, SinkPastUnary<ConvertOp>,
    WidenBeforeSlicedSum, MergeSums>;
