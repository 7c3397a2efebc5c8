//===- AppendOptimizer.cpp - Apply the optimizer update ---------*- C++ -*-===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMAPPENDOPTIMIZERPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct AppendOptimizerPass
    : public loom::impl::LoomAppendOptimizerPassBase<AppendOptimizerPass> {
  using LoomAppendOptimizerPassBase::LoomAppendOptimizerPassBase;

  /// The optimizer's state slots, in argument order per parameter.
  SmallVector<StringRef> stateSlots() const {
    if (optimizer == OptimizerKind::AdamW)
      return {"exp_avg", "exp_avg_sq"};
    if (momentum != 0.0)
      return {"momentum"};
    return {};
  }

  LogicalResult checkOptions(func::FuncOp func) {
    if (lr < 0)
      return func.emitError("learning rate must be non-negative, got ")
             << lr.getValue();
    if (optimizer == OptimizerKind::AdamW &&
        (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1))
      return func.emitError("adamw betas must lie in [0, 1), got ")
             << beta1.getValue() << ", " << beta2.getValue();
    if (optimizer == OptimizerKind::Sgd && momentum < 0)
      return func.emitError("sgd momentum must be non-negative, got ")
             << momentum.getValue();
    if (optimizer == OptimizerKind::Sgd && nesterov && (momentum <= 0 || dampening != 0))
      return func.emitError(
          "sgd nesterov momentum requires momentum > 0 and dampening = 0");
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isEntryFunction(func))
      return;
    if (failed(checkOptions(func)))
      return signalPassFailure();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // Parameter name -> (argument, gradient).
    SmallVector<std::pair<BlockArgument, Value>> pairs;
    for (unsigned r = 1; r < func.getNumResults(); ++r) {
      auto name = func.getResultAttrOfType<StringAttr>(r, attr::kGrad);
      if (!name)
        continue;
      BlockArgument param;
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (func.getArgAttr(i, attr::kParam) == name)
          param = func.getArgument(i);
      if (!param) {
        func.emitError("gradient of unknown parameter ") << name;
        return signalPassFailure();
      }
      pairs.push_back({param, ret.getOperand(r)});
    }
    if (func.getNumResults() < 1 || !func.getResultAttr(0, attr::kLoss) ||
        pairs.empty()) {
      func.emitError("loom-append-optimizer expects the loss and parameter "
                     "gradients as results (run loom-autodiff first)");
      return signalPassFailure();
    }

    OpBuilder b(ret);
    Location loc = ret.getLoc();
    double wd = weightDecay >= 0 ? weightDecay.getValue()
                                 : (optimizer == OptimizerKind::AdamW ? 0.01 : 0.0);
    SmallVector<StringRef> slots = stateSlots();

    SmallVector<Value> newParams, newStates;
    SmallVector<DictionaryAttr> paramAttrs, stateAttrs;
    for (auto [param, grad] : pairs) {
      Attribute name = func.getArgAttr(param.getArgNumber(), attr::kParam);
      SmallVector<Value> states;
      for (StringRef slot : slots) {
        unsigned idx = func.getNumArguments();
        auto attrs = b.getDictionaryAttr(
            {b.getNamedAttr(attr::kState, b.getStringAttr(slot)),
             b.getNamedAttr(attr::kParam, name)});
        if (failed(func.insertArgument(idx, param.getType(), attrs,
                                       param.getLoc()))) {
          func.emitError("cannot add optimizer state arguments");
          return signalPassFailure();
        }
        states.push_back(func.getArgument(idx));
        stateAttrs.push_back(attrs);
      }
      Operation *update;
      if (optimizer == OptimizerKind::AdamW)
        update = AdamwOp::create(b, loc, param, grad, states[0], states[1],
                                 b.getF64FloatAttr(lr), b.getF64FloatAttr(beta1),
                                 b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
                                 b.getF64FloatAttr(wd));
      else
        update = SgdOp::create(
            b, loc, param, grad, states.empty() ? Value() : states[0],
            b.getF64FloatAttr(lr), b.getF64FloatAttr(momentum),
            b.getF64FloatAttr(wd), b.getF64FloatAttr(dampening),
            nesterov ? b.getUnitAttr() : nullptr);
      newParams.push_back(update->getResult(0));
      paramAttrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(attr::kParam, name)));
      for (unsigned s = 0; s < slots.size(); ++s)
        newStates.push_back(update->getResult(1 + s));
    }

    SmallVector<Value> results{ret.getOperand(0)};
    SmallVector<DictionaryAttr> resultAttrs{func.getResultAttrDict(0)};
    results.append(newParams);
    resultAttrs.append(paramAttrs);
    results.append(newStates);
    resultAttrs.append(stateAttrs);
    func::ReturnOp::create(b, loc, results);
    ret.erase();
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
