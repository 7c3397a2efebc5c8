//===- LoomOps.cpp - loom dialect operations --------------------*- C++ -*-===//
//
// Verifiers and result-type inference. Every op infers its result type from
// its operands, so a pass that changes argument shapes (the data-parallel
// partition shrinks the batch) can re-infer the whole function.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "ir/OpUtils.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/InterleavedRange.h"

using namespace mlir;
using namespace mlir::loom;

#define GET_OP_CLASSES
#include "ir/LoomOps.cpp.inc"

using namespace mlir::loom::detail;

FailureOr<SmallVector<int64_t>>
mlir::loom::detail::broadcastShapes(ValueRange values) {
  SmallVector<int64_t> shape;
  for (Value v : values) {
    SmallVector<int64_t> next;
    if (!OpTrait::util::getBroadcastedShape(shape, rankedType(v).getShape(),
                                            next))
      return failure();
    shape = next;
  }
  return shape;
}

//===----------------------------------------------------------------------===//
// Helpers shared with passes
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>>
mlir::loom::inferReshape(ArrayRef<int64_t> input, ArrayRef<int64_t> spec,
                         std::string &why) {
  // Sizes from a model file: their products must not wrap.
  int64_t total = 1;
  for (int64_t d : input)
    if (__builtin_mul_overflow(total, d, &total)) {
      why = "the input has more than 2^63 elements";
      return failure();
    }
  SmallVector<int64_t> out;
  int64_t known = 1;
  int inferAt = -1;
  for (auto [i, entry] : llvm::enumerate(spec)) {
    int64_t d = entry;
    if (d == 0) {
      if (i >= input.size()) {
        why = "shape entry 0 at position " + std::to_string(i) +
              " has no input dimension to copy";
        return failure();
      }
      d = input[i];
    } else if (d == -1) {
      if (inferAt >= 0) {
        why = "more than one -1 in the shape";
        return failure();
      }
      inferAt = i;
      out.push_back(-1);
      continue;
    } else if (d < 0) {
      why = "negative shape entry " + std::to_string(d);
      return failure();
    }
    if (__builtin_mul_overflow(known, d, &known)) {
      why = "the shape has more than 2^63 elements";
      return failure();
    }
    out.push_back(d);
  }
  if (inferAt >= 0) {
    if (known == 0 || total % known != 0) {
      why = "cannot infer -1: " + std::to_string(total) +
            " elements are not divisible by " + std::to_string(known);
      return failure();
    }
    out[inferAt] = total / known;
  } else if (known != total) {
    why = "shape has " + std::to_string(known) + " elements but the input has " +
          std::to_string(total);
    return failure();
  }
  return out;
}

SmallVector<int64_t>
mlir::loom::batchAgnosticReshapeSpec(ArrayRef<int64_t> input,
                                     ArrayRef<int64_t> output) {
  SmallVector<int64_t> spec(output.begin(), output.end());
  size_t copied = 0;
  while (copied < input.size() && copied < output.size() &&
         input[copied] == output[copied])
    spec[copied++] = 0;
  // One remaining dimension may absorb a changed batch size.
  if (copied < spec.size() && copied > 0)
    spec[copied] = -1;
  else if (copied == 0 && !spec.empty())
    spec[0] = -1;
  return spec;
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// SameFloatOperandElementType
//===----------------------------------------------------------------------===//

LogicalResult
mlir::loom::trait::impl::verifySameFloatOperandElementType(Operation *op) {
  Type first;
  unsigned firstIndex = 0;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    auto type = dyn_cast<ShapedType>(v.getType());
    if (!type || !isa<FloatType>(type.getElementType()))
      continue;
    if (!first) {
      first = type.getElementType();
      firstIndex = i;
    } else if (type.getElementType() != first) {
      return op->emitOpError("operand #")
             << i << " is " << type.getElementType() << " but operand #"
             << firstIndex << " is " << first
             << ": float operands must have one precision (convert one with "
                "loom.convert)";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto lhs = rankedType(adaptor.getLhs()).getShape();
  auto rhs = rankedType(adaptor.getRhs()).getShape();
  if (lhs.size() < 2 || rhs.size() < 2)
    return emitInferError(loc, "loom.matmul operands must have rank >= 2");
  auto rows = [](ArrayRef<int64_t> s) {
    int64_t r = 1;
    for (int64_t d : s.drop_back())
      r *= d;
    return r;
  };
  bool ta = adaptor.getTransposeLhs(), tb = adaptor.getTransposeRhs();
  int64_t k = ta ? rows(lhs) : lhs.back();
  int64_t m = ta ? lhs.back() : rows(lhs);
  int64_t rk = tb ? rhs.back() : rows(rhs);
  int64_t n = tb ? rows(rhs) : rhs.back();
  if (k != rk)
    return emitInferError(loc, "loom.matmul contraction sizes differ: " +
                                   Twine(k) + " vs " + Twine(rk));
  SmallVector<int64_t> shape;
  if (ta)
    shape = {m, n};
  else {
    shape.assign(lhs.begin(), lhs.end() - 1);
    shape.push_back(n);
  }
  inferred.push_back(floatTensor(operands, shape));
  return success();
}

//===----------------------------------------------------------------------===//
// Element-wise ops
//===----------------------------------------------------------------------===//

static LogicalResult inferBroadcast(MLIRContext *ctx,
                                    std::optional<Location> loc, Value lhs,
                                    Value rhs, SmallVectorImpl<Type> &inferred) {
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(rankedType(lhs).getShape(),
                                          rankedType(rhs).getShape(), shape))
  {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    os << "operand shapes " << llvm::interleaved(rankedType(lhs).getShape(), "x")
       << " and " << llvm::interleaved(rankedType(rhs).getShape(), "x")
       << " do not broadcast";
    return emitInferError(loc, msg);
  }
  inferred.push_back(floatTensor(lhs, shape));
  return success();
}

#define LOOM_BINARY_INFER(OP)                                                  \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,      \
      DictionaryAttr, OpaqueProperties, RegionRange,                           \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferBroadcast(ctx, loc, operands[0], operands[1], inferred);       \
  }
LOOM_BINARY_INFER(AddOp)
LOOM_BINARY_INFER(SubOp)
LOOM_BINARY_INFER(MulOp)
LOOM_BINARY_INFER(DivOp)
#undef LOOM_BINARY_INFER

// Ops whose result has the type of their first operand.
#define LOOM_SAME_AS_FIRST_INFER(OP)                                           \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location>, ValueRange operands,             \
      DictionaryAttr, OpaqueProperties, RegionRange,                           \
      SmallVectorImpl<Type> &inferred) {                                       \
    inferred.push_back(operands[0].getType());                                 \
    return success();                                                          \
  }
LOOM_SAME_AS_FIRST_INFER(CrossEntropyGradOp)
#undef LOOM_SAME_AS_FIRST_INFER

//===----------------------------------------------------------------------===//
// ReshapeOp / SumToOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  std::string why;
  auto shape = inferReshape(rankedType(adaptor.getInput()).getShape(),
                            adaptor.getShape(), why);
  if (failed(shape))
    return emitInferError(loc, "loom.reshape: " + why);
  inferred.push_back(floatTensor(operands, *shape));
  return success();
}

LogicalResult SumToOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                        ValueRange operands, DictionaryAttr,
                                        OpaqueProperties, RegionRange,
                                        SmallVectorImpl<Type> &inferred) {
  inferred.push_back(operands[1].getType());
  return success();
}

LogicalResult SumToOp::verify() {
  SmallVector<int64_t> shape;
  auto in = getInput().getType().getShape();
  auto like = getLike().getType().getShape();
  if (!OpTrait::util::getBroadcastedShape(in, like, shape) ||
      ArrayRef<int64_t>(shape) != in)
    return emitOpError("cannot sum a tensor of shape ")
           << llvm::interleaved(in, "x") << " to shape "
           << llvm::interleaved(like, "x")
           << ": the latter does not broadcast to the former";
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static LogicalResult verifyClassTargets(Operation *op, RankedTensorType logits,
                                        RankedTensorType target) {
  if (logits.getRank() < 1 ||
      target.getShape() != logits.getShape().drop_back())
    return op->emitOpError("target shape ")
           << llvm::interleaved(target.getShape(), "x")
           << " must equal the logits shape "
           << llvm::interleaved(logits.getShape(), "x")
           << " without its last (class) dimension";
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location>, ValueRange, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

/// A loss's `count` covers at least the rows (elements) the op holds.
static LogicalResult verifyCount(Operation *op, std::optional<int64_t> count,
                                 Value counted, StringRef what) {
  int64_t held = cast<RankedTensorType>(counted.getType()).getNumElements();
  if (count && *count < held)
    return op->emitOpError("count ")
           << *count << " is below the " << held << " " << what
           << " the op holds";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyClassTargets(*this, getLogits().getType(),
                                getTarget().getType())))
    return failure();
  return verifyCount(*this, getCount(), getTarget(), "rows");
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyClassTargets(*this, getLogits().getType(),
                                getTarget().getType())))
    return failure();
  return verifyCount(*this, getCount(), getTarget(), "rows");
}

LogicalResult MseOp::verify() {
  return verifyCount(*this, getCount(), getPrediction(), "elements");
}

LogicalResult MseGradOp::verify() {
  return verifyCount(*this, getCount(), getPrediction(), "elements");
}

LogicalResult MseOp::inferReturnTypes(MLIRContext *ctx,
                                      std::optional<Location>, ValueRange,
                                      DictionaryAttr, OpaqueProperties,
                                      RegionRange,
                                      SmallVectorImpl<Type> &inferred) {
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}


//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

LogicalResult SgdOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                      ValueRange operands, DictionaryAttr,
                                      OpaqueProperties, RegionRange,
                                      SmallVectorImpl<Type> &inferred) {
  inferred.push_back(operands[0].getType());
  if (operands.size() > 2)
    inferred.push_back(operands[2].getType());
  return success();
}

LogicalResult SgdOp::verify() {
  if (getGrad().getType() != getParam().getType() ||
      (getMomentumBuffer() &&
       getMomentumBuffer().getType() != getParam().getType()))
    return emitOpError("parameter, gradient and momentum buffer types differ");
  bool hasBuffer = static_cast<bool>(getMomentumBuffer());
  if (hasBuffer != (getMomentum().convertToDouble() != 0.0))
    return emitOpError("a momentum buffer is required exactly when momentum "
                       "is non-zero (momentum = ")
           << getMomentum().convertToDouble() << ")";
  if (getLr().convertToDouble() < 0)
    return emitOpError("learning rate must be non-negative, got ")
           << getLr().convertToDouble();
  return success();
}

LogicalResult AdamwOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                        ValueRange operands, DictionaryAttr,
                                        OpaqueProperties, RegionRange,
                                        SmallVectorImpl<Type> &inferred) {
  inferred.append(3, operands[0].getType());
  return success();
}

LogicalResult AdamwOp::verify() {
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1)
    return emitOpError("betas must lie in [0, 1), got ") << b1 << ", " << b2;
  if (getLr().convertToDouble() < 0 || getEps().convertToDouble() < 0)
    return emitOpError("learning rate and eps must be non-negative");
  return success();
}

/// A bucket's ops return tensors of their operands' types.
static void operandTypes(ValueRange operands,
                         SmallVectorImpl<Type> &inferred) {
  for (Value v : operands)
    inferred.push_back(v.getType());
}

LogicalResult AllReduceStartOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  operandTypes(operands, inferred);
  return success();
}

LogicalResult AllReduceWaitOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  operandTypes(operands, inferred);
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor to reduce");
  if (getInputs().getTypes() != getInFlight().getTypes())
    return emitOpError("results must have the operands' types");
  if (getBucket() < 0)
    return emitOpError("bucket must be non-negative, got ") << getBucket();
  Operation *wait = nullptr;
  for (Value v : getInFlight()) {
    if (!v.hasOneUse())
      return emitOpError("each result must have exactly one use, the "
                         "bucket's loom.all_reduce_wait");
    Operation *user = *v.getUsers().begin();
    if (!isa<AllReduceWaitOp>(user) || (wait && user != wait))
      return emitOpError("each result must have exactly one use, the "
                         "bucket's loom.all_reduce_wait");
    wait = user;
  }
  return success();
}

/// A bucket's block collective: each operand scattered (`scatter`) or
/// gathered along its entry of `dims` over the same group, and each result
/// read once, by the bucket's wait.
template <typename WaitOp>
static LogicalResult verifyBlockStart(Operation *op, ValueRange inputs,
                                      ValueRange inFlight,
                                      ArrayRef<int64_t> dims, int64_t bucket,
                                      bool scatter) {
  if (inputs.empty())
    return op->emitOpError("needs at least one tensor");
  if (inFlight.size() != inputs.size() || dims.size() != inputs.size())
    return op->emitOpError("needs one result and one entry of dims per "
                           "operand, got ")
           << inputs.size() << " operands, " << inFlight.size()
           << " results and " << dims.size() << " dims";
  if (bucket < 0)
    return op->emitOpError("bucket must be non-negative, got ") << bucket;
  Type element = cast<RankedTensorType>(inputs.front().getType())
                     .getElementType();
  int64_t group = 0;
  for (auto [i, in, out] : llvm::enumerate(inputs, inFlight)) {
    auto from = cast<RankedTensorType>(in.getType());
    auto to = cast<RankedTensorType>(out.getType());
    if (from.getElementType() != element || to.getElementType() != element)
      return op->emitOpError("all operands and results must have one element "
                             "type (the bucket is one buffer), got ")
             << from << " and " << to;
    if (!from.hasStaticShape() || !to.hasStaticShape() ||
        from.getRank() != to.getRank())
      return op->emitOpError("operand ")
             << i << " and its result must be static tensors of one rank, got "
             << from << " and " << to;
    int64_t d = dims[i];
    if (d < 0 || d >= from.getRank())
      return op->emitOpError("dims[")
             << i << "] = " << d << " is not a dimension of " << from;
    int64_t whole = scatter ? from.getDimSize(d) : to.getDimSize(d);
    int64_t block = scatter ? to.getDimSize(d) : from.getDimSize(d);
    bool sameElsewhere = true;
    for (int64_t k = 0; k < from.getRank(); ++k)
      if (k != d && from.getDimSize(k) != to.getDimSize(k))
        sameElsewhere = false;
    int64_t n = block > 0 && whole % block == 0 ? whole / block : 0;
    if (!sameElsewhere || n == 0 || (group && n != group))
      return op->emitOpError("result ")
             << i << " (" << to << ") is not operand " << i << " (" << from
             << ") " << (scatter ? "scattered" : "gathered") << " along dim "
             << d << (group ? " over the bucket's group" : "");
    group = n;
  }
  Operation *wait = nullptr;
  for (Value v : inFlight) {
    Operation *user = v.hasOneUse() ? *v.getUsers().begin() : nullptr;
    if (!user || !isa<WaitOp>(user) || (wait && user != wait))
      return op->emitOpError("each result must have exactly one use, the "
                             "bucket's ")
             << WaitOp::getOperationName();
    wait = user;
  }
  return success();
}

/// A bucket's wait (of any kind): all the results of one start of the same
/// bucket.
template <typename StartOp>
static LogicalResult verifyBlockWait(Operation *op, ValueRange inFlight,
                                     int64_t bucket) {
  if (inFlight.empty())
    return op->emitOpError("needs the results of a ")
           << StartOp::getOperationName();
  auto start = inFlight.front().getDefiningOp<StartOp>();
  if (!start || start.getInFlight() != inFlight)
    return op->emitOpError("operands must be all the results of one ")
           << StartOp::getOperationName() << ", in order";
  if (start.getBucket() != bucket)
    return op->emitOpError("waits for bucket ")
           << bucket << " but its operands are in flight in bucket "
           << start.getBucket();
  return success();
}

BlockBucket mlir::loom::blockBucketOf(Operation *start) {
  if (auto rs = dyn_cast<ReduceScatterStartOp>(start))
    return {true, rs.getGridAxes(), rs.getDims(),
            static_cast<int64_t>(rs.getBucket())};
  auto ag = cast<AllGatherStartOp>(start);
  return {false, ag.getGridAxes(), ag.getDims(),
          static_cast<int64_t>(ag.getBucket())};
}

LogicalResult ReduceScatterStartOp::verify() {
  if (!getInputs().empty() &&
      !cast<RankedTensorType>(getInputs().front().getType())
           .getElementType()
           .isF32())
    return emitOpError("sums f32 tensors only");
  return verifyBlockStart<ReduceScatterWaitOp>(getOperation(), getInputs(),
                                               getInFlight(), getDims(),
                                               getBucket(), /*scatter=*/true);
}

LogicalResult AllGatherStartOp::verify() {
  return verifyBlockStart<AllGatherWaitOp>(getOperation(), getInputs(),
                                           getInFlight(), getDims(),
                                           getBucket(), /*scatter=*/false);
}

LogicalResult ReduceScatterWaitOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  operandTypes(operands, inferred);
  return success();
}

LogicalResult AllGatherWaitOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  operandTypes(operands, inferred);
  return success();
}

LogicalResult ReduceScatterWaitOp::verify() {
  return verifyBlockWait<ReduceScatterStartOp>(getOperation(), getInFlight(),
                                               getBucket());
}

LogicalResult AllGatherWaitOp::verify() {
  return verifyBlockWait<AllGatherStartOp>(getOperation(), getInFlight(),
                                           getBucket());
}

LogicalResult AllReduceWaitOp::verify() {
  if (getInFlight().getTypes() != getResults().getTypes())
    return emitOpError("results must have the operands' types");
  return verifyBlockWait<AllReduceStartOp>(getOperation(), getInFlight(),
                                           getBucket());
}

std::optional<unsigned> mlir::loom::shapeOnlyOperand(Operation *op) {
  if (isa<SumToOp, BroadcastLikeOp, SliceGradOp>(op))
    return 1;
  if (isa<GatherGradOp, GatherElementsGradOp, Conv2dGradInputOp,
          Conv2dGradFilterOp>(op))
    return 2;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// MicroBatchOp
//===----------------------------------------------------------------------===//

LogicalResult MicroBatchOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto type = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t axis = adaptor.getAxis(), count = adaptor.getCount();
  if (!type || axis < 0 || axis >= type.getRank() || count < 1 ||
      type.isDynamicDim(axis) || type.getDimSize(axis) % count != 0)
    return emitInferError(loc, "loom.micro_batch: " + std::to_string(count) +
                                   " equal blocks along axis " +
                                   std::to_string(axis) + " do not fit");
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] /= count;
  inferred.push_back(type.clone(shape));
  return success();
}

LogicalResult MicroBatchOp::verify() {
  if (getIndex() < 0 || getIndex() >= getCount())
    return emitOpError("index ")
           << getIndex() << " is not one of the " << getCount()
           << " micro-batches";
  return success();
}
