//===- Autodiff.cpp - Reverse-mode automatic differentiation ----*- C++ -*-===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/GradientBuilder.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMAUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct AutodiffPass : public loom::impl::LoomAutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isEntryFunction(func))
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
    if (params.empty()) {
      func.emitError("the model has no trainable parameters (no float "
                     "initializers); there is nothing to train");
      return signalPassFailure();
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
