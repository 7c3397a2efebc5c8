//===- AppendLoss.cpp - Append the training loss ----------------*- C++ -*-===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMAPPENDLOSSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct AppendLossPass
    : public loom::impl::LoomAppendLossPassBase<AppendLossPass> {
  using LoomAppendLossPassBase::LoomAppendLossPassBase;

  /// Index of the result the loss is computed from, or failure.
  FailureOr<unsigned> findOutput(func::FuncOp func) {
    if (func.getNumResults() == 0)
      return func.emitError("function has no outputs to compute a loss from"),
             failure();
    if (outputName.empty())
      return 0u;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, attr::kOutput))
        if (name.getValue() == outputName)
          return i;
    std::string known;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, attr::kOutput))
        known += (known.empty() ? "" : ", ") + name.getValue().str();
    return func.emitError("no graph output named '")
               << outputName.getValue() << "' (outputs: " << known << ")",
           failure();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isEntryFunction(func))
      return;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, attr::kTarget)) {
        func.emitError("function already has a loss target argument");
        return signalPassFailure();
      }
    FailureOr<unsigned> index = findOutput(func);
    if (failed(index))
      return signalPassFailure();

    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    Value output = ret.getOperand(*index);
    auto outType = dyn_cast<RankedTensorType>(output.getType());
    if (!outType || !outType.hasStaticShape() ||
        !outType.getElementType().isF32()) {
      func.emitError("the loss needs a static-shaped f32 output, got ")
          << output.getType();
      return signalPassFailure();
    }
    if (llvm::is_contained(outType.getShape(), 0)) {
      func.emitError("the output the loss is computed from has no elements "
                     "(shape ")
          << outType << ")";
      return signalPassFailure();
    }
    OpBuilder b(ret);
    Location loc = ret.getLoc();
    MLIRContext *ctx = &getContext();

    Value lossValue;
    if (loss != LossKind::Output) {
      Type targetType;
      if (loss == LossKind::CrossEntropy) {
        if (outType.getRank() < 1) {
          func.emitError("cross_entropy needs an output with a class "
                         "dimension, got a scalar");
          return signalPassFailure();
        }
        targetType = RankedTensorType::get(outType.getShape().drop_back(),
                                           IntegerType::get(ctx, 64));
      } else {
        targetType = outType;
      }
      unsigned argIndex = func.getNumArguments();
      if (failed(func.insertArgument(
              argIndex, targetType,
              b.getDictionaryAttr(
                  b.getNamedAttr(attr::kTarget, b.getUnitAttr())),
              func.getLoc()))) {
        func.emitError("cannot add the loss target argument");
        return signalPassFailure();
      }
      Value target = func.getArgument(argIndex);
      if (loss == LossKind::CrossEntropy)
        lossValue = CrossEntropyOp::create(b, loc, output, target,
                                           /*count=*/nullptr);
      else
        lossValue = MseOp::create(b, loc, output, target, /*count=*/nullptr);
    } else {
      if (outType.getRank() != 0 || !outType.getElementType().isF32()) {
        func.emitError("loss 'output' needs a scalar f32 output, got ")
            << outType;
        return signalPassFailure();
      }
      lossValue = output;
    }

    func::ReturnOp::create(b, loc, ValueRange{lossValue});
    ret.erase();
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(),
                                   {lossValue.getType()}));
    func.setAllResultAttrs(ArrayRef<DictionaryAttr>{b.getDictionaryAttr(
        b.getNamedAttr(attr::kLoss, b.getUnitAttr()))});
  }
};

} // namespace
