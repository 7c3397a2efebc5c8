//===- LoomShapeOps.cpp - Layout and indexing ops -------------------------===//

#include "ir/LoomOps.h"
#include "ir/OpUtils.h"

#include "mlir/Dialect/Traits.h"
#include "llvm/Support/InterleavedRange.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::detail;

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

static LogicalResult checkPermutation(ArrayRef<int64_t> perm, int64_t rank,
                                      std::string &why) {
  if (static_cast<int64_t>(perm.size()) != rank) {
    why = "permutation has " + std::to_string(perm.size()) +
          " entries for rank " + std::to_string(rank);
    return failure();
  }
  SmallVector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      why = "permutation is not a permutation of [0, rank)";
      return failure();
    }
    seen[p] = true;
  }
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto in = rankedType(adaptor.getInput()).getShape();
  std::string why;
  if (failed(checkPermutation(adaptor.getPermutation(), in.size(), why)))
    return emitInferError(loc, "loom.transpose: " + why);
  SmallVector<int64_t> out;
  for (int64_t p : adaptor.getPermutation())
    out.push_back(in[p]);
  inferred.push_back(floatTensor(operands, out));
  return success();
}

LogicalResult TransposeOp::verify() {
  std::string why;
  if (failed(checkPermutation(getPermutation(), getInput().getType().getRank(),
                              why)))
    return emitOpError(why);
  return success();
}

//===----------------------------------------------------------------------===//
// ExpandOp / BroadcastLikeOp
//===----------------------------------------------------------------------===//

LogicalResult ExpandOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto in = rankedType(adaptor.getInput()).getShape();
  ArrayRef<int64_t> spec = adaptor.getShape();
  if (spec.size() < in.size())
    return emitInferError(loc, "loom.expand: shape has fewer dimensions than "
                               "the input");
  SmallVector<int64_t> target(spec);
  size_t offset = spec.size() - in.size();
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] != -1)
      continue;
    if (i < offset)
      return emitInferError(loc, "loom.expand: -1 at a position the input "
                                 "does not have");
    target[i] = in[i - offset];
  }
  SmallVector<int64_t> out;
  if (!OpTrait::util::getBroadcastedShape(in, target, out) ||
      ArrayRef<int64_t>(out) != ArrayRef<int64_t>(target))
    return emitInferError(loc, "loom.expand: input does not broadcast to the "
                               "shape");
  inferred.push_back(floatTensor(operands, out));
  return success();
}

LogicalResult BroadcastLikeOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(operands[1].getType());
  return success();
}

LogicalResult BroadcastLikeOp::verify() {
  SmallVector<int64_t> out;
  auto in = getInput().getType().getShape();
  auto like = getLike().getType().getShape();
  if (!OpTrait::util::getBroadcastedShape(in, like, out) ||
      ArrayRef<int64_t>(out) != like)
    return emitOpError("cannot broadcast shape ")
           << llvm::interleaved(in, "x") << " to "
           << llvm::interleaved(like, "x");
  return success();
}

//===----------------------------------------------------------------------===//
// SliceOp / SliceGradOp
//===----------------------------------------------------------------------===//

/// The shape of slicing `in`, with starts and ends clamped to [0, dim].
static FailureOr<SmallVector<int64_t>>
slicedShape(ArrayRef<int64_t> in, ArrayRef<int64_t> axes,
            ArrayRef<int64_t> starts, ArrayRef<int64_t> ends,
            ArrayRef<int64_t> steps, std::string &why) {
  if (axes.size() != starts.size() || axes.size() != ends.size() ||
      axes.size() != steps.size()) {
    why = "axes, starts, ends and steps must have the same length";
    return failure();
  }
  SmallVector<int64_t> out(in);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < 0 || a >= static_cast<int64_t>(in.size())) {
      why = "axis " + std::to_string(a) + " is out of range";
      return failure();
    }
    if (steps[i] <= 0) {
      why = "steps must be positive";
      return failure();
    }
    int64_t s = std::clamp<int64_t>(starts[i], 0, in[a]);
    int64_t e = std::clamp<int64_t>(ends[i], 0, in[a]);
    out[a] = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
  }
  return out;
}

LogicalResult SliceOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  std::string why;
  auto shape = slicedShape(rankedType(adaptor.getInput()).getShape(),
                           adaptor.getAxes(), adaptor.getStarts(),
                           adaptor.getEnds(), adaptor.getSteps(), why);
  if (failed(shape))
    return emitInferError(loc, "loom.slice: " + why);
  inferred.push_back(floatTensor(operands, *shape));
  return success();
}

LogicalResult SliceOp::verify() {
  std::string why;
  if (failed(slicedShape(getInput().getType().getShape(), getAxes(),
                         getStarts(), getEnds(), getSteps(), why)))
    return emitOpError(why);
  return success();
}

LogicalResult SliceGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(operands[1].getType());
  return success();
}

LogicalResult SliceGradOp::verify() {
  std::string why;
  auto shape = slicedShape(getLike().getType().getShape(), getAxes(),
                           getStarts(), getEnds(), getSteps(), why);
  if (failed(shape))
    return emitOpError(why);
  if (getGrad().getType().getShape() != ArrayRef<int64_t>(*shape))
    return emitOpError("grad of shape ")
           << llvm::interleaved(getGrad().getType().getShape(), "x")
           << " is not the slice's shape "
           << llvm::interleaved(*shape, "x");
  return success();
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  if (operands.empty())
    return emitInferError(loc, "loom.concat needs at least one input");
  SmallVector<int64_t> out(rankedType(operands[0]).getShape());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(out.size()))
    return emitInferError(loc, "loom.concat axis " + Twine(axis) +
                                   " is out of range");
  for (Value v : operands.drop_front()) {
    auto s = rankedType(v).getShape();
    if (s.size() != out.size())
      return emitInferError(loc, "loom.concat inputs differ in rank");
    for (size_t i = 0; i < s.size(); ++i)
      if (static_cast<int64_t>(i) != axis && s[i] != out[i])
        return emitInferError(loc, "loom.concat inputs differ outside the "
                                   "axis");
    out[axis] += s[axis];
  }
  inferred.push_back(floatTensor(operands, out));
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  return success();
}

//===----------------------------------------------------------------------===//
// GatherOp / GatherGradOp / ConvertOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto data = rankedType(adaptor.getData()).getShape();
  auto idx = rankedType(adaptor.getIndices()).getShape();
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(data.size()))
    return emitInferError(loc, "loom.gather axis " + Twine(axis) +
                                   " is out of range");
  SmallVector<int64_t> out(data.take_front(axis));
  out.append(idx.begin(), idx.end());
  out.append(data.begin() + axis + 1, data.end());
  inferred.push_back(floatTensor(operands, out));
  return success();
}

LogicalResult GatherOp::verify() {
  if (getAxis() < 0 || getAxis() >= getData().getType().getRank())
    return emitOpError("axis ") << getAxis() << " is out of range";
  return success();
}

LogicalResult GatherGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(operands[2].getType());
  return success();
}

/// `indices` has `data`'s shape except along `axis`, which is in range.
static LogicalResult verifyElementsIndexing(Operation *op, Value data,
                                            Value indices, int64_t axis) {
  ArrayRef<int64_t> d = rankedType(data).getShape(),
                    i = rankedType(indices).getShape();
  if (axis < 0 || axis >= static_cast<int64_t>(d.size()))
    return op->emitOpError("axis ") << axis << " is out of range";
  if (d.size() != i.size())
    return op->emitOpError("indices of rank ")
           << i.size() << " do not index data of rank " << d.size();
  for (size_t k = 0; k < d.size(); ++k)
    if (static_cast<int64_t>(k) != axis && d[k] != i[k])
      return op->emitOpError("indices shape (")
             << i << ") differs from the data's (" << d
             << ") outside axis " << axis;
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(
      floatTensor(operands, rankedType(operands[1]).getShape()));
  return success();
}

LogicalResult GatherElementsOp::verify() {
  return verifyElementsIndexing(*this, getData(), getIndices(), getAxis());
}

LogicalResult GatherElementsGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(operands[2].getType());
  return success();
}

LogicalResult GatherElementsGradOp::verify() {
  if (getGrad().getType().getShape() != getIndices().getType().getShape())
    return emitOpError("gradient and indices differ in shape");
  return verifyElementsIndexing(*this, getLike(), getIndices(), getAxis());
}

/// The shape of the slices `indices` (`[..., k]`) selects from `data`, or a
/// diagnostic.
static FailureOr<SmallVector<int64_t>>
ndSlices(Operation *op, ArrayRef<int64_t> data, ArrayRef<int64_t> indices) {
  if (indices.empty() || indices.back() < 1 ||
      indices.back() > static_cast<int64_t>(data.size())) {
    op->emitOpError("indices of shape (")
        << indices << ") do not name slices of data of rank " << data.size();
    return failure();
  }
  SmallVector<int64_t> out(indices.drop_back());
  out.append(data.begin() + indices.back(), data.end());
  return out;
}

LogicalResult ScatterNdOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(operands[0].getType());
  return success();
}

LogicalResult ScatterNdOp::verify() {
  if (getReduction() != "none" && getReduction() != "add" &&
      getReduction() != "mul")
    return emitOpError("reduction '")
           << getReduction() << "' is not one of none, add, mul";
  auto slices = ndSlices(*this, getData().getType().getShape(),
                         getIndices().getType().getShape());
  if (failed(slices))
    return failure();
  if (ArrayRef<int64_t>(*slices) != getUpdates().getType().getShape())
    return emitOpError("updates of shape (")
           << getUpdates().getType().getShape() << ") for slices of shape ("
           << ArrayRef<int64_t>(*slices) << ")";
  return success();
}

LogicalResult GatherNdOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  ArrayRef<int64_t> data = rankedType(operands[0]).getShape(),
                    idx = rankedType(operands[1]).getShape();
  if (idx.empty() || idx.back() < 1 ||
      idx.back() > static_cast<int64_t>(data.size()))
    return emitInferError(loc, "loom.gather_nd indices do not name slices of "
                               "the data");
  SmallVector<int64_t> out(idx.drop_back());
  out.append(data.begin() + idx.back(), data.end());
  inferred.push_back(floatTensor(operands, out));
  return success();
}

LogicalResult GatherNdOp::verify() {
  return ndSlices(*this, getData().getType().getShape(),
                  getIndices().getType().getShape());
}

LogicalResult
ConvertOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                            ValueRange operands, DictionaryAttr attributes,
                            OpaqueProperties properties, RegionRange regions,
                            SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  if (!adaptor.getToAttr())
    return emitInferError(loc, "loom.convert needs a target type `to`");
  inferred.push_back(RankedTensorType::get(
      rankedType(adaptor.getInput()).getShape(), adaptor.getTo()));
  return success();
}

LogicalResult ConvertOp::verify() {
  Type from = getInput().getType().getElementType(), to = getTo();
  if (to.isInteger(64) && !from.isF32())
    return emitOpError("converts to i64 from f32 only, not from ") << from;
  if (!to.isF32() && !to.isBF16() && !to.isInteger(64))
    return emitOpError("converts to f32, bf16 or i64, not ") << to;
  if (from == to)
    return emitOpError("converts ") << from << " to itself";
  if (getResult().getType().getElementType() != to)
    return emitOpError("result element type ")
           << getResult().getType().getElementType()
           << " differs from the target type " << to;
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError("input and result shapes differ");
  return success();
}
