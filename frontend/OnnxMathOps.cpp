//===- OnnxMathOps.cpp - Element-wise, linear algebra, reductions -*- C++
//-*-===//
//
// Converters for arithmetic ONNX ops. Each checks what the loom op it builds
// requires (ranks, broadcastable shapes, contraction sizes) first, so that
// result-type inference never fails on user input. Nodes whose inputs are
// all known were folded before their converter runs (OnnxFolding.cpp).
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

template <typename OpTy> static LogicalResult convertBinary(GraphImporter &g) {
  // Integers computed at run time (position ids from a mask) stay integers
  // held in f32 through Add, Sub and Mul.
  StringRef opType = g.node().op_type();
  if ((opType == "Add" || opType == "Sub" || opType == "Mul") &&
      g.isIntegral(0) && g.isIntegral(1) &&
      (g.runtimeValue(0) || g.runtimeValue(1))) {
    auto lhs = g.numeric(0), rhs = g.numeric(1);
    if (failed(lhs) || failed(rhs))
      return failure();
    if (failed(broadcastShape(shapeOf(*lhs), shapeOf(*rhs))))
      return g.shapeError(opType + " operand shapes " +
                          shapeText(shapeOf(*lhs)) + " and " +
                          shapeText(shapeOf(*rhs)) + " do not broadcast");
    return g.defineConvertedInts(
        0, OpTy::create(g.builder(), g.loc(), *lhs, *rhs));
  }
  if (opType == "Pow" && g.isIntegral(0) && !g.allInputsConstant()) {
    // An integer base gives integers: the power, truncated toward zero
    // (numpy's and ONNX Runtime's cast), held in f32.
    auto base = g.numeric(0), exponent = g.numeric(1);
    if (failed(base) || failed(exponent))
      return failure();
    if (failed(broadcastShape(shapeOf(*base), shapeOf(*exponent))))
      return g.shapeError("Pow operand shapes " + shapeText(shapeOf(*base)) +
                          " and " + shapeText(shapeOf(*exponent)) +
                          " do not broadcast");
    OpBuilder &b = g.builder();
    Value power = PowOp::create(b, g.loc(), *base, *exponent);
    return g.defineConvertedInts(0, TruncOp::create(b, g.loc(), power));
  }
  auto lhs = g.data(0);
  // Pow's exponent may be an integer tensor (ONNX's T2).
  FailureOr<Value> rhs = failure();
  const ConstTensor *exponent = g.constant(1);
  if (g.node().op_type() == "Pow" && exponent && !exponent->isFloat())
    rhs = g.materialize(*exponent);
  else
    rhs = g.data(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  if (failed(broadcastShape(shapeOf(*lhs), shapeOf(*rhs))))
    return g.shapeError(g.node().op_type() + " operand shapes " +
                        shapeText(shapeOf(*lhs)) + " and " +
                        shapeText(shapeOf(*rhs)) + " do not broadcast");
  return g.define(0, OpTy::create(g.builder(), g.loc(), *lhs, *rhs));
}

template <typename OpTy> static LogicalResult convertUnary(GraphImporter &g) {
  auto input = g.data(0);
  if (failed(input))
    return failure();
  return g.define(0, OpTy::create(g.builder(), g.loc(), *input));
}

FailureOr<Value>
onnx_import::chainInputs(GraphImporter &g,
                         llvm::function_ref<Value(Value, Value)> combine) {
  auto first = g.data(0);
  if (failed(first))
    return failure();
  Value result = *first;
  for (int i = 1, n = g.node().input_size(); i < n; ++i) {
    auto next = g.data(i);
    if (failed(next))
      return failure();
    if (failed(broadcastShape(shapeOf(result), shapeOf(*next))))
      return g.shapeError(g.node().op_type() + " operand shapes " +
                          shapeText(shapeOf(result)) + " and " +
                          shapeText(shapeOf(*next)) + " do not broadcast");
    result = combine(result, *next);
  }
  return result;
}

static LogicalResult convertMaxMin(GraphImporter &g) {
  bool isMax = g.node().op_type() == "Max";
  int n = g.node().input_size();
  if (n == 2)
    return isMax ? convertBinary<MaxOp>(g) : convertBinary<MinOp>(g);
  if (n == 1)
    return g.forward(0, 0);
  // More inputs: the two-input form, left to right (on a tie the gradient
  // goes to the later operand, as for two).
  auto result = chainInputs(g, [&](Value acc, Value next) -> Value {
    if (isMax)
      return MaxOp::create(g.builder(), g.loc(), acc, next);
    return MinOp::create(g.builder(), g.loc(), acc, next);
  });
  if (failed(result))
    return failure();
  return g.define(0, *result);
}

/// `Where(condition, x, y)`: the boolean condition (known, or computed at
/// run time as an f32 0/1 mask) selects with `loom.select`.
static LogicalResult convertWhere(GraphImporter &g) {
  auto cond = g.numeric(0);
  if (failed(cond))
    return failure();
  Value mask = *cond;
  bool ints = g.isIntegral(1) && g.isIntegral(2);
  auto x = ints ? g.numeric(1) : g.data(1);
  auto y = ints ? g.numeric(2) : g.data(2);
  if (failed(x) || failed(y))
    return failure();
  auto xy = broadcastShape(shapeOf(*x), shapeOf(*y));
  if (failed(xy) || failed(broadcastShape(shapeOf(mask), *xy)))
    return g.shapeError("Where operand shapes " + shapeText(shapeOf(mask)) +
                        ", " + shapeText(shapeOf(*x)) + " and " +
                        shapeText(shapeOf(*y)) + " do not broadcast");
  Value selected = SelectOp::create(g.builder(), g.loc(), mask, *x, *y);
  return ints ? g.defineConvertedInts(0, selected) : g.define(0, selected);
}

/// Comparisons of values computed at run time: `loom.equal`, `loom.less`,
/// `loom.less_equal` (operands swapped for Greater*), a bool held as 0/1.
static LogicalResult convertCompare(GraphImporter &g) {
  auto a = g.numeric(0), b = g.numeric(1);
  if (failed(a) || failed(b))
    return failure();
  if (failed(broadcastShape(shapeOf(*a), shapeOf(*b))))
    return g.shapeError(g.node().op_type() + " operand shapes " +
                        shapeText(shapeOf(*a)) + " and " +
                        shapeText(shapeOf(*b)) + " do not broadcast");
  StringRef op = g.node().op_type();
  OpBuilder &builder = g.builder();
  Value r;
  if (op == "Equal")
    r = EqualOp::create(builder, g.loc(), *a, *b);
  else if (op == "Less")
    r = LessOp::create(builder, g.loc(), *a, *b);
  else if (op == "Greater")
    r = LessOp::create(builder, g.loc(), *b, *a);
  else if (op == "LessOrEqual")
    r = LessEqualOp::create(builder, g.loc(), *a, *b);
  else
    r = LessEqualOp::create(builder, g.loc(), *b, *a);
  return g.defineConvertedInts(0, r);
}

/// Logic on bools computed at run time, held as 0/1: Not is 1 - x, And a
/// product, Or a max, Xor "not equal".
static LogicalResult convertLogic(GraphImporter &g) {
  StringRef op = g.node().op_type();
  auto a = g.numeric(0);
  if (failed(a))
    return failure();
  OpBuilder &b = g.builder();
  Value one = g.scalar(1.0f);
  if (op == "Not")
    return g.defineConvertedInts(0, SubOp::create(b, g.loc(), one, *a));
  auto c = g.numeric(1);
  if (failed(c))
    return failure();
  if (failed(broadcastShape(shapeOf(*a), shapeOf(*c))))
    return g.shapeError(op + " operand shapes " + shapeText(shapeOf(*a)) +
                        " and " + shapeText(shapeOf(*c)) + " do not broadcast");
  Value r;
  if (op == "And")
    r = MulOp::create(b, g.loc(), *a, *c);
  else if (op == "Or")
    r = MaxOp::create(b, g.loc(), *a, *c);
  else
    r = SubOp::create(b, g.loc(), one, EqualOp::create(b, g.loc(), *a, *c));
  return g.defineConvertedInts(0, r);
}

/// Ops that loom has no runtime equivalent for: they only fold.
LogicalResult onnx_import::convertFoldOnly(GraphImporter &g) {
  std::string runtime;
  for (int i = 0; i < g.node().input_size(); ++i)
    if (g.hasInput(i) && !g.constant(i)) {
      runtime = g.node().input(i);
      break;
    }
  if (runtime.empty())
    return g.error("cannot fold " + g.node().op_type(),
                   llvm::formatv("the result has more than {0} elements",
                                 kMaxFoldedElements));
  // A float initializer trained as a parameter is not a constant.
  bool param = g.isInitializer(runtime);
  return g.error(
      "unsupported " + g.node().op_type() + " of a value computed at run time",
      "loom has no such op; the importer only folds it when all "
      "inputs are constants, and input '" +
          runtime + "' is " +
          (param ? "a float32 initializer trained as a parameter (--freeze "
                   "it to make it a constant)"
                 : "not"));
}

/// Cast of a runtime value: float to float is the identity, int64 to float
/// is `loom.convert`.
static LogicalResult convertCast(GraphImporter &g) {
  int64_t to = g.intAttr("to", 0);
  int32_t from = g.inputElementType(0);
  Value in = g.runtimeValue(0);
  if (!in)
    return g.data(0); // Reports why there is no value.
  Type elem = cast<RankedTensorType>(in.getType()).getElementType();
  // float64 is held in float32 (docs/frontend.md, "Element types").
  if (to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE) {
    if (elem.isF32())
      return g.define(0, in);
    if (elem.isInteger(64))
      return g.define(0, ConvertOp::create(g.builder(), g.loc(), in,
                                           g.builder().getF32Type()));
  }
  if (to == onnx::TensorProto::FLOAT16 && elem.isF32() &&
      !g.holdsConvertedInts(0))
    return g.define(0, RoundF16Op::create(g.builder(), g.loc(), in));
  if (to == onnx::TensorProto::BFLOAT16 && elem.isF32() &&
      !g.holdsConvertedInts(0)) {
    // Rounded to bfloat16, held in float32.
    OpBuilder &b = g.builder();
    Value half = ConvertOp::create(b, g.loc(), in, b.getBF16Type());
    return g.define(0, ConvertOp::create(b, g.loc(), half, b.getF32Type()));
  }
  bool toInt = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32;
  if (to == onnx::TensorProto::INT64 && elem.isInteger(64))
    return g.forward(0, 0);
  if (toInt && g.holdsConvertedInts(0))
    return g.forward(0, 0);
  if (to == onnx::TensorProto::INT32 && elem.isInteger(64))
    return g.defineConvertedInts(
        0, ConvertOp::create(g.builder(), g.loc(), in, g.builder().getF32Type()));
  if (toInt && elem.isF32())
    // Floats to integers truncate toward zero, held in f32 (exact below
    // 2^24).
    return g.defineConvertedInts(
        0, TruncOp::create(g.builder(), g.loc(), in));
  if (to == onnx::TensorProto::BOOL && (elem.isF32() || elem.isInteger(64))) {
    // x != 0, held as 0/1.
    auto x = g.numeric(0);
    if (failed(x))
      return failure();
    OpBuilder &b = g.builder();
    Value zero = g.scalar(0.0f);
    Value one = g.scalar(1.0f);
    return g.defineConvertedInts(
        0, SubOp::create(b, g.loc(), one, EqualOp::create(b, g.loc(), *x, zero)));
  }
  return g.error(
      llvm::formatv("unsupported Cast from {0} to {1}", elementTypeName(from),
                    elementTypeName(static_cast<int32_t>(to))),
      "at run time loom casts int64 to float32 or float64, int64 to int32, "
      "integers and bools it computed to any of float32, int64, int32 and "
      "bool, floats to float64, float16, bfloat16, int64 and int32 "
      "(truncated), and anything to bool");
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
  SmallVector<int64_t> a(shapeOf(*lhs)), w(shapeOf(*rhs));
  if (a.empty() || w.empty())
    return g.error("unsupported MatMul of shapes " + shapeText(a) + " and " +
                   shapeText(w) + ": scalars are not matrices");
  // Vectors become matrices ([K] -> [1, K] on the left, [K, 1] on the
  // right) and the added dimension is dropped from the result, as NumPy.
  bool vecA = a.size() == 1, vecB = w.size() == 1;
  Value l = *lhs, r = *rhs;
  if (vecA) {
    a.insert(a.begin(), 1);
    auto reshaped = reshapeTo(g, l, a);
    if (failed(reshaped))
      return failure();
    l = *reshaped;
  }
  if (vecB) {
    w.push_back(1);
    auto reshaped = reshapeTo(g, r, w);
    if (failed(reshaped))
      return failure();
    r = *reshaped;
  }
  if (a.back() != w[w.size() - 2])
    return g.error("MatMul contraction sizes differ",
                   "shapes " + shapeText(shapeOf(*lhs)) + " and " +
                       shapeText(shapeOf(*rhs)));
  Value result;
  if (w.size() == 2) {
    result = buildMatmul(g, l, r, false, false);
  } else {
    if (failed(broadcastShape(ArrayRef<int64_t>(a).drop_back(2),
                              ArrayRef<int64_t>(w).drop_back(2))))
      return g.shapeError("MatMul batch dimensions do not broadcast",
                          "shapes " + shapeText(shapeOf(*lhs)) + " and " +
                              shapeText(shapeOf(*rhs)));
    result = BatchMatmulOp::create(g.builder(), g.loc(), l, r, UnitAttr(),
                                   UnitAttr());
  }
  if (vecA || vecB) {
    SmallVector<int64_t> out(shapeOf(result));
    if (vecB)
      out.pop_back();
    if (vecA)
      out.erase(out.end() - (vecB ? 1 : 2));
    auto reshaped = reshapeTo(g, result, out);
    if (failed(reshaped))
      return failure();
    result = *reshaped;
  }
  return g.define(0, result);
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
                                 k, kw, shapeText(a), shapeText(w), int(transA),
                                 int(transB)));

  OpBuilder &b = g.builder();
  Value result = buildMatmul(g, *lhs, *rhs, transA, transB);
  if (alpha != 1.0)
    result = ScaleOp::create(b, g.loc(), result, b.getF64FloatAttr(alpha));
  if (g.hasInput(2) && beta != 0.0) {
    auto c = g.data(2);
    if (failed(c))
      return failure();
    SmallVector<int64_t> mn = {m, n};
    auto shape = broadcastShape(mn, shapeOf(*c));
    if (failed(shape) || ArrayRef<int64_t>(*shape) != ArrayRef<int64_t>(mn))
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
// Softmax and reductions
//===----------------------------------------------------------------------===//

static LogicalResult convertSoftmax(GraphImporter &g) {
  auto input = g.data(0);
  if (failed(input))
    return failure();
  int64_t rank = shapeOf(*input).size();
  int64_t raw = g.intAttr("axis", g.opset() >= 13 ? -1 : 1);
  auto axis = normalizeAxis(raw, rank);
  if (failed(axis))
    return g.error(llvm::formatv("unsupported attribute axis={0}", raw),
                   llvm::formatv("the input has rank {0}", rank));
  // Before opset 13, Softmax normalises over all dimensions from `axis` on
  // (the input coerced to 2-D); that is a softmax along one axis only when
  // the later dimensions are 1.
  if (g.opset() < 13 && product(shapeOf(*input).drop_front(*axis + 1)) != 1)
    return g.error(
        llvm::formatv("unsupported Softmax axis={0} of a {1} input in opset "
                      "{2}",
                      raw, shapeText(shapeOf(*input)), g.opset()),
        "before opset 13 Softmax normalises over all dimensions from axis on; "
        "only the last axis is supported (re-export with opset >= 13)");
  return g.define(0, SoftmaxOp::create(g.builder(), g.loc(), *input,
                                       g.builder().getI64IntegerAttr(*axis)));
}

FailureOr<ReduceAxes> onnx_import::reduceAxes(GraphImporter &g, int64_t rank) {
  // ReduceSum takes `axes` as an input from opset 13 (18 for the others).
  bool axesInput =
      g.node().op_type() == "ReduceSum" ? g.opset() >= 13 : g.opset() >= 18;
  SmallVector<int64_t> raw;
  if (axesInput) {
    auto axes = g.optionalConstInts(1, {});
    if (failed(axes))
      return failure();
    raw = *axes;
  } else if (const onnx::AttributeProto *a = g.attr("axes")) {
    raw.assign(a->ints().begin(), a->ints().end());
  }
  ReduceAxes r;
  r.keepDims = g.intAttr("keepdims", 1) != 0;
  r.noop = raw.empty() && g.intAttr("noop_with_empty_axes", 0) != 0;
  if (raw.empty())
    for (int64_t i = 0; i < rank; ++i)
      r.axes.push_back(i);
  for (int64_t a : raw) {
    auto axis = normalizeAxis(a, rank);
    if (failed(axis))
      return g.error(llvm::formatv("unsupported axes {0}", listText(raw)),
                     llvm::formatv("the input has rank {0}", rank));
    r.axes.push_back(*axis);
  }
  llvm::sort(r.axes);
  r.axes.erase(std::unique(r.axes.begin(), r.axes.end()), r.axes.end());
  return r;
}

template <typename OpTy> static LogicalResult convertReduce(GraphImporter &g) {
  auto input = g.data(0);
  if (failed(input))
    return failure();
  auto r = reduceAxes(g, shapeOf(*input).size());
  if (failed(r))
    return failure();
  if (r->noop)
    return g.forward(0, 0);
  OpBuilder &b = g.builder();
  return g.define(0, OpTy::create(b, g.loc(), *input,
                                  b.getDenseI64ArrayAttr(r->axes),
                                  r->keepDims ? b.getUnitAttr() : UnitAttr()));
}

//===----------------------------------------------------------------------===//
// The family's table
//===----------------------------------------------------------------------===//

static const OpConverter kMathConverters[] = {
    {"Add", 7, 17, convertBinary<AddOp>, "loom.add"},
    {"And", 1, 17, convertLogic, "arithmetic on 0/1 masks"},
    {"Cast", 6, 17, convertCast,
     "identity (float32 to float32 or float64), loom.convert (int64 to "
     "float32), a loom.convert round trip (to bfloat16), loom.round_f16 (to "
     "float16); constants fold"},
    {"Cos", 7, 17, convertUnary<CosOp>, "loom.cos"},
    {"Div", 7, 17, convertBinary<DivOp>, "loom.div"},
    {"Equal", 7, 17, convertCompare, "loom.equal (a 0/1 mask)"},
    {"Erf", 9, 17, convertUnary<ErfOp>, "loom.erf"},
    {"Exp", 6, 17, convertUnary<ExpOp>, "loom.exp"},
    {"Gemm", 1, 17, convertGemm,
     "loom.matmul [+ loom.scale by alpha] [+ loom.add of C, loom.scale by "
     "beta]"},
    {"Greater", 7, 17, convertCompare,
     "loom.less, operands swapped (a 0/1 mask)"},
    {"GreaterOrEqual", 12, 17, convertCompare,
     "loom.less_equal, operands swapped (a 0/1 mask)"},
    {"Less", 7, 17, convertCompare, "loom.less (a 0/1 mask)"},
    {"LessOrEqual", 12, 17, convertCompare, "loom.less_equal (a 0/1 mask)"},
    {"Log", 6, 17, convertUnary<LogOp>, "loom.log"},
    {"MatMul", 1, 17, convertMatMul,
     "loom.matmul (right operand of rank 2), loom.batch_matmul (both rank >= "
     "2), vectors through loom.reshape"},
    {"Max", 8, 17, convertMaxMin, "loom.max (a chain for more inputs)"},
    {"Min", 8, 17, convertMaxMin, "loom.min (a chain for more inputs)"},
    {"Mul", 7, 17, convertBinary<MulOp>, "loom.mul"},
    {"Neg", 6, 17, convertUnary<NegOp>, "loom.neg"},
    {"Not", 1, 17, convertLogic, "arithmetic on 0/1 masks"},
    {"Or", 7, 17, convertLogic, "arithmetic on 0/1 masks"},
    {"Pow", 7, 17, convertBinary<PowOp>, "loom.pow"},
    {"Range", 11, 17, convertFoldOnly, "folded (constant inputs only)"},
    {"Reciprocal", 6, 17, convertUnary<ReciprocalOp>, "loom.reciprocal"},
    {"ReduceMax", 1, 17, convertReduce<ReduceMaxOp>, "loom.reduce_max"},
    {"ReduceMean", 1, 17, convertReduce<ReduceMeanOp>, "loom.reduce_mean"},
    {"ReduceSum", 1, 17, convertReduce<ReduceSumOp>, "loom.reduce_sum"},
    {"Relu", 1, 17, convertUnary<ReluOp>, "loom.relu"},
    {"Sigmoid", 1, 17, convertUnary<SigmoidOp>, "loom.sigmoid"},
    {"Sin", 7, 17, convertUnary<SinOp>, "loom.sin"},
    {"Softmax", 1, 17, convertSoftmax,
     "loom.softmax (opset < 13: last axis only)"},
    {"Sqrt", 6, 17, convertUnary<SqrtOp>, "loom.sqrt"},
    {"Sub", 7, 17, convertBinary<SubOp>, "loom.sub"},
    {"Tanh", 1, 17, convertUnary<TanhOp>, "loom.tanh"},
    {"Trilu", 14, 17, convertFoldOnly, "folded (constant inputs only)"},
    {"Where", 9, 17, convertWhere,
     "loom.select with the constant condition as an f32 0/1 mask"},
    {"Xor", 7, 17, convertLogic, "arithmetic on 0/1 masks"},
};

ArrayRef<OpConverter> onnx_import::getMathOpConverters() {
  return kMathConverters;
}
