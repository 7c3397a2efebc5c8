//===- OnnxOps.cpp - One converter per ONNX op type -------------*- C++ -*-===//
//
// Each converter checks what the loom op it builds requires (ranks,
// broadcastable shapes, contraction sizes) before building it, so that
// result-type inference never fails on user input. Shapes are static by the
// time a converter runs (see `GraphImporter::importInto`).
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomOps.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

#include "onnx/defs/tensor_proto_util.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

static std::string shapeText(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

static std::string listText(ArrayRef<int64_t> values) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

template <typename OpTy>
static LogicalResult convertBinary(GraphImporter &g) {
  auto lhs = g.data(0);
  auto rhs = g.data(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(shapeOf(*lhs), shapeOf(*rhs), shape))
    return g.error(g.node().op_type() + " operand shapes " +
                   shapeText(shapeOf(*lhs)) + " and " +
                   shapeText(shapeOf(*rhs)) + " do not broadcast");
  return g.define(0, OpTy::create(g.builder(), g.loc(), *lhs, *rhs));
}

template <typename OpTy>
static LogicalResult convertUnary(GraphImporter &g) {
  auto input = g.data(0);
  if (failed(input))
    return failure();
  return g.define(0, OpTy::create(g.builder(), g.loc(), *input));
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

static Value buildMatmul(GraphImporter &g, Value lhs, Value rhs, bool transA,
                         bool transB) {
  OpBuilder &b = g.builder();
  return MatmulOp::create(b, g.loc(), lhs, rhs,
                          transA ? b.getUnitAttr() : UnitAttr(),
                          transB ? b.getUnitAttr() : UnitAttr());
}

static LogicalResult convertMatMul(GraphImporter &g) {
  auto lhs = g.data(0);
  auto rhs = g.data(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  ArrayRef<int64_t> a = shapeOf(*lhs), w = shapeOf(*rhs);
  if (a.size() < 2 || w.size() != 2)
    return g.error("unsupported MatMul of shapes " + shapeText(a) + " and " +
                       shapeText(w),
                   "loom.matmul needs a left operand of rank >= 2 and a right "
                   "operand of rank 2");
  if (a.back() != w[0])
    return g.error("MatMul contraction sizes differ",
                   "shapes " + shapeText(a) + " and " + shapeText(w));
  return g.define(0, buildMatmul(g, *lhs, *rhs, false, false));
}

static LogicalResult convertGemm(GraphImporter &g) {
  auto lhs = g.data(0);
  auto rhs = g.data(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  bool transA = g.intAttr("transA", 0) != 0;
  bool transB = g.intAttr("transB", 0) != 0;
  double alpha = g.floatAttr("alpha", 1.0f);
  double beta = g.floatAttr("beta", 1.0f);
  ArrayRef<int64_t> a = shapeOf(*lhs), w = shapeOf(*rhs);
  if (a.size() != 2 || w.size() != 2)
    return g.error("Gemm operands must be matrices, got shapes " +
                   shapeText(a) + " and " + shapeText(w));
  int64_t m = transA ? a[1] : a[0], k = transA ? a[0] : a[1];
  int64_t kw = transB ? w[1] : w[0], n = transB ? w[0] : w[1];
  if (k != kw)
    return g.error("Gemm contraction sizes differ",
                   llvm::formatv("{0} vs {1} (shapes {2} and {3}, transA={4}, "
                                 "transB={5})",
                                 k, kw, shapeText(a), shapeText(w),
                                 int(transA), int(transB)));

  OpBuilder &b = g.builder();
  Value result = buildMatmul(g, *lhs, *rhs, transA, transB);
  if (alpha != 1.0)
    result = ScaleOp::create(b, g.loc(), result, b.getF64FloatAttr(alpha));
  if (g.hasInput(2) && beta != 0.0) {
    auto c = g.data(2);
    if (failed(c))
      return failure();
    SmallVector<int64_t> shape;
    SmallVector<int64_t> mn = {m, n};
    if (!OpTrait::util::getBroadcastedShape(mn, shapeOf(*c), shape) ||
        ArrayRef<int64_t>(shape) != ArrayRef<int64_t>(mn))
      return g.error("Gemm bias of shape " + shapeText(shapeOf(*c)) +
                     " does not broadcast to the product's shape " +
                     shapeText(mn));
    Value bias = *c;
    if (beta != 1.0)
      bias = ScaleOp::create(b, g.loc(), bias, b.getF64FloatAttr(beta));
    result = AddOp::create(b, g.loc(), result, bias);
  }
  return g.define(0, result);
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

/// A `loom.reshape` of `input` to the static `outShape`, written with a
/// specification that keeps dimensions shared with the input as `0` so that
/// it survives batch re-sizing.
static LogicalResult buildReshape(GraphImporter &g, Value input,
                                  ArrayRef<int64_t> outShape) {
  ArrayRef<int64_t> inShape = shapeOf(input);
  SmallVector<int64_t> spec = batchAgnosticReshapeSpec(inShape, outShape);
  std::string why;
  auto check = inferReshape(inShape, spec, why);
  if (failed(check) || ArrayRef<int64_t>(*check) != outShape)
    return g.error("internal error in the reshape",
                   "specification " + listText(spec) + " does not reproduce " +
                       shapeText(outShape) + " from " + shapeText(inShape));
  return g.define(0, ReshapeOp::create(g.builder(), g.loc(), input,
                                       g.builder().getDenseI64ArrayAttr(spec)));
}

static LogicalResult convertReshape(GraphImporter &g) {
  auto input = g.data(0);
  if (failed(input))
    return failure();
  SmallVector<int64_t> spec;
  if (g.opset() < 5) {
    const onnx::AttributeProto *shape = g.attr("shape");
    if (!shape)
      return g.error("Reshape has no 'shape' attribute");
    spec.assign(shape->ints().begin(), shape->ints().end());
  } else {
    auto operand = g.constInts(1);
    if (failed(operand))
      return failure();
    spec = *operand;
  }
  if (g.opset() >= 14 && g.intAttr("allowzero", 0) != 0 &&
      llvm::is_contained(spec, 0))
    return g.error("unsupported attribute allowzero=1",
                   "the shape " + listText(spec) + " contains 0");
  std::string why;
  auto outShape = inferReshape(shapeOf(*input), spec, why);
  if (failed(outShape))
    return g.error("cannot reshape " + shapeText(shapeOf(*input)) + " to " +
                       listText(spec),
                   why);
  return buildReshape(g, *input, *outShape);
}

static LogicalResult convertFlatten(GraphImporter &g) {
  auto input = g.data(0);
  if (failed(input))
    return failure();
  ArrayRef<int64_t> in = shapeOf(*input);
  int64_t rank = in.size();
  int64_t axis = g.intAttr("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return g.error(llvm::formatv("unsupported attribute axis={0}",
                                 g.intAttr("axis", 1)),
                   llvm::formatv("the input has rank {0}", rank));
  SmallVector<int64_t> out = {product(in.take_front(axis)),
                              product(in.drop_front(axis))};
  return buildReshape(g, *input, out);
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

static LogicalResult convertIdentity(GraphImporter &g) {
  return g.forward(0, 0);
}

static LogicalResult defineFloatConstant(GraphImporter &g,
                                         ArrayRef<int64_t> shape,
                                         ArrayRef<float> data) {
  if (static_cast<int64_t>(data.size()) != product(shape))
    return g.error(llvm::formatv("Constant holds {0} values for shape {1}",
                                 data.size(), shapeText(shape)));
  auto type = RankedTensorType::get(shape, g.builder().getF32Type());
  auto value = DenseElementsAttr::get(type, data);
  return g.define(0, ConstantOp::create(g.builder(), g.loc(), value));
}

static LogicalResult convertConstant(GraphImporter &g) {
  const onnx::NodeProto &node = g.node();
  if (node.attribute_size() != 1)
    return g.error("Constant needs exactly one value attribute");
  const onnx::AttributeProto &a = node.attribute(0);
  const std::string &name = a.name();
  if (name == "value") {
    const onnx::TensorProto &t = a.t();
    SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
    switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: {
      auto data = onnx::ParseData<float>(&t);
      return defineFloatConstant(g, shape, data);
    }
    case onnx::TensorProto::INT64: {
      auto data = onnx::ParseData<int64_t>(&t);
      g.defineInts(0, SmallVector<int64_t>(data.begin(), data.end()));
      return success();
    }
    case onnx::TensorProto::INT32: {
      auto data = onnx::ParseData<int32_t>(&t);
      g.defineInts(0, SmallVector<int64_t>(data.begin(), data.end()));
      return success();
    }
    default:
      return g.error("unsupported attribute 'value' of element type " +
                         elementTypeName(t.data_type()),
                     "only float32 and integer constants are supported");
    }
  }
  if (name == "value_float")
    return defineFloatConstant(g, {}, {a.f()});
  if (name == "value_floats") {
    SmallVector<float> data(a.floats().begin(), a.floats().end());
    return defineFloatConstant(g, {static_cast<int64_t>(data.size())}, data);
  }
  if (name == "value_int") {
    g.defineInts(0, {a.i()});
    return success();
  }
  if (name == "value_ints") {
    g.defineInts(0, SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
    return success();
  }
  return g.error("unsupported attribute '" + name + "' of Constant");
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

static const OpConverter kConverters[] = {
    {"Add", 7, 17, convertBinary<AddOp>, "loom.add"},
    {"Constant", 1, 17, convertConstant,
     "loom.constant (float32); integer constants only feed shape operands"},
    {"Div", 7, 17, convertBinary<DivOp>, "loom.div"},
    {"Flatten", 1, 17, convertFlatten, "loom.reshape"},
    {"Gemm", 1, 17, convertGemm,
     "loom.matmul [+ loom.scale by alpha] [+ loom.add of C, loom.scale by "
     "beta]"},
    {"Identity", 1, 17, convertIdentity, "forwards its input"},
    {"MatMul", 1, 17, convertMatMul, "loom.matmul (right operand of rank 2)"},
    {"Mul", 7, 17, convertBinary<MulOp>, "loom.mul"},
    {"Relu", 1, 17, convertUnary<ReluOp>, "loom.relu"},
    {"Reshape", 1, 17, convertReshape, "loom.reshape"},
    {"Sigmoid", 1, 17, convertUnary<SigmoidOp>, "loom.sigmoid"},
    {"Sub", 7, 17, convertBinary<SubOp>, "loom.sub"},
    {"Tanh", 1, 17, convertUnary<TanhOp>, "loom.tanh"},
};

ArrayRef<OpConverter> onnx_import::getOpConverters() { return kConverters; }

const OpConverter *onnx_import::lookupOpConverter(StringRef opType,
                                                  int64_t opset) {
  for (const OpConverter &c : kConverters)
    if (opType == c.opType && opset >= c.minOpset && opset <= c.maxOpset)
      return &c;
  return nullptr;
}
