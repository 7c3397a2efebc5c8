//===- OnnxValueOps.cpp - Ops that produce or forward values ----*- C++ -*-===//
//
// Converters for ONNX ops whose result is a known value or their input:
// Identity, Dropout (ratio 0), Shape, Size, Constant, ConstantOfShape. With
// static shapes these fold to constants; only a too-large ConstantOfShape
// becomes a loom op.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

#include "onnx/defs/tensor_proto_util.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

//===----------------------------------------------------------------------===//
// Converters
//===----------------------------------------------------------------------===//

static LogicalResult convertIdentity(GraphImporter &g) {
  // A deduplicated parameter is an argument already.
  if (g.outputIsParameter(0))
    return success();
  return g.forward(0, 0);
}

static LogicalResult convertShape(GraphImporter &g) {
  auto shape = inputShape(g);
  if (failed(shape))
    return failure();
  int64_t rank = shape->size();
  int64_t start = g.intAttr("start", 0), end = g.intAttr("end", rank);
  if (start < 0)
    start = std::max<int64_t>(start + rank, 0);
  if (end < 0)
    end = std::max<int64_t>(end + rank, 0);
  start = std::min(start, rank);
  end = std::clamp(end, start, rank);
  g.defineInts(
      0, SmallVector<int64_t>(shape->begin() + start, shape->begin() + end));
  return success();
}

static LogicalResult convertSize(GraphImporter &g) {
  auto shape = inputShape(g);
  if (failed(shape))
    return failure();
  g.defineInts(0, {product(*shape)});
  return success();
}

static LogicalResult convertDropout(GraphImporter &g) {
  // From opset 12 the ratio and training mode are inputs; in training mode a
  // non-zero ratio would drop activations.
  if (g.opset() >= 12 && g.hasInput(2)) {
    const ConstTensor *training = g.constant(2);
    if (!training)
      return g.error("unsupported Dropout with a training_mode computed at "
                     "run time");
    if (training->numElements() == 1 && training->get(0) != 0) {
      double ratio = 0.5;
      if (g.hasInput(1)) {
        const ConstTensor *r = g.constant(1);
        if (!r || r->numElements() != 1)
          return g.error("unsupported Dropout with a ratio computed at run "
                         "time");
        ratio = r->get(0);
      }
      if (ratio != 0)
        return g.error(
            llvm::formatv("unsupported Dropout with ratio {0} in training mode",
                          ratio),
            "loom has no dropout; export with dropout probability 0");
    }
  }
  if (g.outputUsed(1)) {
    // Nothing is dropped, so the mask is all true: a known value (bool from
    // opset 10, float ones before). Before opset 7 `is_test = 0` (the
    // default) means training with the `ratio` attribute.
    if (g.opset() < 7)
      return g.error("unsupported Dropout mask output in opset " +
                         std::to_string(g.opset()),
                     "only the first output may be used before opset 7");
    auto shape = inputShape(g);
    if (failed(shape))
      return failure();
    int64_t n = product(*shape);
    if (n > kMaxFoldedElements)
      return g.error("unsupported Dropout mask output of shape " +
                         shapeText(*shape),
                     llvm::formatv("the all-true mask is only built up to {0} "
                                   "elements",
                                   kMaxFoldedElements));
    if (g.opset() < 10) {
      g.defineConst(1, ConstTensor::ofFloats(*shape, std::vector<float>(n, 1)));
    } else {
      ConstTensor mask = ConstTensor::ofInts(*shape, std::vector<int64_t>(n, 1));
      mask.kind = ConstTensor::Kind::Bool;
      g.defineConst(1, std::move(mask));
    }
  }
  return g.forward(0, 0);
}

static LogicalResult convertConstantOfShape(GraphImporter &g) {
  // Small shapes folded already (OnnxFolding.cpp); this is a big splat.
  auto shape = g.constInts(0);
  if (failed(shape))
    return failure();
  float value = 0.0f;
  if (const onnx::AttributeProto *a = g.attr("value")) {
    if (a->t().data_type() != onnx::TensorProto::FLOAT)
      return g.error("cannot fold ConstantOfShape of " +
                         elementTypeName(a->t().data_type()) + " and shape " +
                         listText(*shape),
                     llvm::formatv("the result has more than {0} elements",
                                   kMaxFoldedElements));
    auto data = onnx::ParseData<float>(&a->t());
    if (data.size() != 1)
      return g.error("ConstantOfShape value must hold one element");
    value = data[0];
  }
  auto type = RankedTensorType::get(*shape, g.builder().getF32Type());
  return g.define(0, ConstantOp::create(g.builder(), g.loc(),
                                        DenseElementsAttr::get(type, value)));
}

static LogicalResult convertConstant(GraphImporter &g) {
  // Constants have no inputs and always fold (OnnxFolding.cpp).
  return g.error("internal error: Constant was not folded");
}

//===----------------------------------------------------------------------===//
// The family's table
//===----------------------------------------------------------------------===//

static const OpConverter kValueConverters[] = {
    {"Constant", 1, 17, convertConstant,
     "a known value (float32, int64, int32, bool); float ones become "
     "loom.constant where used as data"},
    {"ConstantOfShape", 9, 17, convertConstantOfShape,
     "a known value; loom.constant splat when too large to fold"},
    {"Dropout", 1, 17, convertDropout,
     "forwards its input (ratio 0 or inference mode); the mask is a known "
     "all-true value"},
    {"Identity", 1, 17, convertIdentity,
     "forwards its input; of a parameter under a parameter's name, a "
     "parameter of its own (eval-mode exports deduplicate equal ones)"},
    {"Shape", 1, 17, convertShape, "a known int64 value (static shapes)"},
    {"Size", 1, 17, convertSize, "a known int64 value (static shapes)"},
};

ArrayRef<OpConverter> onnx_import::getValueOpConverters() {
  return kValueConverters;
}
