//===- MixedPrecision.cpp - bf16 compute with f32 master weights -*- C++
//-*-===//
//
// PyTorch autocast's contract as a rewrite of the forward graph: compute ops
// read bf16 copies of f32 values, so the differentiated graph carries bf16
// activations and their gradients, while the gradient of each conversion
// brings parameter gradients back to f32 for the all-reduce and the
// optimizer.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMMIXEDPRECISIONPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

bool isF32Tensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getElementType().isF32();
}

/// Ops that compute on activations (everything but constants, conversions
/// and the f32 optimizer updates).
bool isComputeOp(Operation &op) {
  return isa_and_nonnull<LoomDialect>(op.getDialect()) &&
         !isa<ConstantOp, ConvertOp, SgdOp, AdamwOp>(op);
}

struct MixedPrecisionPass
    : public loom::impl::LoomMixedPrecisionPassBase<MixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isEntryFunction(func))
      return;
    if (precision == Precision::Fp32)
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitError("loom-mixed-precision expects a single-block function");
      return signalPassFailure();
    }
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      if (func.getResultAttr(r, attr::kGrad)) {
        func.emitError("loom-mixed-precision runs before loom-autodiff; "
                       "result #")
            << r << " is already a gradient";
        return signalPassFailure();
      }

    Block &body = func.getBody().front();
    Type bf16 = BFloat16Type::get(&getContext());
    // Each f32 value read by compute ops and its one bf16 copy.
    DenseMap<Value, Value> lowered;
    for (Operation &op :
         llvm::make_early_inc_range(body.without_terminator())) {
      if (auto convert = dyn_cast<ConvertOp>(op)) {
        // Token ids and masks convert straight to the compute precision.
        if (!isa<FloatType>(convert.getInput().getType().getElementType()) &&
            convert.getTo().isF32()) {
          convert.setTo(bf16);
          convert.getResult().setType(
              convert.getResult().getType().clone(bf16));
        }
        continue;
      }
      if (!isComputeOp(op))
        continue;
      for (OpOperand &operand : op.getOpOperands()) {
        Value v = operand.get();
        if (!isF32Tensor(v))
          continue;
        Value &copy = lowered[v];
        if (!copy) {
          OpBuilder b(&op); // before the first use
          copy = ConvertOp::create(b, v.getLoc(), v, bf16);
        }
        operand.set(copy);
      }
      auto infer = dyn_cast<InferTypeOpInterface>(op);
      if (!infer) {
        op.emitError("loom-mixed-precision: cannot re-infer the result type "
                     "of '")
            << op.getName() << "'";
        return signalPassFailure();
      }
      SmallVector<Type> types;
      if (failed(infer.inferReturnTypes(
              &getContext(), op.getLoc(), op.getOperands(),
              op.getRawDictionaryAttrs(), op.getPropertiesStorage(),
              op.getRegions(), types)))
        return signalPassFailure();
      for (auto [result, type] : llvm::zip(op.getResults(), types))
        result.setType(type);
    }

    // Graph outputs and the loss leave in f32.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.get().getType());
      if (type && type.getElementType().isBF16())
        operand.set(ConvertOp::create(b, operand.get().getLoc(), operand.get(),
                                      b.getF32Type()));
    }
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
  }
};

} // namespace
