//===- GradientRulesMath.cpp - Backward of math ops ----------------------===//
//
// Each `backward*` returns failure without building anything when `op` is
// not of its family.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientBuilder.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

/// `v`, a reduction of `x` over `axes`, with the reduced dimensions as 1s
/// (reshaped when the reduction dropped them).
static Value keptDims(OpBuilder &b, Value v, Value x, ArrayRef<int64_t> axes,
                      bool keepDims, Location loc) {
  if (keepDims)
    return v;
  SmallVector<int64_t> kept(cast<RankedTensorType>(x.getType()).getShape());
  for (int64_t a : axes)
    kept[a] = 1;
  auto shape = cast<RankedTensorType>(v.getType()).getShape();
  return ReshapeOp::create(b, loc, v, batchAgnosticReshapeSpec(shape, kept));
}

LogicalResult GradientBuilder::backwardMath(Operation *op, Value dy) {
  Location loc = op->getLoc();
  Value y = op->getResult(0);
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<BatchMatmulOp>([&](BatchMatmulOp mm) {
        Value a = mm.getLhs(), w = mm.getRhs();
        bool ta = mm.getTransposeLhs(), tb = mm.getTransposeRhs();
        // Broadcast batch dimensions are summed back by `accumulate`.
        if (wanted(a))
          accumulate(a, ta ? batchMatmul(w, dy, tb, true, loc)
                           : batchMatmul(dy, w, false, !tb, loc), loc);
        if (wanted(w))
          accumulate(w, tb ? batchMatmul(dy, a, true, ta, loc)
                           : batchMatmul(a, dy, !ta, false, loc), loc);
        return success();
      })
      .Case<LinearOp>([&](LinearOp lin) {
        Value x = lin.getInput(), w = lin.getWeight();
        bool tw = lin.getTransposeWeight();
        if (wanted(x))
          accumulate(x, matmul(dy, w, false, !tw, loc), loc);
        if (wanted(w))
          accumulate(w, tw ? matmul(dy, x, true, false, loc)
                           : matmul(x, dy, true, false, loc), loc);
        if (lin.getBias())
          accumulate(lin.getBias(), dy, loc);
        return success();
      })
      .Case<PowOp>([&](PowOp pow) {
        Value a = pow.getLhs(), e = pow.getRhs();
        // d(a^e)/da = e a^(e-1); d(a^e)/de = a^e ln a.
        if (wanted(a)) {
          Value em1 = SubOp::create(b, loc, e, scalar(1.0, e, loc));
          Value d = mul(e, PowOp::create(b, loc, a, em1), loc);
          accumulate(a, mul(dy, d, loc), loc);
        }
        if (wanted(e))
          accumulate(e, mul(dy, mul(y, LogOp::create(b, loc, a), loc), loc),
                     loc);
        return success();
      })
      .Case<ExpOp>([&](ExpOp e) {
        accumulate(e.getInput(), mul(dy, y, loc), loc);
        return success();
      })
      .Case<LogOp>([&](LogOp l) {
        accumulate(l.getInput(), div(dy, l.getInput(), loc), loc);
        return success();
      })
      .Case<SqrtOp>([&](SqrtOp s) {
        accumulate(s.getInput(), scale(div(dy, y, loc), 0.5, loc), loc);
        return success();
      })
      .Case<RsqrtOp>([&](RsqrtOp r) {
        // d(x^-1/2)/dx = -1/2 y^3.
        Value y3 = mul(y, mul(y, y, loc), loc);
        accumulate(r.getInput(), scale(mul(dy, y3, loc), -0.5, loc), loc);
        return success();
      })
      .Case<NegOp>([&](NegOp n) {
        accumulate(n.getInput(), scale(dy, -1.0, loc), loc);
        return success();
      })
      .Case<ReciprocalOp>([&](ReciprocalOp r) {
        accumulate(r.getInput(), scale(mul(dy, mul(y, y, loc), loc), -1.0, loc),
                   loc);
        return success();
      })
      .Case<ErfOp>([&](ErfOp e) {
        // d erf(x)/dx = 2/sqrt(pi) exp(-x^2).
        Value x = e.getInput();
        Value g = ExpOp::create(b, loc, scale(mul(x, x, loc), -1.0, loc));
        accumulate(x, scale(mul(dy, g, loc), 2.0 / std::sqrt(M_PI), loc), loc);
        return success();
      })
      .Case<TruncOp>([&](TruncOp) {
        // Piecewise constant: no gradient reaches the input.
        return success();
      })
      .Case<RoundF16Op>([&](RoundF16Op r) {
        // As PyTorch's cast: the gradient passes through.
        accumulate(r.getInput(), dy, loc);
        return success();
      })
      .Case<SinOp>([&](SinOp s) {
        accumulate(s.getInput(),
                   mul(dy, CosOp::create(b, loc, s.getInput()), loc), loc);
        return success();
      })
      .Case<CosOp>([&](CosOp c) {
        Value sin = SinOp::create(b, loc, c.getInput());
        accumulate(c.getInput(), scale(mul(dy, sin, loc), -1.0, loc), loc);
        return success();
      })
      .Case<MaxOp, MinOp>([&](auto op) {
        // The gradient goes to the operand the op picked; on a tie to the
        // second (Clip's bound, so a value at the bound gets none, as in
        // PyTorch's clamp). `relu_grad` masks where the first wins strictly.
        Value a = op.getLhs(), c = op.getRhs();
        Value margin = isa<MaxOp>(op.getOperation())
                           ? SubOp::create(b, loc, a, c).getResult()
                           : SubOp::create(b, loc, c, a).getResult();
        Value toFirst = ReluGradOp::create(b, loc, dy, margin);
        if (wanted(a))
          accumulate(a, toFirst, loc);
        if (wanted(c))
          accumulate(c, SubOp::create(b, loc, dy, toFirst), loc);
        return success();
      })
      .Case<EqualOp, LessOp, LessEqualOp>([&](auto) {
        return success(); // a step function: zero almost everywhere
      })
      .Case<SelectOp>([&](SelectOp s) {
        Value zero = scalar(0.0, dy, loc);
        if (wanted(s.getOnTrue()))
          accumulate(s.getOnTrue(),
                     SelectOp::create(b, loc, s.getCondition(), dy, zero), loc);
        if (wanted(s.getOnFalse()))
          accumulate(s.getOnFalse(),
                     SelectOp::create(b, loc, s.getCondition(), zero, dy), loc);
        return success();
      })
      .Case<ReduceMaxOp>([&](ReduceMaxOp red) {
        // PyTorch's amax: the gradient is shared evenly by the elements
        // equal to the max.
        Value x = red.getInput();
        Value g = keptDims(b, dy, x, red.getAxes(), red.getKeepDims(), loc);
        Value m = keptDims(b, y, x, red.getAxes(), red.getKeepDims(), loc);
        Value hit = EqualOp::create(b, loc, x, m);
        Value count = ReduceSumOp::create(b, loc, hit, red.getAxesAttr(),
                                          b.getUnitAttr());
        Value share = DivOp::create(b, loc, g, count);
        accumulate(x, mul(hit, share, loc), loc);
        return success();
      })
      .Case<ReduceSumOp, ReduceMeanOp>([&](auto red) {
        Value x = red.getInput();
        auto xType = cast<RankedTensorType>(x.getType());
        Value g = keptDims(b, dy, x, red.getAxes(), red.getKeepDims(), loc);
        g = BroadcastLikeOp::create(b, loc, g, x);
        if (isa<ReduceMeanOp>(red.getOperation())) {
          int64_t count = 1;
          for (int64_t a : red.getAxes())
            count *= xType.getDimSize(a);
          g = scale(g, 1.0 / count, loc);
        }
        accumulate(x, g, loc);
        return success();
      })
      .Default([](Operation *) { return failure(); });
}
