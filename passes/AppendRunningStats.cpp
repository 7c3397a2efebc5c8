//===- AppendRunningStats.cpp - Batch norms' running statistics --*- C++ -*-===//
//
// A batch norm that names its running statistics (`running_mean`,
// `running_var`: ONNX initializers) updates them every training step, as
// torch.nn.BatchNorm does: the statistics become arguments of the step and
// their updated values results, which the plan keeps in persistent buffers
// and `loom-run --export-onnx` writes back.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/BatchStatistics.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMAPPENDRUNNINGSTATSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct AppendRunningStatsPass
    : public loom::impl::LoomAppendRunningStatsPassBase<
          AppendRunningStatsPass> {

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isEntryFunction(func))
      return;
    if (func.getNumResults() < 1 || !func.getResultAttr(0, attr::kLoss)) {
      func.emitError("loom-append-running-stats expects a training step "
                     "(run loom-append-optimizer first)");
      return signalPassFailure();
    }
    SmallVector<BatchNormOp> norms;
    func.walk([&](BatchNormOp bn) {
      if (bn.getRunningMean())
        norms.push_back(bn);
    });
    if (norms.empty())
      return;

    MLIRContext *ctx = &getContext();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      resultAttrs.push_back(func.getResultAttrDict(r));
    llvm::StringMap<Operation *> updatedBy;

    for (BatchNormOp bn : norms) {
      auto type = bn.getInput().getType();
      int64_t channels = type.getDimSize(1);
      OpBuilder b(ctx);
      b.setInsertionPointAfter(bn);
      Location loc = bn.getLoc();
      BatchStatistics stats = buildBatchStatistics(b, loc, bn.getInput());
      if (stats.count < 2) {
        bn.emitOpError("cannot update the running variance from ")
            << stats.count
            << " value per channel (the unbiased variance needs two, as "
               "torch.nn.BatchNorm says); train with a larger batch";
        return signalPassFailure();
      }
      auto vector = b.getDenseI64ArrayAttr({channels});
      // torch.nn.BatchNorm's running variance takes the unbiased variance,
      // N / (N - 1) times the biased one it normalises with.
      double n = static_cast<double>(stats.count);
      Value batch[2] = {
          ReshapeOp::create(b, loc, stats.mean, vector),
          ScaleOp::create(b, loc,
                          ReshapeOp::create(b, loc, stats.variance, vector),
                          b.getF64FloatAttr(n / (n - 1.0)))};
      double momentum = bn.getMomentum()->convertToDouble();
      StringAttr names[2] = {bn.getRunningMeanAttr(), bn.getRunningVarAttr()};
      StringRef roles[2] = {attr::kRunningMean, attr::kRunningVar};
      for (int k = 0; k < 2; ++k) {
        auto [it, fresh] = updatedBy.try_emplace(names[k].getValue(), bn);
        if (!fresh) {
          bn.emitOpError("running statistic '")
              << names[k].getValue()
              << "' is also updated by another batch norm; give each its own";
          return signalPassFailure();
        }
        auto attrs =
            b.getDictionaryAttr(b.getNamedAttr(roles[k], names[k]));
        unsigned index = func.getNumArguments();
        auto argType = RankedTensorType::get({channels}, b.getF32Type());
        if (failed(func.insertArgument(index, argType, attrs, loc))) {
          func.emitError("cannot add the running statistic arguments");
          return signalPassFailure();
        }
        Value kept = ScaleOp::create(b, loc, func.getArgument(index),
                                     b.getF64FloatAttr(momentum));
        Value added = ScaleOp::create(b, loc, batch[k],
                                      b.getF64FloatAttr(1.0 - momentum));
        results.push_back(AddOp::create(b, loc, kept, added));
        resultAttrs.push_back(attrs);
      }
      bn.removeMomentumAttr();
      bn.removeRunningMeanAttr();
      bn.removeRunningVarAttr();
    }

    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
