//===- GradientBuilder.cpp - Gradient accumulation and core rules ---------===//
//
// The rules of the ops every model has (matmul, arithmetic, activations,
// losses); the other families live in GradientRules*.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientBuilder.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::loom;

Value GradientBuilder::scale(Value x, double factor, Location loc) {
  return ScaleOp::create(b, loc, x, b.getF64FloatAttr(factor));
}

Value GradientBuilder::scalar(double value, Value like, Location loc) {
  auto elem =
      cast<FloatType>(cast<ShapedType>(like.getType()).getElementType());
  auto type = RankedTensorType::get({}, elem);
  bool lost;
  APFloat v(value);
  v.convert(elem.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, v));
}

Value GradientBuilder::mul(Value a, Value c, Location loc) {
  return MulOp::create(b, loc, a, c);
}

Value GradientBuilder::div(Value a, Value c, Location loc) {
  return DivOp::create(b, loc, a, c);
}

Value GradientBuilder::matmul(Value lhs, Value rhs, bool tl, bool tr,
                              Location loc) {
  return MatmulOp::create(b, loc, lhs, rhs, tl ? b.getUnitAttr() : nullptr,
                          tr ? b.getUnitAttr() : nullptr);
}

Value GradientBuilder::batchMatmul(Value lhs, Value rhs, bool tl, bool tr,
                                   Location loc) {
  return BatchMatmulOp::create(b, loc, lhs, rhs,
                               tl ? b.getUnitAttr() : nullptr,
                               tr ? b.getUnitAttr() : nullptr);
}

Value GradientBuilder::timesSeed(Value g, Value seed, Location loc) {
  if (matchPattern(seed, m_OneFloat()))
    return g;
  return MulOp::create(b, loc, g, seed);
}

void GradientBuilder::accumulate(Value v, Value g, Location loc) {
  if (!wanted(v))
    return;
  auto want = cast<RankedTensorType>(v.getType());
  auto have = cast<RankedTensorType>(g.getType());
  // A gradient has its value's precision.
  if (want.getElementType() != have.getElementType()) {
    g = ConvertOp::create(b, loc, g, want.getElementType());
    have = cast<RankedTensorType>(g.getType());
  }
  if (want != have) {
    if (want.getNumElements() == have.getNumElements())
      g = ReshapeOp::create(
          b, loc, g,
          batchAgnosticReshapeSpec(have.getShape(), want.getShape()));
    else
      g = SumToOp::create(b, loc, g, v);
  }
  if (Value prev = grads.lookup(v))
    g = AddOp::create(b, loc, prev, g);
  grads[v] = g;
}


LogicalResult GradientBuilder::backward(Operation *op) {
  Location loc = op->getLoc();
  if (op->getNumResults() != 1)
    return op->emitError("loom-autodiff: no gradient rule for '")
           << op->getName() << "'";
  Value dy = grads.lookup(op->getResult(0));
  if (!dy)
    return success(); // the result does not reach the loss
  Value y = op->getResult(0);
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ConstantOp>([](auto) { return success(); })
      .Case<MatmulOp>([&](MatmulOp mm) {
        Value a = mm.getLhs(), w = mm.getRhs();
        bool ta = mm.getTransposeLhs(), tb = mm.getTransposeRhs();
        if (wanted(a))
          accumulate(a, ta ? matmul(w, dy, tb, true, loc)
                           : matmul(dy, w, false, !tb, loc), loc);
        if (wanted(w))
          accumulate(w, tb ? matmul(dy, a, true, ta, loc)
                           : matmul(a, dy, !ta, false, loc), loc);
        return success();
      })
      .Case<AddOp>([&](AddOp add) {
        accumulate(add.getLhs(), dy, loc);
        accumulate(add.getRhs(), dy, loc);
        return success();
      })
      .Case<SubOp>([&](SubOp sub) {
        accumulate(sub.getLhs(), dy, loc);
        if (wanted(sub.getRhs()))
          accumulate(sub.getRhs(), scale(dy, -1.0, loc), loc);
        return success();
      })
      .Case<MulOp>([&](MulOp mul) {
        if (wanted(mul.getLhs()))
          accumulate(mul.getLhs(), MulOp::create(b, loc, dy, mul.getRhs()),
                     loc);
        if (wanted(mul.getRhs()))
          accumulate(mul.getRhs(), MulOp::create(b, loc, dy, mul.getLhs()),
                     loc);
        return success();
      })
      .Case<DivOp>([&](DivOp div) {
        // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b.
        if (wanted(div.getLhs()))
          accumulate(div.getLhs(), DivOp::create(b, loc, dy, div.getRhs()),
                     loc);
        if (wanted(div.getRhs())) {
          Value q = DivOp::create(b, loc, y, div.getRhs());
          accumulate(div.getRhs(),
                     scale(MulOp::create(b, loc, dy, q), -1.0, loc), loc);
        }
        return success();
      })
      .Case<ReluOp>([&](ReluOp relu) {
        accumulate(relu.getInput(),
                   ReluGradOp::create(b, loc, dy, relu.getInput()), loc);
        return success();
      })
      .Case<TanhOp>([&](TanhOp tanh) {
        accumulate(tanh.getInput(), TanhGradOp::create(b, loc, dy, y), loc);
        return success();
      })
      .Case<SigmoidOp>([&](SigmoidOp sig) {
        accumulate(sig.getInput(), SigmoidGradOp::create(b, loc, dy, y), loc);
        return success();
      })
      .Case<ScaleOp>([&](ScaleOp s) {
        accumulate(s.getInput(),
                   scale(dy, s.getFactor().convertToDouble(), loc), loc);
        return success();
      })
      .Case<ReshapeOp>([&](ReshapeOp r) {
        accumulate(r.getInput(), dy, loc); // reshapes back
        return success();
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp ce) {
        Value g = CrossEntropyGradOp::create(b, loc, ce.getLogits(),
                                             ce.getTarget(), ce.getCountAttr());
        accumulate(ce.getLogits(), timesSeed(g, dy, loc), loc);
        return success();
      })
      .Case<MseOp>([&](MseOp mse) {
        Value g = MseGradOp::create(b, loc, mse.getPrediction(),
                                    mse.getTarget(), mse.getCountAttr());
        accumulate(mse.getPrediction(), timesSeed(g, dy, loc), loc);
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        if (succeeded(backwardMath(other, dy)) ||
            succeeded(backwardShape(other, dy)) ||
            succeeded(backwardNN(other, dy)))
          return success();
        return other->emitError("loom-autodiff: no gradient rule for '")
               << other->getName() << "'";
      });
}
