//===- OnnxFolding.cpp - Constant folding of known values -------*- C++ -*-===//
//
// ONNX 1.12's data propagation computes small integer tensors of shape
// subgraphs from initializers, but not from `Constant` nodes, nor float or
// boolean tensors. Exported transformers build their causal masks and rotary
// tables from `Constant`s (`Trilu`, `Range`, `Equal`, `Where`, `Cos`, ...):
// this file folds a node whose inputs are all known, following the ONNX
// reference semantics, so that such subgraphs leave known values behind and
// no ops. Layout ops (`Reshape`, `Gather`, `Slice`, ...) fold in their own
// converters, which share the attribute handling with the op they emit;
// indexing and scans (`CumSum`, `ScatterND`, `Tile`, `GatherElements`,
// `Pad`) fold in OnnxFoldingIndex.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "mlir/Dialect/Traits.h"
#include "llvm/Support/FormatVariadic.h"

#include "onnx/defs/tensor_proto_util.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

using Kind = ConstTensor::Kind;

//===----------------------------------------------------------------------===//
// Shapes and known values
//===----------------------------------------------------------------------===//

std::string onnx_import::shapeText(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

std::string onnx_import::listText(ArrayRef<int64_t> values) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

int64_t onnx_import::product(ArrayRef<int64_t> dims) {
  // Saturates rather than wraps: a shape read from a file may claim more
  // elements than int64 holds, and every caller compares against a limit.
  int64_t p = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(p, d, &p))
      return std::numeric_limits<int64_t>::max();
  return p;
}

SmallVector<int64_t> onnx_import::stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

ArrayRef<int64_t> onnx_import::shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

FailureOr<SmallVector<int64_t>>
onnx_import::broadcastShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  SmallVector<int64_t> out;
  if (!OpTrait::util::getBroadcastedShape(a, b, out))
    return failure();
  return out;
}

FailureOr<int64_t> onnx_import::normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return failure();
  return axis < 0 ? axis + rank : axis;
}

int64_t ConstTensor::numElements() const { return product(shape); }

double ConstTensor::get(int64_t i) const {
  return kind == Kind::Float ? static_cast<double>(floats[i])
                             : static_cast<double>(ints[i]);
}

ConstTensor ConstTensor::ofInts(SmallVector<int64_t> shape,
                                std::vector<int64_t> values) {
  ConstTensor t;
  t.kind = Kind::Int;
  t.shape = std::move(shape);
  t.ints = std::move(values);
  return t;
}

ConstTensor ConstTensor::ofFloats(SmallVector<int64_t> shape,
                                  std::vector<float> values) {
  ConstTensor t;
  t.kind = Kind::Float;
  t.shape = std::move(shape);
  t.floats = std::move(values);
  return t;
}

ConstTensor ConstTensor::select(SmallVector<int64_t> newShape,
                                ArrayRef<int64_t> source) const {
  ConstTensor t;
  t.kind = kind;
  t.shape = std::move(newShape);
  if (kind == Kind::Float) {
    t.floats.reserve(source.size());
    for (int64_t i : source)
      t.floats.push_back(floats[i]);
  } else {
    t.ints.reserve(source.size());
    for (int64_t i : source)
      t.ints.push_back(ints[i]);
  }
  return t;
}

/// For each element of a tensor of `outShape`, the index of the element of a
/// tensor of `inShape` that NumPy broadcasting reads.
static std::vector<int64_t> broadcastSources(ArrayRef<int64_t> outShape,
                                             ArrayRef<int64_t> inShape) {
  int64_t n = product(outShape);
  size_t offset = outShape.size() - inShape.size();
  SmallVector<int64_t> outStrides = stridesOf(outShape);
  SmallVector<int64_t> inStrides = stridesOf(inShape);
  std::vector<int64_t> sources(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < inShape.size(); ++d) {
      int64_t coord = (i / outStrides[d + offset]) % outShape[d + offset];
      if (inShape[d] != 1)
        src += coord * inStrides[d];
    }
    sources[i] = src;
  }
  return sources;
}

static FailureOr<ConstTensor> tensorAttr(GraphImporter &g,
                                         const onnx::TensorProto &t) {
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT: {
    auto data = onnx::ParseData<float>(&t);
    return ConstTensor::ofFloats(shape,
                                 std::vector<float>(data.begin(), data.end()));
  }
  case onnx::TensorProto::INT64: {
    auto data = onnx::ParseData<int64_t>(&t);
    return ConstTensor::ofInts(shape,
                               std::vector<int64_t>(data.begin(), data.end()));
  }
  case onnx::TensorProto::INT32: {
    auto data = onnx::ParseData<int32_t>(&t);
    return ConstTensor::ofInts(shape,
                               std::vector<int64_t>(data.begin(), data.end()));
  }
  case onnx::TensorProto::BOOL: {
    ConstTensor c = ConstTensor::ofInts(shape, {});
    c.kind = Kind::Bool;
    if (t.has_raw_data())
      for (char byte : t.raw_data())
        c.ints.push_back(byte != 0);
    else
      for (int32_t v : t.int32_data())
        c.ints.push_back(v != 0);
    return c;
  }
  default:
    return g.error("unsupported attribute 'value' of element type " +
                       elementTypeName(t.data_type()),
                   "only float32, int64, int32 and bool constants are "
                   "supported");
  }
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

static LogicalResult foldConstant(GraphImporter &g) {
  const onnx::NodeProto &node = g.node();
  if (node.attribute_size() != 1)
    return g.error("Constant needs exactly one value attribute");
  const onnx::AttributeProto &a = node.attribute(0);
  const std::string &name = a.name();
  ConstTensor c;
  if (name == "value") {
    auto parsed = tensorAttr(g, a.t());
    if (failed(parsed))
      return failure();
    c = std::move(*parsed);
    int64_t count = c.isFloat() ? c.floats.size() : c.ints.size();
    if (count != c.numElements())
      return g.error(llvm::formatv("Constant holds {0} values for shape {1}",
                                   count, shapeText(c.shape)));
  } else if (name == "value_float") {
    c = ConstTensor::ofFloats({}, {a.f()});
  } else if (name == "value_floats") {
    c = ConstTensor::ofFloats({a.floats_size()},
                              {a.floats().begin(), a.floats().end()});
  } else if (name == "value_int") {
    c = ConstTensor::ofInts({}, {a.i()});
  } else if (name == "value_ints") {
    c = ConstTensor::ofInts({a.ints_size()},
                            {a.ints().begin(), a.ints().end()});
  } else {
    return g.error("unsupported attribute '" + name + "' of Constant");
  }
  g.defineConst(0, std::move(c));
  return success();
}

static FailureOr<bool> foldConstantOfShape(GraphImporter &g) {
  auto shape = g.constInts(0);
  if (failed(shape))
    return failure();
  if (llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return g.error("ConstantOfShape of negative shape " + listText(*shape));
  int64_t n = product(*shape);
  if (n > kMaxFoldedElements)
    return false;
  ConstTensor c = ConstTensor::ofFloats(*shape, std::vector<float>(n, 0.0f));
  if (const onnx::AttributeProto *a = g.attr("value")) {
    auto value = tensorAttr(g, a->t());
    if (failed(value))
      return failure();
    if (value->numElements() != 1)
      return g.error("ConstantOfShape value must hold one element");
    if (value->isFloat()) {
      c.floats.assign(n, value->floats[0]);
    } else {
      c.kind = value->kind;
      c.floats.clear();
      c.ints.assign(n, value->ints[0]);
    }
  }
  g.defineConst(0, std::move(c));
  return true;
}

static FailureOr<bool> foldCast(GraphImporter &g) {
  const ConstTensor &in = *g.constant(0);
  int64_t to = g.intAttr("to", 0);
  ConstTensor out;
  out.shape = in.shape;
  int64_t n = in.numElements();
  switch (to) {
  case onnx::TensorProto::FLOAT:
    out.kind = Kind::Float;
    for (int64_t i = 0; i < n; ++i)
      out.floats.push_back(static_cast<float>(in.get(i)));
    break;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::INT32:
    out.kind = Kind::Int;
    for (int64_t i = 0; i < n; ++i)
      out.ints.push_back(in.isFloat() ? static_cast<int64_t>(in.floats[i])
                                      : in.ints[i]);
    break;
  case onnx::TensorProto::BOOL:
    out.kind = Kind::Bool;
    for (int64_t i = 0; i < n; ++i)
      out.ints.push_back(in.get(i) != 0.0);
    break;
  default:
    return g.error(llvm::formatv("unsupported Cast to {0}",
                                 elementTypeName(static_cast<int32_t>(to))),
                   "constants are cast to float32, int64, int32 or bool");
  }
  g.defineConst(0, std::move(out));
  return true;
}

static FailureOr<bool> foldRange(GraphImporter &g) {
  const ConstTensor &start = *g.constant(0), &limit = *g.constant(1),
                    &delta = *g.constant(2);
  if (start.numElements() != 1 || limit.numElements() != 1 ||
      delta.numElements() != 1)
    return g.error("Range needs scalar start, limit and delta");
  double s = start.get(0), l = limit.get(0), d = delta.get(0);
  if (d == 0)
    return g.error("Range with delta 0");
  int64_t n =
      std::max<int64_t>(static_cast<int64_t>(std::ceil((l - s) / d)), 0);
  if (n > kMaxFoldedElements)
    return false;
  if (start.isFloat()) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<float>(start.floats[0] + i * delta.floats[0]);
    g.defineConst(0, ConstTensor::ofFloats({n}, std::move(v)));
  } else {
    std::vector<int64_t> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = start.ints[0] + i * delta.ints[0];
    g.defineConst(0, ConstTensor::ofInts({n}, std::move(v)));
  }
  return true;
}

static FailureOr<bool> foldTrilu(GraphImporter &g) {
  const ConstTensor &in = *g.constant(0);
  if (in.shape.size() < 2)
    return g.error("Trilu needs an input of rank >= 2, got shape " +
                   shapeText(in.shape));
  int64_t k = 0;
  if (g.hasInput(1)) {
    auto kv = g.constInts(1);
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return g.error("Trilu needs a scalar k");
    k = (*kv)[0];
  }
  bool upper = g.intAttr("upper", 1) != 0;
  int64_t rows = in.shape[in.shape.size() - 2], cols = in.shape.back();
  ConstTensor out = in;
  for (int64_t i = 0, n = in.numElements(); i < n; ++i) {
    int64_t c = i % cols, r = (i / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    if (keep)
      continue;
    if (out.isFloat())
      out.floats[i] = 0.0f;
    else
      out.ints[i] = 0;
  }
  g.defineConst(0, std::move(out));
  return true;
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

static FailureOr<bool> foldUnary(GraphImporter &g) {
  const ConstTensor &in = *g.constant(0);
  StringRef op = g.node().op_type();
  ConstTensor out = in;
  int64_t n = in.numElements();
  if (op == "Not") {
    for (int64_t i = 0; i < n; ++i)
      out.ints[i] = !in.ints[i];
    g.defineConst(0, std::move(out));
    return true;
  }
  if ((op == "Neg" || op == "Abs") && !in.isFloat()) {
    for (int64_t i = 0; i < n; ++i)
      out.ints[i] = op == "Neg" ? -in.ints[i] : std::abs(in.ints[i]);
    g.defineConst(0, std::move(out));
    return true;
  }
  if (!in.isFloat())
    return false;
  auto apply = [&](auto fn) {
    for (int64_t i = 0; i < n; ++i)
      out.floats[i] = static_cast<float>(fn(static_cast<double>(in.floats[i])));
  };
  if (op == "Neg")
    apply([](double x) { return -x; });
  else if (op == "Abs")
    apply([](double x) { return std::fabs(x); });
  else if (op == "Sqrt")
    apply([](double x) { return std::sqrt(x); });
  else if (op == "Exp")
    apply([](double x) { return std::exp(x); });
  else if (op == "Log")
    apply([](double x) { return std::log(x); });
  else if (op == "Reciprocal")
    apply([](double x) { return 1.0 / x; });
  else if (op == "Cos")
    apply([](double x) { return std::cos(x); });
  else if (op == "Sin")
    apply([](double x) { return std::sin(x); });
  else if (op == "Erf")
    apply([](double x) { return std::erf(x); });
  else if (op == "Relu")
    apply([](double x) { return x > 0 ? x : 0.0; });
  else if (op == "Tanh")
    apply([](double x) { return std::tanh(x); });
  else if (op == "Sigmoid")
    apply([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  else
    return false;
  g.defineConst(0, std::move(out));
  return true;
}

static FailureOr<bool> foldBinary(GraphImporter &g) {
  StringRef op = g.node().op_type();
  const ConstTensor &a = *g.constant(0), &b = *g.constant(1);
  auto shape = broadcastShape(a.shape, b.shape);
  if (failed(shape))
    return g.shapeError(op + " operand shapes " + shapeText(a.shape) + " and " +
                        shapeText(b.shape) + " do not broadcast");
  int64_t n = product(*shape);
  if (n > kMaxFoldedElements)
    return false;
  std::vector<int64_t> ia = broadcastSources(*shape, a.shape);
  std::vector<int64_t> ib = broadcastSources(*shape, b.shape);
  bool compare = op == "Equal" || op == "Less" || op == "Greater" ||
                 op == "LessOrEqual" || op == "GreaterOrEqual";
  bool logic = op == "And" || op == "Or" || op == "Xor";
  if (compare || logic) {
    ConstTensor out = ConstTensor::ofInts(*shape, std::vector<int64_t>(n));
    out.kind = Kind::Bool;
    for (int64_t i = 0; i < n; ++i) {
      double x = a.get(ia[i]), y = b.get(ib[i]);
      bool r = op == "Equal"            ? x == y
               : op == "Less"           ? x < y
               : op == "Greater"        ? x > y
               : op == "LessOrEqual"    ? x <= y
               : op == "GreaterOrEqual" ? x >= y
               : op == "And"            ? (x != 0 && y != 0)
               : op == "Or"             ? (x != 0 || y != 0)
                                        : ((x != 0) != (y != 0));
      out.ints[i] = r;
    }
    g.defineConst(0, std::move(out));
    return true;
  }
  if (!a.isFloat() && !b.isFloat()) {
    ConstTensor out = ConstTensor::ofInts(*shape, std::vector<int64_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t x = a.ints[ia[i]], y = b.ints[ib[i]];
      int64_t r;
      if (op == "Add")
        r = x + y;
      else if (op == "Sub")
        r = x - y;
      else if (op == "Mul")
        r = x * y;
      else if (op == "Div") {
        if (y == 0)
          return g.error("integer division by zero");
        r = x / y;
      } else if (op == "Max")
        r = std::max(x, y);
      else if (op == "Min")
        r = std::min(x, y);
      else if (op == "Pow")
        r = static_cast<int64_t>(std::pow(x, y));
      else
        return false;
      out.ints[i] = r;
    }
    g.defineConst(0, std::move(out));
    return true;
  }
  ConstTensor out = ConstTensor::ofFloats(*shape, std::vector<float>(n));
  for (int64_t i = 0; i < n; ++i) {
    float x = static_cast<float>(a.get(ia[i])),
          y = static_cast<float>(b.get(ib[i]));
    float r;
    if (op == "Add")
      r = x + y;
    else if (op == "Sub")
      r = x - y;
    else if (op == "Mul")
      r = x * y;
    else if (op == "Div")
      r = x / y;
    else if (op == "Max")
      r = std::max(x, y);
    else if (op == "Min")
      r = std::min(x, y);
    else if (op == "Pow")
      r = std::pow(x, y);
    else
      return false;
    out.floats[i] = r;
  }
  g.defineConst(0, std::move(out));
  return true;
}

/// `Max` and `Min` of one input (itself) or two; more are not folded.
static FailureOr<bool> foldMaxMin(GraphImporter &g) {
  if (g.node().input_size() == 1) {
    g.defineConst(0, *g.constant(0));
    return true;
  }
  if (g.node().input_size() != 2)
    return false;
  return foldBinary(g);
}

/// `Clip(x, min, max)`, bounds optional (opset >= 11; earlier ones are
/// attributes).
static FailureOr<bool> foldClip(GraphImporter &g) {
  const ConstTensor &in = *g.constant(0);
  double lo = -INFINITY, hi = INFINITY;
  if (g.opset() < 11) {
    lo = g.floatAttr("min", -INFINITY);
    hi = g.floatAttr("max", INFINITY);
  }
  for (unsigned i : {1u, 2u}) {
    if (!g.hasInput(i))
      continue;
    const ConstTensor *bound = g.constant(i);
    if (!bound || bound->numElements() != 1)
      return g.error("Clip bounds must be scalars");
    (i == 1 ? lo : hi) = bound->get(0);
  }
  ConstTensor out = in;
  for (int64_t i = 0, n = in.numElements(); i < n; ++i) {
    if (in.isFloat())
      out.floats[i] = static_cast<float>(
          std::min(std::max(static_cast<double>(in.floats[i]), lo), hi));
    else
      out.ints[i] = static_cast<int64_t>(
          std::min(std::max(static_cast<double>(in.ints[i]), lo), hi));
  }
  g.defineConst(0, std::move(out));
  return true;
}

static FailureOr<bool> foldWhere(GraphImporter &g) {
  const ConstTensor &c = *g.constant(0), &x = *g.constant(1),
                    &y = *g.constant(2);
  auto xy = broadcastShape(x.shape, y.shape);
  FailureOr<SmallVector<int64_t>> shape = failure();
  if (succeeded(xy))
    shape = broadcastShape(c.shape, *xy);
  if (failed(shape))
    return g.shapeError("Where operand shapes " + shapeText(c.shape) + ", " +
                        shapeText(x.shape) + " and " + shapeText(y.shape) +
                        " do not broadcast");
  int64_t n = product(*shape);
  if (n > kMaxFoldedElements)
    return false;
  if (x.kind != y.kind)
    return g.error("Where operands differ in element type");
  std::vector<int64_t> ic = broadcastSources(*shape, c.shape);
  std::vector<int64_t> ix = broadcastSources(*shape, x.shape);
  std::vector<int64_t> iy = broadcastSources(*shape, y.shape);
  ConstTensor out;
  out.kind = x.kind;
  out.shape = *shape;
  for (int64_t i = 0; i < n; ++i) {
    bool pick = c.get(ic[i]) != 0;
    if (x.isFloat())
      out.floats.push_back(pick ? x.floats[ix[i]] : y.floats[iy[i]]);
    else
      out.ints.push_back(pick ? x.ints[ix[i]] : y.ints[iy[i]]);
  }
  g.defineConst(0, std::move(out));
  return true;
}

static FailureOr<bool> foldMatMul(GraphImporter &g) {
  const ConstTensor &a = *g.constant(0), &b = *g.constant(1);
  if (!a.isFloat() || !b.isFloat() || a.shape.empty() || b.shape.empty())
    return false;
  SmallVector<int64_t> as(a.shape), bs(b.shape);
  bool vecA = as.size() == 1, vecB = bs.size() == 1;
  if (vecA)
    as.insert(as.begin(), 1);
  if (vecB)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    return g.error("MatMul contraction sizes differ",
                   "shapes " + shapeText(a.shape) + " and " +
                       shapeText(b.shape));
  ArrayRef<int64_t> batchA = ArrayRef<int64_t>(as).drop_back(2),
                    batchB = ArrayRef<int64_t>(bs).drop_back(2);
  auto batch = broadcastShape(batchA, batchB);
  if (failed(batch))
    return g.shapeError("MatMul batch dimensions of " + shapeText(a.shape) +
                        " and " + shapeText(b.shape) + " do not broadcast");
  int64_t batches = product(*batch);
  if (batches * m * n > kMaxFoldedElements)
    return false;
  std::vector<int64_t> srcA = broadcastSources(*batch, batchA);
  std::vector<int64_t> srcB = broadcastSources(*batch, batchB);
  std::vector<float> out(batches * m * n, 0.0f);
  for (int64_t t = 0; t < batches; ++t) {
    const float *pa = a.floats.data() + srcA[t] * m * k;
    const float *pb = b.floats.data() + srcB[t] * k * n;
    float *po = out.data() + t * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l)
          s += static_cast<double>(pa[i * k + l]) * pb[l * n + j];
        po[i * n + j] = static_cast<float>(s);
      }
  }
  SmallVector<int64_t> shape(*batch);
  if (!vecA)
    shape.push_back(m);
  if (!vecB)
    shape.push_back(n);
  g.defineConst(0, ConstTensor::ofFloats(shape, std::move(out)));
  return true;
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

namespace {
struct Folder {
  const char *opType;
  FailureOr<bool> (*fold)(GraphImporter &);
};
} // namespace

static FailureOr<bool> foldConstantNode(GraphImporter &g) {
  if (failed(foldConstant(g)))
    return failure();
  return true;
}

static const Folder kFolders[] = {
    {"Abs", foldUnary},
    {"Add", foldBinary},
    {"And", foldBinary},
    {"Cast", foldCast},
    {"Clip", foldClip},
    {"Constant", foldConstantNode},
    {"ConstantOfShape", foldConstantOfShape},
    {"Cos", foldUnary},
    {"CumSum", foldCumSum},
    {"Div", foldBinary},
    {"Equal", foldBinary},
    {"Erf", foldUnary},
    {"Exp", foldUnary},
    {"GatherElements", foldGatherElements},
    {"GatherND", foldGatherND},
    {"Greater", foldBinary},
    {"GreaterOrEqual", foldBinary},
    {"Less", foldBinary},
    {"LessOrEqual", foldBinary},
    {"Log", foldUnary},
    {"MatMul", foldMatMul},
    {"Max", foldMaxMin},
    {"Min", foldMaxMin},
    {"Mul", foldBinary},
    {"Neg", foldUnary},
    {"Not", foldUnary},
    {"Or", foldBinary},
    {"Pad", foldPad},
    {"Pow", foldBinary},
    {"Range", foldRange},
    {"Reciprocal", foldUnary},
    {"Relu", foldUnary},
    {"ScatterND", foldScatterND},
    {"Sigmoid", foldUnary},
    {"Sin", foldUnary},
    {"Sqrt", foldUnary},
    {"Sub", foldBinary},
    {"Tanh", foldUnary},
    {"Tile", foldTile},
    {"Trilu", foldTrilu},
    {"Where", foldWhere},
    {"Xor", foldBinary},
};

bool onnx_import::hasFolder(StringRef opType) {
  return llvm::any_of(kFolders,
                      [&](const Folder &f) { return opType == f.opType; });
}

FailureOr<bool> onnx_import::foldNode(GraphImporter &g) {
  const onnx::NodeProto &node = g.node();
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return false;
  for (const Folder &f : kFolders)
    if (node.op_type() == f.opType)
      return f.fold(g);
  return false;
}
