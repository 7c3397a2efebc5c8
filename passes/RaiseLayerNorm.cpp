//===- RaiseLayerNorm.cpp - Recognise decomposed layer norms ----*- C++ -*-===//
//
// A layer norm written out, as exporters trace a hand-written one:
//   d = x - mean(x, axes)            (axes the trailing [k, rank), keep_dims)
//   y = d / sqrt(mean(d^2, axes) + eps)
//   y * gamma + beta                 (both optional)
// Three patterns: the normalization becomes `loom.layer_norm` with a ones
// scale and no bias, then a following `* gamma` and `+ beta` fold into it.
// Folding separately keeps each pattern small and makes the result the same
// whichever op the greedy driver visits first.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"
#include "passes/PatternPass.h"
#include "passes/RaiseUtils.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMRAISELAYERNORMPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::raise;

namespace {

/// Whether `a` and `b` are the same `x - mean`: one value, or two
/// `loom.sub` with the same operands (an exporter that did not CSE).
bool sameDifference(Value a, Value b) {
  if (a == b)
    return true;
  auto sa = a.getDefiningOp<SubOp>(), sb = b.getDefiningOp<SubOp>();
  return sa && sb && sa.getLhs() == sb.getLhs() && sa.getRhs() == sb.getRhs();
}

/// `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)` -> `loom.layer_norm`
/// with a ones scale. The root is the `loom.div` or the `loom.mul` by the
/// reciprocal square root.
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
      auto d = num.getDefiningOp<SubOp>();
      if (!d)
        return m.fail("the numerator is not a 'loom.sub' (x - mean)");
      auto mean = d.getRhs().getDefiningOp<ReduceMeanOp>();
      x = d.getLhs();
      if (!mean || mean.getInput() != x)
        return m.fail("the numerator is not x - reduce_mean(x)");
      auto xType = cast<RankedTensorType>(x.getType());
      std::optional<int64_t> k =
          trailingAxis(mean.getAxes(), mean.getKeepDims(), xType.getRank());
      if (!k)
        return m.fail("the mean is not over trailing axes with keep_dims");
      axis = *k;
      Value var = matchPlusEpsilon(sum, eps, m);
      auto varMean = var ? var.getDefiningOp<ReduceMeanOp>() : ReduceMeanOp();
      if (!varMean)
        return m.fail("the square root's argument is not reduce_mean(...) + "
                      "eps with a non-negative constant eps");
      if (varMean.getAxes() != mean.getAxes() || !varMean.getKeepDims())
        return m.fail("the variance is reduced over other axes than the mean");
      auto sameAndTake = [&](Value a, Value b) {
        if (!sameDifference(a, b))
          return false;
        m.take(b.getDefiningOp<SubOp>());
        return true;
      };
      Value base = matchSquare(varMean.getInput(), m, sameAndTake);
      if (!base || !sameDifference(base, num))
        return m.fail("the variance is not the mean of (x - mean)^2");
      m.take(base.getDefiningOp<SubOp>());
      m.take(varMean);
      m.take(d);
      m.take(mean);
      if (d.getType() != xType || root.getType() != xType)
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
    Value ln = LayerNormOp::create(rewriter, loc, x, ones, /*bias=*/Value(),
                                   rewriter.getI64IntegerAttr(axis),
                                   rewriter.getF64FloatAttr(eps));
    replaceMatch(rewriter, m, ln);
    return success();
  }
};

/// The `loom.layer_norm` among the operands of binary `root` that has no
/// other use and no bias, and the other operand.
std::optional<std::pair<LayerNormOp, Value>> normOperand(Operation *root) {
  for (unsigned i : {0u, 1u}) {
    auto ln = root->getOperand(i).getDefiningOp<LayerNormOp>();
    if (ln && ln->hasOneUse() && !ln.getBias())
      return std::make_pair(ln, root->getOperand(1 - i));
  }
  return std::nullopt;
}

/// `layer_norm(x, ones) * gamma` -> `layer_norm(x, gamma)`.
struct FoldScale : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    auto found = normOperand(root);
    if (!found)
      return rewriter.notifyMatchFailure(
          root, "no operand is a single-use 'loom.layer_norm' without bias");
    auto [ln, gamma] = *found;
    if (!isOnes(ln.getScale()))
      return rewriter.notifyMatchFailure(root, "the layer norm has a scale");
    auto shape = ln.getScale().getType().getShape();
    if (!fitsNormParam(gamma, shape) || root.getType() != ln.getType())
      return rewriter.notifyMatchFailure(
          root, "the factor is not shaped like the normalized dimensions");
    Value scale = asNormParam(rewriter, root.getLoc(), gamma, shape);
    rewriter.replaceOpWithNewOp<LayerNormOp>(root, ln.getInput(), scale,
                                             /*bias=*/Value(), ln.getAxisAttr(),
                                             ln.getEpsilonAttr());
    rewriter.eraseOp(ln);
    return success();
  }
};

/// `layer_norm(x, scale) + beta` -> `layer_norm(x, scale, beta)`.
struct FoldBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp root,
                                PatternRewriter &rewriter) const override {
    auto found = normOperand(root);
    if (!found)
      return rewriter.notifyMatchFailure(
          root, "no operand is a single-use 'loom.layer_norm' without bias");
    auto [ln, beta] = *found;
    auto shape = ln.getScale().getType().getShape();
    if (!fitsNormParam(beta, shape) || root.getType() != ln.getType())
      return rewriter.notifyMatchFailure(
          root, "the term is not shaped like the normalized dimensions");
    Value bias = asNormParam(rewriter, root.getLoc(), beta, shape);
    rewriter.replaceOpWithNewOp<LayerNormOp>(root, ln.getInput(), ln.getScale(),
                                             bias, ln.getAxisAttr(),
                                             ln.getEpsilonAttr());
    rewriter.eraseOp(ln);
    return success();
  }
};

} // namespace

template class mlir::loom::PatternPass<
    loom::impl::LoomRaiseLayerNormPassBase, RaiseNormalization<DivOp>,
    RaiseNormalization<MulOp>, FoldScale, FoldBias>;
