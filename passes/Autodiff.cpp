//===- Autodiff.cpp - Reverse-mode automatic differentiation ----*- C++ -*-===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMAUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Builds backward ops for one function, accumulating gradients per value.
class GradientBuilder {
public:
  GradientBuilder(OpBuilder &b, const DenseSet<Value> &needsGrad)
      : b(b), needsGrad(needsGrad) {}

  Value gradOf(Value v) const { return grads.lookup(v); }

  void seed(Value v, Value g) { grads[v] = g; }

  /// Emits the backward of `op` given its result gradients.
  LogicalResult backward(Operation *op);

private:
  /// Adds `g` to the gradient of `v` (if `v` needs one), first bringing `g`
  /// to `v`'s shape: summing broadcast dimensions or reshaping.
  void accumulate(Value v, Value g, Location loc);

  Value scale(Value x, double factor, Location loc) {
    return ScaleOp::create(b, loc, x, b.getF64FloatAttr(factor));
  }

  Value matmul(Value lhs, Value rhs, bool tl, bool tr, Location loc) {
    return MatmulOp::create(b, loc, lhs, rhs, tl ? b.getUnitAttr() : nullptr,
                            tr ? b.getUnitAttr() : nullptr);
  }

  /// Multiplies a loss gradient by the scalar seed unless the seed is 1.
  Value timesSeed(Value g, Value seed, Location loc) {
    if (matchPattern(seed, m_OneFloat()))
      return g;
    return MulOp::create(b, loc, g, seed);
  }

  bool wanted(Value v) const { return needsGrad.contains(v); }

  OpBuilder &b;
  const DenseSet<Value> &needsGrad;
  DenseMap<Value, Value> grads;
};

void GradientBuilder::accumulate(Value v, Value g, Location loc) {
  if (!wanted(v))
    return;
  auto want = cast<RankedTensorType>(v.getType());
  auto have = cast<RankedTensorType>(g.getType());
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
                                             ce.getTarget());
        accumulate(ce.getLogits(), timesSeed(g, dy, loc), loc);
        return success();
      })
      .Case<MseOp>([&](MseOp mse) {
        Value g = MseGradOp::create(b, loc, mse.getPrediction(),
                                    mse.getTarget());
        accumulate(mse.getPrediction(), timesSeed(g, dy, loc), loc);
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitError("loom-autodiff: no gradient rule for '")
               << other->getName() << "'";
      });
}

struct AutodiffPass : public loom::impl::LoomAutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func.getSymName() != "main")
      return;
    if (func.getNumResults() != 1 || !func.getResultAttr(0, attr::kLoss)) {
      func.emitError("loom-autodiff expects a function whose only result is "
                     "the loss (run loom-append-loss first)");
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitError("loom-autodiff expects a single-block function");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);

    // Forward sweep: values that depend on a parameter need a gradient.
    DenseSet<Value> needsGrad;
    SmallVector<unsigned> params;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, attr::kParam)) {
        params.push_back(i);
        needsGrad.insert(func.getArgument(i));
      }
    for (Operation &op : body.without_terminator())
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return needsGrad.contains(v); }))
        needsGrad.insert(op.getResults().begin(), op.getResults().end());

    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(&op);

    OpBuilder b(ret);
    GradientBuilder grads(b, needsGrad);
    auto seed = ConstantOp::create(
        b, ret.getLoc(),
        DenseElementsAttr::get(cast<ShapedType>(loss.getType()), 1.0f));
    grads.seed(loss, seed);
    for (Operation *op : llvm::reverse(forward))
      if (failed(grads.backward(op)))
        return signalPassFailure();

    if (seed->use_empty()) // losses fold the unit seed away
      seed->erase();

    SmallVector<Value> results{loss};
    SmallVector<DictionaryAttr> resultAttrs{func.getResultAttrDict(0)};
    for (unsigned i : params) {
      BlockArgument p = func.getArgument(i);
      Value g = grads.gradOf(p);
      if (!g) // an unused parameter has a zero gradient
        g = ConstantOp::create(
            b, ret.getLoc(),
            DenseElementsAttr::get(cast<ShapedType>(p.getType()), 0.0f));
      results.push_back(g);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(attr::kGrad, func.getArgAttr(i, attr::kParam))));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
