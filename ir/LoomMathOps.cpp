//===- LoomMathOps.cpp - Element-wise, reductions, batched matmul --------===//

#include "ir/LoomOps.h"
#include "ir/OpUtils.h"

#include "mlir/Dialect/Traits.h"
#include "llvm/Support/InterleavedRange.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::detail;

//===----------------------------------------------------------------------===//
// BatchMatmulOp / LinearOp
//===----------------------------------------------------------------------===//

LogicalResult BatchMatmulOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto lhs = rankedType(adaptor.getLhs()).getShape();
  auto rhs = rankedType(adaptor.getRhs()).getShape();
  if (lhs.size() < 2 || rhs.size() < 2)
    return emitInferError(loc, "loom.batch_matmul operands must have rank >= 2");
  int64_t m = lhs[lhs.size() - 2], k = lhs.back();
  if (adaptor.getTransposeLhs())
    std::swap(m, k);
  int64_t rk = rhs[rhs.size() - 2], n = rhs.back();
  if (adaptor.getTransposeRhs())
    std::swap(rk, n);
  if (k != rk)
    return emitInferError(loc, "loom.batch_matmul contraction sizes differ: " +
                                   Twine(k) + " vs " + Twine(rk));
  SmallVector<int64_t> batch;
  if (!OpTrait::util::getBroadcastedShape(lhs.drop_back(2), rhs.drop_back(2),
                                          batch))
    return emitInferError(loc, "loom.batch_matmul batch dimensions do not "
                               "broadcast");
  batch.push_back(m);
  batch.push_back(n);
  inferred.push_back(floatTensor(operands, batch));
  return success();
}

LogicalResult LinearOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto in = rankedType(adaptor.getInput()).getShape();
  auto w = rankedType(adaptor.getWeight()).getShape();
  if (in.empty() || w.size() != 2)
    return emitInferError(loc, "loom.linear needs an input of rank >= 1 and "
                               "a 2-D weight");
  int64_t k = adaptor.getTransposeWeight() ? w[1] : w[0];
  int64_t n = adaptor.getTransposeWeight() ? w[0] : w[1];
  if (in.back() != k)
    return emitInferError(loc, "loom.linear input features " +
                                   Twine(in.back()) + " differ from the "
                                   "weight's " + Twine(k));
  SmallVector<int64_t> shape(in.drop_back());
  shape.push_back(n);
  inferred.push_back(floatTensor(operands, shape));
  return success();
}

LogicalResult LinearOp::verify() {
  if (!getBias())
    return success();
  auto bias = getBias().getType().getShape();
  int64_t n = getResult().getType().getShape().back();
  if (bias.size() != 1 || bias[0] != n)
    return emitOpError("bias must have shape [")
           << n << "], got [" << llvm::interleaved(bias, ", ") << "]";
  return success();
}

//===----------------------------------------------------------------------===//
// Broadcasting ops
//===----------------------------------------------------------------------===//

#define LOOM_BROADCAST_INFER(OP)                                               \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,      \
      DictionaryAttr, OpaqueProperties, RegionRange,                           \
      SmallVectorImpl<Type> &inferred) {                                       \
    FailureOr<SmallVector<int64_t>> shape = broadcastShapes(operands);         \
    if (failed(shape))                                                         \
      return emitInferError(loc, #OP " operand shapes do not broadcast");      \
    inferred.push_back(floatTensor(operands, *shape));                         \
    return success();                                                          \
  }
LOOM_BROADCAST_INFER(PowOp)
LOOM_BROADCAST_INFER(MaxOp)
LOOM_BROADCAST_INFER(MinOp)
LOOM_BROADCAST_INFER(EqualOp)
LOOM_BROADCAST_INFER(LessOp)
LOOM_BROADCAST_INFER(LessEqualOp)
LOOM_BROADCAST_INFER(SelectOp)
#undef LOOM_BROADCAST_INFER

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Checks `axes` against `rank`: non-negative, in range, sorted, unique.
static LogicalResult checkAxes(ArrayRef<int64_t> axes, int64_t rank,
                               std::string &why) {
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= rank) {
      why = "axis " + std::to_string(a) + " is out of range for rank " +
            std::to_string(rank);
      return failure();
    }
    if (i > 0 && axes[i - 1] >= a) {
      why = "axes must be sorted and unique";
      return failure();
    }
  }
  return success();
}

static LogicalResult inferReduce(MLIRContext *ctx, std::optional<Location> loc,
                                 Value input, ArrayRef<int64_t> axes,
                                 bool keepDims,
                                 SmallVectorImpl<Type> &inferred) {
  auto shape = rankedType(input).getShape();
  std::string why;
  if (failed(checkAxes(axes, shape.size(), why)))
    return emitInferError(loc, "reduction: " + why);
  SmallVector<int64_t> out;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(i)))
      out.push_back(d);
    else if (keepDims)
      out.push_back(1);
  }
  inferred.push_back(floatTensor(input, out));
  return success();
}

#define LOOM_REDUCE(OP)                                                        \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,      \
      DictionaryAttr attributes, OpaqueProperties properties,                  \
      RegionRange regions, SmallVectorImpl<Type> &inferred) {                  \
    Adaptor adaptor(operands, attributes, properties, regions);                \
    return inferReduce(ctx, loc, adaptor.getInput(), adaptor.getAxes(),        \
                       adaptor.getKeepDims(), inferred);                       \
  }                                                                            \
  LogicalResult OP::verify() {                                                 \
    std::string why;                                                           \
    if (failed(checkAxes(getAxes(), getInput().getType().getRank(), why)))     \
      return emitOpError(why);                                                 \
    return success();                                                          \
  }
LOOM_REDUCE(ReduceSumOp)
LOOM_REDUCE(ReduceMeanOp)
LOOM_REDUCE(ReduceMaxOp)
#undef LOOM_REDUCE
