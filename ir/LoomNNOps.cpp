//===- LoomNNOps.cpp - Neural-network layers and their backward ----------===//

#include "ir/LoomOps.h"
#include "ir/OpUtils.h"

#include "llvm/Support/InterleavedRange.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::detail;

// Ops whose results have the types of some of their operands.
#define LOOM_INFER_LIKE_OPERANDS(OP, ...)                                      \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location>, ValueRange operands,             \
      DictionaryAttr, OpaqueProperties, RegionRange,                           \
      SmallVectorImpl<Type> &inferred) {                                       \
    for (int i : {__VA_ARGS__})                                                \
      inferred.push_back(operands[i].getType());                               \
    return success();                                                          \
  }
LOOM_INFER_LIKE_OPERANDS(LayerNormOp, 0)
LOOM_INFER_LIKE_OPERANDS(LayerNormGradOp, 1, 2, 2)
LOOM_INFER_LIKE_OPERANDS(RmsNormOp, 0)
LOOM_INFER_LIKE_OPERANDS(RmsNormGradOp, 1, 2)
LOOM_INFER_LIKE_OPERANDS(BatchNormOp, 0)
LOOM_INFER_LIKE_OPERANDS(BatchNormGradOp, 1, 2, 2)
LOOM_INFER_LIKE_OPERANDS(Conv2dGradInputOp, 2)
LOOM_INFER_LIKE_OPERANDS(Conv2dGradFilterOp, 2)
LOOM_INFER_LIKE_OPERANDS(MaxPool2dGradOp, 1)
LOOM_INFER_LIKE_OPERANDS(AttentionGradOp, 1, 2, 3)
#undef LOOM_INFER_LIKE_OPERANDS

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  if (getAxis() < 0 || getAxis() >= getInput().getType().getRank())
    return emitOpError("axis ") << getAxis() << " is out of range";
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisations
//===----------------------------------------------------------------------===//

/// `param` must have the shape of `input`'s dimensions from `axis` on.
static LogicalResult verifyNormParam(Operation *op, RankedTensorType input,
                                     int64_t axis, Type param,
                                     StringRef what) {
  if (axis < 0 || axis >= input.getRank())
    return op->emitOpError("axis ") << axis << " is out of range";
  auto shape = cast<RankedTensorType>(param).getShape();
  if (shape != input.getShape().drop_front(axis))
    return op->emitOpError() << what << " shape "
                             << llvm::interleaved(shape, "x")
                             << " must equal the normalised dimensions "
                             << llvm::interleaved(
                                    input.getShape().drop_front(axis), "x");
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyNormParam(*this, getInput().getType(), getAxis(),
                             getScale().getType(), "scale")))
    return failure();
  if (getBias())
    return verifyNormParam(*this, getInput().getType(), getAxis(),
                           getBias().getType(), "bias");
  return success();
}

LogicalResult RmsNormOp::verify() {
  return verifyNormParam(*this, getInput().getType(), getAxis(),
                         getScale().getType(), "scale");
}

LogicalResult BatchNormOp::verify() {
  auto in = getInput().getType();
  if (in.getRank() < 2)
    return emitOpError("input must be N x C x ..., got rank ")
           << in.getRank();
  for (Type t : {getScale().getType(), getBias().getType()}) {
    auto s = cast<RankedTensorType>(t).getShape();
    if (s.size() != 1 || s[0] != in.getDimSize(1))
      return emitOpError("scale and bias must have shape [")
             << in.getDimSize(1) << "]";
  }
  bool named = getRunningMean().has_value();
  if (named != getRunningVar().has_value() ||
      named != getMomentum().has_value())
    return emitOpError("running_mean, running_var and momentum go together");
  double momentum = named ? getMomentum()->convertToDouble() : 0.0;
  if (!(momentum >= 0.0 && momentum <= 1.0))
    return emitOpError("momentum must lie in [0, 1], got ") << momentum;
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Output size of a window of `kernel` (dilated by `dilation`) sliding by
/// `stride` over `size` padded by `before` and `after`, or failure.
static FailureOr<int64_t> windowOutput(int64_t size, int64_t kernel,
                                       int64_t stride, int64_t dilation,
                                       int64_t before, int64_t after) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t padded = size + before + after;
  if (kernel < 1 || stride < 1 || dilation < 1 || before < 0 || after < 0 ||
      padded < span)
    return failure();
  return (padded - span) / stride + 1;
}

static LogicalResult checkWindowAttrs(ArrayRef<int64_t> strides,
                                      ArrayRef<int64_t> pads,
                                      ArrayRef<int64_t> dilations,
                                      std::string &why) {
  if (strides.size() != 2 || pads.size() != 4 || dilations.size() != 2) {
    why = "expected 2 strides, 4 pads [top, left, bottom, right] and 2 "
          "dilations";
    return failure();
  }
  return success();
}

LogicalResult Conv2dOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto x = rankedType(adaptor.getInput()).getShape();
  auto w = rankedType(adaptor.getFilter()).getShape();
  std::string why;
  if (x.size() != 4 || w.size() != 4)
    return emitInferError(loc, "loom.conv2d needs NCHW input and OIHW filter");
  if (failed(checkWindowAttrs(adaptor.getStrides(), adaptor.getPads(),
                              adaptor.getDilations(), why)))
    return emitInferError(loc, "loom.conv2d: " + why);
  int64_t groups = adaptor.getGroups();
  if (groups < 1 || x[1] % groups || w[0] % groups || w[1] * groups != x[1])
    return emitInferError(loc, "loom.conv2d: channels " + Twine(x[1]) +
                                   " do not match filter " + Twine(w[1]) +
                                   " x groups " + Twine(groups));
  auto s = adaptor.getStrides(), p = adaptor.getPads(),
       d = adaptor.getDilations();
  auto h = windowOutput(x[2], w[2], s[0], d[0], p[0], p[2]);
  auto wd = windowOutput(x[3], w[3], s[1], d[1], p[1], p[3]);
  if (failed(h) || failed(wd))
    return emitInferError(loc, "loom.conv2d: the window does not fit the "
                               "padded input");
  inferred.push_back(floatTensor(operands, {x[0], w[0], *h, *wd}));
  return success();
}

LogicalResult Conv2dOp::verify() {
  std::string why;
  if (failed(checkWindowAttrs(getStrides(), getPads(), getDilations(), why)))
    return emitOpError(why);
  return success();
}

LogicalResult MaxPool2dOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto x = rankedType(adaptor.getInput()).getShape();
  auto k = adaptor.getKernel(), s = adaptor.getStrides(), p = adaptor.getPads();
  if (x.size() != 4 || k.size() != 2 || s.size() != 2 || p.size() != 4)
    return emitInferError(loc, "loom.max_pool2d needs an NCHW input, 2 kernel "
                               "sizes, 2 strides and 4 pads");
  auto h = windowOutput(x[2], k[0], s[0], 1, p[0], p[2]);
  auto w = windowOutput(x[3], k[1], s[1], 1, p[1], p[3]);
  if (failed(h) || failed(w))
    return emitInferError(loc, "loom.max_pool2d: the window does not fit "
                               "the padded input");
  inferred.push_back(floatTensor(operands, {x[0], x[1], *h, *w}));
  return success();
}

LogicalResult MaxPool2dOp::verify() {
  auto p = getPads(), k = getKernel();
  if (p.size() == 4 && k.size() == 2 &&
      (p[0] >= k[0] || p[2] >= k[0] || p[1] >= k[1] || p[3] >= k[1]))
    return emitOpError("padding must be smaller than the kernel");
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes, properties, regions);
  auto q = rankedType(adaptor.getQuery()).getShape();
  auto v = rankedType(adaptor.getValue()).getShape();
  if (q.size() < 2 || v.size() != q.size())
    return emitInferError(loc, "loom.attention needs q, k, v of equal rank "
                               ">= 2");
  SmallVector<int64_t> out(q.drop_back());
  out.push_back(v.back());
  inferred.push_back(floatTensor(operands, out));
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = getQuery().getType().getShape();
  auto k = getKey().getType().getShape();
  auto v = getValue().getType().getShape();
  if (k.size() != q.size() || v.size() != q.size() ||
      q.drop_back(2) != k.drop_back(2) || k.drop_back(2) != v.drop_back(2))
    return emitOpError("q, k and v must share their leading dimensions");
  if (q.back() != k.back())
    return emitOpError("q and k head sizes differ: ")
           << q.back() << " vs " << k.back();
  if (k[k.size() - 2] != v[v.size() - 2])
    return emitOpError("k and v sequence lengths differ");
  if (getCausal() && q[q.size() - 2] != k[k.size() - 2])
    return emitOpError("causal attention needs equal query and key lengths");
  return success();
}
