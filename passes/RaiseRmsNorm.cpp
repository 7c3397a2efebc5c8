//===- RaiseRmsNorm.cpp - Recognise decomposed RMS norms --------*- C++ -*-===//
//
// LLaMA's RMSNorm as exporters trace it:
//   y = x * rsqrt(mean(x^2, axes) + eps) * weight   (axes trailing, keep_dims)
// with `rsqrt` also written `reciprocal(sqrt(..))` or `1 / sqrt(..)`, or the
// product as `x / sqrt(..)`. As in `loom-raise-layer-norm`, the
// normalization becomes `loom.rms_norm` with a ones scale and the weight
// folds in by a second pattern.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"
#include "passes/PatternPass.h"
#include "passes/RaiseUtils.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMRAISERMSNORMPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::raise;

namespace {

/// `x / sqrt(mean(x^2) + eps)` -> `loom.rms_norm` with a ones scale. The
/// root is the `loom.div` or the `loom.mul` by the reciprocal square root.
template <typename RootOp>
struct RaiseNormalization : OpRewritePattern<RootOp> {
  using OpRewritePattern<RootOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(RootOp root,
                                PatternRewriter &rewriter) const override {
    Match m;
    m.take(root);
    Value x;
    int64_t axis = 0;
    double eps = 0;
    auto rest = [&](Value num, Value sum) {
      x = num;
      Value meanSquare = matchPlusEpsilon(sum, eps, m);
      auto mean = meanSquare ? meanSquare.getDefiningOp<ReduceMeanOp>()
                             : ReduceMeanOp();
      if (!mean)
        return m.fail("the square root's argument is not reduce_mean(...) + "
                      "eps with a non-negative constant eps");
      if (matchSquare(mean.getInput(), m) != x)
        return m.fail("the mean is not over x^2 of the x it normalizes");
      auto xType = cast<RankedTensorType>(x.getType());
      std::optional<int64_t> k =
          trailingAxis(mean.getAxes(), mean.getKeepDims(), xType.getRank());
      if (!k)
        return m.fail("the mean is not over trailing axes with keep_dims");
      axis = *k;
      // `d / sqrt(mean(d^2) + eps)` with `d = y - mean(y)` over the same
      // axes is a layer norm's tail: leave it to `loom-raise-layer-norm`.
      if (auto sub = x.getDefiningOp<SubOp>())
        if (auto centre = sub.getRhs().getDefiningOp<ReduceMeanOp>())
          if (centre.getInput() == sub.getLhs() &&
              centre.getAxes() == mean.getAxes())
            return m.fail("x is centred (y - mean(y)): a layer norm");
      m.take(mean);
      if (root.getType() != xType)
        return m.fail("the normalization is broadcast beyond the shape of x");
      return true;
    };
    if (!matchDivBySqrt(root, m, rest) || !usesStayInside(m))
      return rewriter.notifyMatchFailure(root, m.why);

    auto shape =
        cast<RankedTensorType>(x.getType()).getShape().drop_front(axis);
    Location loc = root.getLoc();
    rewriter.setInsertionPoint(root);
    Value ones = splatConstant(rewriter, loc, shape, 1.0f);
    Value rms = RmsNormOp::create(rewriter, loc, x, ones,
                                  rewriter.getI64IntegerAttr(axis),
                                  rewriter.getF64FloatAttr(eps));
    replaceMatch(rewriter, m, rms);
    return success();
  }
};

/// `rms_norm(x, ones) * weight` (either order) -> `rms_norm(x, weight)`.
struct FoldScale : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    for (unsigned i : {0u, 1u}) {
      auto rms = root->getOperand(i).getDefiningOp<RmsNormOp>();
      Value weight = root->getOperand(1 - i);
      if (!rms || !rms->hasOneUse() || !isOnes(rms.getScale()))
        continue;
      auto shape = rms.getScale().getType().getShape();
      if (!fitsNormParam(weight, shape) || root.getType() != rms.getType())
        return rewriter.notifyMatchFailure(
            root, "the factor is not shaped like the normalized dimensions");
      Value scale = asNormParam(rewriter, root.getLoc(), weight, shape);
      rewriter.replaceOpWithNewOp<RmsNormOp>(
          root, rms.getInput(), scale, rms.getAxisAttr(), rms.getEpsilonAttr());
      rewriter.eraseOp(rms);
      return success();
    }
    return rewriter.notifyMatchFailure(
        root, "no operand is a single-use 'loom.rms_norm' with a ones scale");
  }
};

} // namespace

template class mlir::loom::PatternPass<loom::impl::LoomRaiseRmsNormPassBase,
                                       RaiseNormalization<DivOp>,
                                       RaiseNormalization<MulOp>, FoldScale>;
