//===- SyncBatchNorm.cpp - Batch statistics over the global batch -*- C++ -*-===//
//
// Under data parallelism a fused `loom.batch_norm` would normalise each
// rank's block of the batch with that block's statistics. Written out in
// reductions and element-wise ops, the statistics' sums run over the split
// batch, and the partition completes each with a sum all-reduce: every rank
// then normalises with the global batch's mean and variance, and the
// backward uses the global sums, so the step computes what one rank does.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/BatchStatistics.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSYNCBATCHNORMPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// A batch's statistics and the normalised input, as the forward computes
/// them and the backward reuses them.
struct Normalized {
  BatchStatistics stats;
  Value rstd; // 1 / sqrt(variance + epsilon), [1, C, 1, ...]
  Value xhat; // (x - mean) * rstd
};

/// `v` (`[C]`) as `[1, C, 1, ...]` of rank `rank`, in f32.
Value perChannel(OpBuilder &b, Location loc, Value v, int64_t rank) {
  SmallVector<int64_t> shape(rank, 1);
  shape[1] = cast<RankedTensorType>(v.getType()).getDimSize(0);
  return ReshapeOp::create(b, loc, castToF32(b, loc, v),
                           b.getDenseI64ArrayAttr(shape));
}

/// `v` converted back to the element type of `like` when they differ.
Value castLike(OpBuilder &b, Location loc, Value v, Value like) {
  Type want = cast<RankedTensorType>(like.getType()).getElementType();
  if (cast<RankedTensorType>(v.getType()).getElementType() == want)
    return v;
  return ConvertOp::create(b, loc, v, want);
}

struct SyncBatchNormPass
    : public loom::impl::LoomSyncBatchNormPassBase<SyncBatchNormPass> {

  /// The normalisation of `x` with `epsilon`, built before `at` unless the
  /// forward already built it.
  Normalized normalize(Operation *at, Value x, FloatAttr epsilon) {
    auto key = std::make_pair(x, Attribute(epsilon));
    auto it = cache.find(key);
    if (it != cache.end())
      return it->second;
    OpBuilder b(at);
    Location loc = at->getLoc();
    Normalized n;
    n.stats = buildBatchStatistics(b, loc, x);
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Value eps = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(
            scalar, static_cast<float>(epsilon.getValueAsDouble())));
    n.rstd = RsqrtOp::create(b, loc,
                             AddOp::create(b, loc, n.stats.variance, eps));
    n.xhat = MulOp::create(b, loc, n.stats.centered, n.rstd);
    cache.try_emplace(key, n);
    return n;
  }

  /// y = xhat * scale + bias.
  void rewrite(BatchNormOp bn) {
    if (bn.getResult().use_empty()) {
      bn.erase();
      return;
    }
    Normalized n = normalize(bn, bn.getInput(), bn.getEpsilonAttr());
    OpBuilder b(bn);
    Location loc = bn.getLoc();
    int64_t rank = bn.getInput().getType().getRank();
    Value scaled = MulOp::create(b, loc, n.xhat,
                                 perChannel(b, loc, bn.getScale(), rank));
    Value y = AddOp::create(b, loc, scaled,
                            perChannel(b, loc, bn.getBias(), rank));
    bn.getResult().replaceAllUsesWith(castLike(b, loc, y, bn.getResult()));
    bn.erase();
  }

  /// dbias = sum(dy), dscale = sum(dy * xhat),
  /// dx = scale * rstd * (dy - dbias / N - xhat * dscale / N); only the
  /// results that are used are built (propagation leaves dead values
  /// unannotated, which partition rejects).
  void rewrite(BatchNormGradOp grad) {
    Normalized n = normalize(grad, grad.getInput(), grad.getEpsilonAttr());
    OpBuilder b(grad);
    Location loc = grad.getLoc();
    int64_t rank = grad.getInput().getType().getRank();
    int64_t channels = grad.getInput().getType().getDimSize(1);
    auto axes = b.getDenseI64ArrayAttr(batchNormAxes(rank));
    auto inverse =
        b.getF64FloatAttr(1.0 / static_cast<double>(n.stats.count));
    auto vector = b.getDenseI64ArrayAttr({channels});
    bool needDx = !grad.getGradInput().use_empty();
    bool needBias = needDx || !grad.getGradBias().use_empty();
    bool needScale = needDx || !grad.getGradScale().use_empty();
    Value dy = needBias || needScale ? castToF32(b, loc, grad.getGrad())
                                     : Value();
    Value dx = dy; // dy - dbias / N - xhat * dscale / N, as far as built
    if (needBias) {
      Value sumDy = ReduceSumOp::create(b, loc, dy, axes, b.getUnitAttr());
      grad.getGradBias().replaceAllUsesWith(castLike(
          b, loc, ReshapeOp::create(b, loc, sumDy, vector), grad.getGradBias()));
      if (needDx)
        dx = SubOp::create(b, loc, dx, ScaleOp::create(b, loc, sumDy, inverse));
    }
    if (needScale) {
      Value sumDyXhat = ReduceSumOp::create(
          b, loc, MulOp::create(b, loc, dy, n.xhat), axes, b.getUnitAttr());
      grad.getGradScale().replaceAllUsesWith(
          castLike(b, loc, ReshapeOp::create(b, loc, sumDyXhat, vector),
                   grad.getGradScale()));
      if (needDx)
        dx = SubOp::create(
            b, loc, dx,
            MulOp::create(b, loc, n.xhat,
                          ScaleOp::create(b, loc, sumDyXhat, inverse)));
    }
    if (needDx) {
      Value factor = MulOp::create(
          b, loc, perChannel(b, loc, grad.getScale(), rank), n.rstd);
      grad.getGradInput().replaceAllUsesWith(castLike(
          b, loc, MulOp::create(b, loc, dx, factor), grad.getGradInput()));
    }
    grad.erase();
  }

  /// An error for a batch norm with no elements per channel.
  LogicalResult checkNotEmpty(Operation *op, Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    for (int64_t d : batchNormAxes(type.getRank()))
      if (type.getDimSize(d) == 0)
        return op->emitOpError("cannot synchronise the statistics of an "
                               "empty batch (input ")
               << type << "); use loomc --local-batchnorm";
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid = lookupMesh(module);
    auto func = lookupEntryFunction(module);
    if (!grid || !func) {
      module.emitError("loom-sync-batch-norm needs a planned mesh and the "
                       "entry function (run loom-choose-mesh first)");
      return signalPassFailure();
    }
    if (!isPlannedMesh(grid)) {
      grid.emitError("expected a pp x dp x tp mesh, got rank ")
          << grid.getRank();
      return signalPassFailure();
    }
    // Micro-batches split the batch too: each would otherwise normalise
    // with its own statistics (loom-unroll-micro-batches then refuses the
    // global ones).
    if (grid.getShape()[kDataAxis] == 1 && microAxisSize(grid) == 1)
      return;
    cache.clear();
    SmallVector<Operation *> norms;
    func.walk([&](Operation *op) {
      if (isa<BatchNormOp, BatchNormGradOp>(op))
        norms.push_back(op);
    });
    for (Operation *op : norms)
      if (failed(checkNotEmpty(op, op->getOperand(isa<BatchNormOp>(op) ? 0 : 1))))
        return signalPassFailure();
    for (Operation *op : norms) {
      if (auto bn = dyn_cast<BatchNormOp>(op))
        rewrite(bn);
      else
        rewrite(cast<BatchNormGradOp>(op));
    }
  }

  /// By input and epsilon.
  DenseMap<std::pair<Value, Attribute>, Normalized> cache;
};

} // namespace
