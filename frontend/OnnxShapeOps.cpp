//===- OnnxShapeOps.cpp - Layout and indexing ops ---------------*- C++ -*-===//
//
// Converters for ONNX ops that move elements around (the ops that only
// produce or forward values are in OnnxValueOps.cpp). Each handles both kinds
// of input: a known value (an integer shape operand, a mask, a float
// constant) is folded here with the same attribute handling, a runtime value
// becomes a loom op. Reshape-like ops emit batch-agnostic specifications, so
// that the graph follows a change of the batch size.
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

FailureOr<Value> onnx_import::reshapeTo(GraphImporter &g, Value input,
                                        ArrayRef<int64_t> outShape) {
  ArrayRef<int64_t> inShape = shapeOf(input);
  SmallVector<int64_t> spec = batchAgnosticReshapeSpec(inShape, outShape);
  std::string why;
  auto check = inferReshape(inShape, spec, why);
  if (failed(check) || ArrayRef<int64_t>(*check) != outShape)
    return g.error("internal error in the reshape",
                   "specification " + listText(spec) + " does not reproduce " +
                       shapeText(outShape) + " from " + shapeText(inShape));
  return ReshapeOp::create(g.builder(), g.loc(), input,
                           g.builder().getDenseI64ArrayAttr(spec))
      .getResult();
}

namespace {
/// Input 0 of a layout op: a known value, or a runtime f32 value (an int64
/// one converted to f32 first, since loom's layout ops take f32).
struct LayoutInput {
  const ConstTensor *known = nullptr;
  Value value;
  bool convertedInts = false;

  ArrayRef<int64_t> shape() const {
    return known ? ArrayRef<int64_t>(known->shape) : shapeOf(value);
  }
};
} // namespace

static FailureOr<LayoutInput> layoutInput(GraphImporter &g, unsigned index) {
  LayoutInput in;
  if ((in.known = g.constant(index)))
    return in;
  Value v = g.runtimeValue(index);
  if (v && cast<RankedTensorType>(v.getType()).getElementType().isInteger(64)) {
    in.value =
        ConvertOp::create(g.builder(), g.loc(), v, g.builder().getF32Type());
    in.convertedInts = true;
    return in;
  }
  auto data = g.data(index);
  if (failed(data))
    return failure();
  in.value = *data;
  in.convertedInts = g.holdsConvertedInts(index);
  return in;
}

/// Defines output `index` as `value`, computed from `in`.
static LogicalResult defineLayout(GraphImporter &g, unsigned index,
                                  const LayoutInput &in, Value value) {
  if (in.convertedInts)
    return g.defineConvertedInts(index, value);
  return g.define(index, value);
}

/// Reshapes `in` to `outShape`: relabels a known value, forwards an
/// unchanged runtime value (also an int64 one), reshapes the rest.
static LogicalResult reshapeLayout(GraphImporter &g,
                                   ArrayRef<int64_t> outShape) {
  if (const ConstTensor *c = g.constant(0)) {
    ConstTensor out = *c;
    out.shape.assign(outShape.begin(), outShape.end());
    g.defineConst(0, std::move(out));
    return success();
  }
  Value v = g.runtimeValue(0);
  if (v && shapeOf(v) == outShape)
    return g.forward(0, 0);
  auto in = layoutInput(g, 0);
  if (failed(in))
    return failure();
  auto reshaped = reshapeTo(g, in->value, outShape);
  if (failed(reshaped))
    return failure();
  return defineLayout(g, 0, *in, *reshaped);
}

FailureOr<SmallVector<int64_t>> onnx_import::inputShape(GraphImporter &g,
                                                     unsigned index) {
  if (const ConstTensor *c = g.constant(index))
    return c->shape;
  if (Value v = g.runtimeValue(index))
    return SmallVector<int64_t>(shapeOf(v));
  auto data = g.data(index);
  if (failed(data))
    return failure();
  return SmallVector<int64_t>(shapeOf(*data));
}

//===----------------------------------------------------------------------===//
// Reshapes
//===----------------------------------------------------------------------===//

static LogicalResult convertReshape(GraphImporter &g) {
  auto inShape = inputShape(g);
  if (failed(inShape))
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
  auto outShape = inferReshape(*inShape, spec, why);
  if (failed(outShape))
    return g.error(
        "cannot reshape " + shapeText(*inShape) + " to " + listText(spec), why);
  return reshapeLayout(g, *outShape);
}

static LogicalResult convertFlatten(GraphImporter &g) {
  auto in = inputShape(g);
  if (failed(in))
    return failure();
  int64_t rank = in->size();
  int64_t axis = g.intAttr("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return g.error(
        llvm::formatv("unsupported attribute axis={0}", g.intAttr("axis", 1)),
        llvm::formatv("the input has rank {0}", rank));
  ArrayRef<int64_t> dims = *in;
  SmallVector<int64_t> out = {product(dims.take_front(axis)),
                              product(dims.drop_front(axis))};
  return reshapeLayout(g, out);
}

/// The `axes` of Unsqueeze/Squeeze: an attribute before opset 13, an input
/// from 13 on (optional for Squeeze).
static FailureOr<std::optional<SmallVector<int64_t>>>
axesOperand(GraphImporter &g) {
  if (g.opset() >= 13) {
    if (!g.hasInput(1))
      return std::optional<SmallVector<int64_t>>();
    auto axes = g.constInts(1);
    if (failed(axes))
      return failure();
    return std::optional<SmallVector<int64_t>>(*axes);
  }
  if (const onnx::AttributeProto *a = g.attr("axes"))
    return std::optional<SmallVector<int64_t>>(
        SmallVector<int64_t>(a->ints().begin(), a->ints().end()));
  return std::optional<SmallVector<int64_t>>();
}

static LogicalResult convertUnsqueeze(GraphImporter &g) {
  auto in = inputShape(g);
  auto axes = axesOperand(g);
  if (failed(in) || failed(axes))
    return failure();
  if (!*axes)
    return g.error("Unsqueeze has no axes");
  int64_t outRank = in->size() + (*axes)->size();
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : **axes) {
    auto axis = normalizeAxis(a, outRank);
    if (failed(axis) || inserted[*axis])
      return g.error("unsupported axes " + listText(**axes) + " of Unsqueeze",
                     llvm::formatv("the input has rank {0}", in->size()));
    inserted[*axis] = true;
  }
  SmallVector<int64_t> out;
  for (int64_t i = 0, j = 0; i < outRank; ++i)
    out.push_back(inserted[i] ? 1 : (*in)[j++]);
  return reshapeLayout(g, out);
}

static LogicalResult convertSqueeze(GraphImporter &g) {
  auto in = inputShape(g);
  auto axes = axesOperand(g);
  if (failed(in) || failed(axes))
    return failure();
  int64_t rank = in->size();
  SmallVector<bool> removed(rank, false);
  if (!*axes) {
    for (int64_t i = 0; i < rank; ++i)
      removed[i] = (*in)[i] == 1;
  }
  for (int64_t a : axes->value_or(SmallVector<int64_t>())) {
    auto axis = normalizeAxis(a, rank);
    if (failed(axis) || (*in)[*axis] != 1)
      return g.error("unsupported axes " + listText(**axes) + " of Squeeze",
                     "the input has shape " + shapeText(*in));
    removed[*axis] = true;
  }
  SmallVector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i)
    if (!removed[i])
      out.push_back((*in)[i]);
  return reshapeLayout(g, out);
}

//===----------------------------------------------------------------------===//
// Permutations, slices, concatenation
//===----------------------------------------------------------------------===//

static LogicalResult convertTranspose(GraphImporter &g) {
  auto in = layoutInput(g, 0);
  if (failed(in))
    return failure();
  ArrayRef<int64_t> shape = in->shape();
  int64_t rank = shape.size();
  SmallVector<int64_t> perm;
  if (const onnx::AttributeProto *a = g.attr("perm"))
    perm.assign(a->ints().begin(), a->ints().end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<bool> seen(rank, false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t &p : perm) {
    if (p < 0)
      p += rank;
    valid = valid && p >= 0 && p < rank && !seen[p];
    if (valid)
      seen[p] = true;
  }
  if (!valid)
    return g.error("unsupported attribute perm=" + listText(perm),
                   llvm::formatv("not a permutation of the input's {0} "
                                 "dimensions",
                                 rank));
  SmallVector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(shape[p]);
  if (in->known) {
    SmallVector<int64_t> inStrides = stridesOf(shape),
                         outStrides = stridesOf(out);
    std::vector<int64_t> src(product(out));
    for (int64_t i = 0, n = src.size(); i < n; ++i) {
      int64_t s = 0;
      for (int64_t d = 0; d < rank; ++d)
        s += ((i / outStrides[d]) % out[d]) * inStrides[perm[d]];
      src[i] = s;
    }
    g.defineConst(0, in->known->select(out, src));
    return success();
  }
  return defineLayout(
      g, 0, *in,
      TransposeOp::create(g.builder(), g.loc(), in->value,
                          g.builder().getDenseI64ArrayAttr(perm)));
}

namespace {
/// One normalised slice: `start, start + step, ...` below `end` along `axis`
/// (positive steps), then the axes of `reversed` reversed (ONNX's negative
/// steps).
struct SliceSpec {
  SmallVector<int64_t> axes, starts, ends, steps;
  SmallVector<int64_t> reversed;
};
} // namespace

/// Normalises ONNX slice parameters against `shape`: negative indices count
/// from the end, everything is clamped to the dimension (so INT64_MAX ends
/// mean "to the end"), axes that keep their whole dimension are dropped.
/// A negative step takes the same elements as a positive one from the last
/// element taken, followed by a reversal of the axis.
static FailureOr<SliceSpec>
normalizeSlice(GraphImporter &g, ArrayRef<int64_t> shape,
               ArrayRef<int64_t> starts, ArrayRef<int64_t> ends,
               ArrayRef<int64_t> axes, ArrayRef<int64_t> steps) {
  int64_t rank = shape.size();
  if (starts.size() != ends.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return g.error("Slice starts, ends, axes and steps differ in length",
                   llvm::formatv("{0}, {1}, {2} and {3}", listText(starts),
                                 listText(ends), listText(axes),
                                 listText(steps)));
  SliceSpec spec;
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    auto axis = normalizeAxis(axes[i], rank);
    if (failed(axis) || seen[*axis])
      return g.error("unsupported Slice axes " + listText(axes),
                     llvm::formatv("the input has rank {0}", rank));
    seen[*axis] = true;
    if (steps[i] == 0)
      return g.error("Slice step 0 on axis " + std::to_string(*axis));
    int64_t dim = shape[*axis];
    if (steps[i] < 0) {
      // Elements start, start + step, ... above end, with start clamped to
      // [0, dim - 1] and end to [-1, dim - 1].
      int64_t step = -steps[i];
      int64_t first = starts[i] < 0 ? starts[i] + dim : starts[i];
      int64_t last = ends[i] < 0 ? ends[i] + dim : ends[i];
      first = std::clamp<int64_t>(first, 0, dim - 1);
      last = std::clamp<int64_t>(last, -1, dim - 1);
      int64_t n = first > last ? (first - last + step - 1) / step : 0;
      int64_t low = n ? first - (n - 1) * step : 0;
      int64_t high = n ? first + 1 : 0;
      if (n > 1)
        spec.reversed.push_back(*axis);
      if (low == 0 && high == dim && step == 1)
        continue;
      spec.axes.push_back(*axis);
      spec.starts.push_back(low);
      spec.ends.push_back(high);
      spec.steps.push_back(n > 1 ? step : 1);
      continue;
    }
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v = v < -dim ? 0 : v + dim;
      return std::min(v, dim);
    };
    int64_t s = clampIndex(starts[i]), e = clampIndex(ends[i]);
    if (e < s)
      e = s;
    if (s == 0 && e == dim && steps[i] == 1)
      continue;
    spec.axes.push_back(*axis);
    spec.starts.push_back(s);
    spec.ends.push_back(e);
    spec.steps.push_back(steps[i]);
  }
  return spec;
}

/// Folds or emits one slice of input 0 into output `out`.
static LogicalResult emitSlice(GraphImporter &g, const LayoutInput &in,
                               const SliceSpec &spec, unsigned out) {
  if (spec.axes.empty() && spec.reversed.empty()) {
    if (in.known) {
      g.defineConst(out, *in.known);
      return success();
    }
    return defineLayout(g, out, in, in.value);
  }
  ArrayRef<int64_t> shape = in.shape();
  if (in.known) {
    SmallVector<int64_t> outShape(shape);
    SmallVector<int64_t> start(shape.size(), 0), step(shape.size(), 1);
    SmallVector<bool> reversed(shape.size(), false);
    for (int64_t a : spec.reversed)
      reversed[a] = true;
    for (size_t i = 0; i < spec.axes.size(); ++i) {
      int64_t a = spec.axes[i];
      start[a] = spec.starts[i];
      step[a] = spec.steps[i];
      outShape[a] =
          (spec.ends[i] - spec.starts[i] + spec.steps[i] - 1) / spec.steps[i];
    }
    SmallVector<int64_t> inStrides = stridesOf(shape),
                         outStrides = stridesOf(outShape);
    std::vector<int64_t> src(product(outShape));
    for (int64_t i = 0, n = src.size(); i < n; ++i) {
      int64_t s = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t c = (i / outStrides[d]) % outShape[d];
        if (reversed[d])
          c = outShape[d] - 1 - c;
        s += (start[d] + c * step[d]) * inStrides[d];
      }
      src[i] = s;
    }
    g.defineConst(out, in.known->select(outShape, src));
    return success();
  }
  OpBuilder &b = g.builder();
  Value result = in.value;
  if (!spec.axes.empty())
    result = SliceOp::create(b, g.loc(), in.value,
                             b.getDenseI64ArrayAttr(spec.axes),
                             b.getDenseI64ArrayAttr(spec.starts),
                             b.getDenseI64ArrayAttr(spec.ends),
                             b.getDenseI64ArrayAttr(spec.steps));
  // Reversals: loom.gather with the indices n-1, ..., 0.
  for (int64_t a : spec.reversed) {
    int64_t n = shapeOf(result)[a];
    SmallVector<int64_t> indices;
    for (int64_t i = n - 1; i >= 0; --i)
      indices.push_back(i);
    auto type = RankedTensorType::get({n}, b.getI64Type());
    Value idx = ConstantOp::create(
        b, g.loc(), DenseElementsAttr::get(type, ArrayRef<int64_t>(indices)));
    result = GatherOp::create(b, g.loc(), result, idx,
                              b.getI64IntegerAttr(a));
  }
  return defineLayout(g, out, in, result);
}

static LogicalResult convertSlice(GraphImporter &g) {
  auto in = layoutInput(g, 0);
  if (failed(in))
    return failure();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (g.opset() < 10) {
    auto ints = [&](StringRef name) {
      SmallVector<int64_t> v;
      if (const onnx::AttributeProto *a = g.attr(name))
        v.assign(a->ints().begin(), a->ints().end());
      return v;
    };
    starts = ints("starts");
    ends = ints("ends");
    axes = ints("axes");
  } else {
    auto s = g.constInts(1), e = g.constInts(2);
    if (failed(s) || failed(e))
      return failure();
    starts = *s;
    ends = *e;
    auto a = g.optionalConstInts(3, {});
    if (failed(a))
      return failure();
    axes = *a;
    auto st = g.optionalConstInts(4, {});
    if (failed(st))
      return failure();
    steps = *st;
  }
  if (axes.empty())
    for (int64_t i = 0; i < static_cast<int64_t>(starts.size()); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  auto spec = normalizeSlice(g, in->shape(), starts, ends, axes, steps);
  if (failed(spec))
    return failure();
  return emitSlice(g, *in, *spec, 0);
}

static LogicalResult convertSplit(GraphImporter &g) {
  auto in = layoutInput(g, 0);
  if (failed(in))
    return failure();
  ArrayRef<int64_t> shape = in->shape();
  int64_t raw = g.intAttr("axis", 0);
  auto axis = normalizeAxis(raw, shape.size());
  if (failed(axis))
    return g.error(llvm::formatv("unsupported attribute axis={0}", raw),
                   llvm::formatv("the input has rank {0}", shape.size()));
  SmallVector<int64_t> sizes;
  if (g.opset() >= 13) {
    auto split = g.optionalConstInts(1, {});
    if (failed(split))
      return failure();
    sizes = *split;
  } else if (const onnx::AttributeProto *a = g.attr("split")) {
    sizes.assign(a->ints().begin(), a->ints().end());
  }
  int64_t outputs = g.node().output_size(), dim = shape[*axis];
  if (sizes.empty()) {
    if (dim % outputs)
      return g.error(llvm::formatv("cannot split dimension {0} of size {1} "
                                   "into {2} equal parts",
                                   *axis, dim, outputs));
    sizes.assign(outputs, dim / outputs);
  }
  int64_t sum = 0;
  for (int64_t s : sizes)
    sum += s;
  if (static_cast<int64_t>(sizes.size()) != outputs ||
      llvm::any_of(sizes, [](int64_t s) { return s < 0; }) || sum != dim)
    return g.error("unsupported split " + listText(sizes),
                   llvm::formatv("{0} outputs of dimension {1} of size {2}",
                                 outputs, *axis, dim));
  int64_t start = 0;
  for (int64_t i = 0; i < outputs; ++i) {
    SmallVector<int64_t> starts = {start}, ends = {start + sizes[i]},
                         axes = {*axis}, steps = {1};
    start += sizes[i];
    if (g.node().output(i).empty())
      continue;
    auto spec = normalizeSlice(g, shape, starts, ends, axes, steps);
    if (failed(spec) || failed(emitSlice(g, *in, *spec, i)))
      return failure();
  }
  return success();
}

static LogicalResult convertConcat(GraphImporter &g) {
  const onnx::NodeProto &node = g.node();
  int64_t raw = g.intAttr("axis", 0);
  if (g.allInputsConstant()) {
    SmallVector<const ConstTensor *> parts;
    for (int i = 0; i < node.input_size(); ++i)
      parts.push_back(g.constant(i));
    SmallVector<int64_t> shape = parts.front()->shape;
    auto axis = normalizeAxis(raw, shape.size());
    if (failed(axis))
      return g.error(llvm::formatv("unsupported attribute axis={0}", raw),
                     llvm::formatv("the inputs have rank {0}", shape.size()));
    int64_t total = 0;
    for (const ConstTensor *p : parts) {
      ArrayRef<int64_t> s = p->shape;
      bool same = s.size() == shape.size() && p->kind == parts[0]->kind;
      for (size_t d = 0; same && d < s.size(); ++d)
        same = static_cast<int64_t>(d) == *axis || s[d] == shape[d];
      if (!same)
        return g.shapeError("Concat inputs of shapes " + shapeText(shape) +
                            " and " + shapeText(s) + " differ outside axis " +
                            std::to_string(*axis));
      total += s[*axis];
    }
    shape[*axis] = total;
    ConstTensor out;
    out.kind = parts[0]->kind;
    out.shape = shape;
    int64_t outer = product(ArrayRef<int64_t>(shape).take_front(*axis));
    for (int64_t o = 0; o < outer; ++o)
      for (const ConstTensor *p : parts) {
        int64_t chunk = product(ArrayRef<int64_t>(p->shape).drop_front(*axis));
        if (p->isFloat())
          out.floats.insert(out.floats.end(), p->floats.begin() + o * chunk,
                            p->floats.begin() + (o + 1) * chunk);
        else
          out.ints.insert(out.ints.end(), p->ints.begin() + o * chunk,
                          p->ints.begin() + (o + 1) * chunk);
      }
    g.defineConst(0, std::move(out));
    return success();
  }
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    auto v = g.data(i);
    if (failed(v))
      return failure();
    // Empty pieces (shape 0 along the axis) contribute nothing.
    if (product(shapeOf(*v)) != 0 || inputs.empty())
      inputs.push_back(*v);
  }
  int64_t rank = shapeOf(inputs.front()).size();
  auto axis = normalizeAxis(raw, rank);
  if (failed(axis))
    return g.error(llvm::formatv("unsupported attribute axis={0}", raw),
                   llvm::formatv("the inputs have rank {0}", rank));
  ArrayRef<int64_t> first = shapeOf(inputs.front());
  for (Value v : inputs) {
    ArrayRef<int64_t> s = shapeOf(v);
    bool same = static_cast<int64_t>(s.size()) == rank;
    for (int64_t d = 0; same && d < rank; ++d)
      same = d == *axis || s[d] == first[d];
    if (!same)
      return g.shapeError("Concat inputs of shapes " + shapeText(first) +
                          " and " + shapeText(s) + " differ outside axis " +
                          std::to_string(*axis));
  }
  if (inputs.size() == 1)
    return g.define(0, inputs.front());
  return g.define(0, ConcatOp::create(g.builder(), g.loc(), inputs,
                                      g.builder().getI64IntegerAttr(*axis)));
}

//===----------------------------------------------------------------------===//
// Gather, Expand
//===----------------------------------------------------------------------===//

static LogicalResult convertGather(GraphImporter &g) {
  const ConstTensor *data = g.constant(0);
  const ConstTensor *idx = g.constant(1);
  int64_t raw = g.intAttr("axis", 0);
  if (data && idx) {
    auto axis = normalizeAxis(raw, data->shape.size());
    if (failed(axis))
      return g.error(
          llvm::formatv("unsupported attribute axis={0}", raw),
          llvm::formatv("the data has rank {0}", data->shape.size()));
    if (idx->isFloat())
      return g.error("Gather indices are not integers");
    ArrayRef<int64_t> ds = data->shape;
    int64_t dim = ds[*axis];
    int64_t outer = product(ds.take_front(*axis));
    int64_t inner = product(ds.drop_front(*axis + 1));
    SmallVector<int64_t> outShape(ds.take_front(*axis));
    outShape.append(idx->shape.begin(), idx->shape.end());
    outShape.append(ds.begin() + *axis + 1, ds.end());
    std::vector<int64_t> src;
    src.reserve(product(outShape));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k : idx->ints) {
        int64_t j = k < 0 ? k + dim : k;
        if (j < 0 || j >= dim)
          return g.error(llvm::formatv("Gather index {0} is out of range for "
                                       "dimension {1} of size {2}",
                                       k, *axis, dim));
        for (int64_t i = 0; i < inner; ++i)
          src.push_back((o * dim + j) * inner + i);
      }
    g.defineConst(0, data->select(outShape, src));
    return success();
  }
  auto table = g.data(0);
  if (failed(table))
    return failure();
  auto indices = g.indices(1);
  if (failed(indices))
    return failure();
  int64_t rank = shapeOf(*table).size();
  auto axis = normalizeAxis(raw, rank);
  if (failed(axis))
    return g.error(llvm::formatv("unsupported attribute axis={0}", raw),
                   llvm::formatv("the data has rank {0}", rank));
  return g.define(0, GatherOp::create(g.builder(), g.loc(), *table, *indices,
                                      g.builder().getI64IntegerAttr(*axis)));
}

/// `GatherElements` of a value computed at run time: `loom.gather_elements`,
/// after slicing the data to the indices' shape outside the axis (ONNX lets
/// the indices be smaller there).
static LogicalResult convertGatherElements(GraphImporter &g) {
  auto data = g.data(0);
  if (failed(data))
    return failure();
  auto indices = g.indices(1);
  if (failed(indices))
    return failure();
  ArrayRef<int64_t> ds = shapeOf(*data), is = shapeOf(*indices);
  int64_t raw = g.intAttr("axis", 0);
  auto axis = normalizeAxis(raw, ds.size());
  if (failed(axis))
    return g.error(llvm::formatv("unsupported attribute axis={0}", raw),
                   llvm::formatv("the data has rank {0}", ds.size()));
  bool fits = ds.size() == is.size();
  for (size_t d = 0; fits && d < ds.size(); ++d)
    fits = static_cast<int64_t>(d) == *axis || is[d] <= ds[d];
  if (!fits)
    return g.error("GatherElements of indices " + shapeText(is) +
                   " into data " + shapeText(ds),
                   "the indices must have the data's rank and be no larger "
                   "outside the axis");
  SmallVector<int64_t> axes, starts, ends, steps;
  for (size_t d = 0; d < ds.size(); ++d)
    if (static_cast<int64_t>(d) != *axis && is[d] < ds[d]) {
      axes.push_back(d);
      starts.push_back(0);
      ends.push_back(is[d]);
      steps.push_back(1);
    }
  OpBuilder &b = g.builder();
  Value source = *data;
  if (!axes.empty())
    source = SliceOp::create(b, g.loc(), source, b.getDenseI64ArrayAttr(axes),
                             b.getDenseI64ArrayAttr(starts),
                             b.getDenseI64ArrayAttr(ends),
                             b.getDenseI64ArrayAttr(steps));
  return g.define(0, GatherElementsOp::create(b, g.loc(), source, *indices,
                                              b.getI64IntegerAttr(*axis)));
}

/// Checks that `indices` (`[..., k]`) name slices of `data`.
static LogicalResult checkNdIndices(GraphImporter &g, ArrayRef<int64_t> data,
                                    ArrayRef<int64_t> indices);

LogicalResult onnx_import::checkGatherNdShapes(GraphImporter &g,
                                               ArrayRef<int64_t> data,
                                               ArrayRef<int64_t> indices,
                                               int64_t batch) {
  if (batch < 0 ||
      batch >= static_cast<int64_t>(std::min(data.size(), indices.size())) ||
      data.take_front(batch) != indices.take_front(batch))
    return g.error(llvm::formatv("unsupported GatherND with batch_dims={0} "
                                 "of data {1} and indices {2}",
                                 batch, shapeText(data), shapeText(indices)),
                   "the indices must share the data's leading batch_dims "
                   "dimensions");
  return checkNdIndices(g, data.drop_front(batch), indices.drop_front(batch));
}

static LogicalResult checkNdIndices(GraphImporter &g, ArrayRef<int64_t> data,
                                    ArrayRef<int64_t> indices) {
  if (indices.empty() || indices.back() < 1 ||
      indices.back() > static_cast<int64_t>(data.size()))
    return g.error(g.node().op_type() + " indices of shape " +
                   shapeText(indices) + " into data " + shapeText(data),
                   "the last dimension must count 1 to rank(data) indices");
  return success();
}

/// `ScatterND` of runtime values: `loom.scatter_nd`.
static LogicalResult convertScatterND(GraphImporter &g) {
  auto data = g.data(0);
  auto indices = g.indices(1);
  auto updates = g.data(2);
  if (failed(data) || failed(indices) || failed(updates))
    return failure();
  ArrayRef<int64_t> ds = shapeOf(*data), is = shapeOf(*indices);
  if (failed(checkNdIndices(g, ds, is)))
    return failure();
  SmallVector<int64_t> slices(is.drop_back());
  slices.append(ds.begin() + is.back(), ds.end());
  if (shapeOf(*updates) != ArrayRef<int64_t>(slices))
    return g.error("ScatterND updates of shape " +
                   shapeText(shapeOf(*updates)) + " for slices " +
                   shapeText(slices));
  std::string reduction =
      g.attr("reduction") ? g.attr("reduction")->s() : std::string("none");
  if (reduction != "none" && reduction != "add" && reduction != "mul")
    return g.error("unsupported ScatterND reduction '" + reduction + "'",
                   "none, add and mul are supported");
  OpBuilder &b = g.builder();
  return g.define(0, ScatterNdOp::create(b, g.loc(), *data, *indices, *updates,
                                         b.getStringAttr(reduction)));
}

/// `GatherND` of runtime values: `loom.gather_nd`. With `batch_dims` b > 0
/// and known indices, the data's b leading dimensions are flattened to one
/// and each index row is prefixed with its flat batch position, which is
/// `batch_dims` 0 of that.
static LogicalResult convertGatherND(GraphImporter &g) {
  auto data = g.data(0);
  if (failed(data))
    return failure();
  int64_t batch = g.intAttr("batch_dims", 0);
  if (batch == 0) {
    auto indices = g.indices(1);
    if (failed(indices))
      return failure();
    if (failed(checkGatherNdShapes(g, shapeOf(*data), shapeOf(*indices), 0)))
      return failure();
    return g.define(0,
                    GatherNdOp::create(g.builder(), g.loc(), *data, *indices));
  }
  const ConstTensor *idx = g.constant(1);
  if (!idx)
    return g.error(llvm::formatv("unsupported GatherND with batch_dims={0} "
                                 "of indices computed at run time",
                                 batch),
                   "batch_dims > 0 needs known indices");
  ArrayRef<int64_t> ds = shapeOf(*data), is = idx->shape;
  if (idx->isFloat())
    return g.error("GatherND needs integer indices");
  if (failed(checkGatherNdShapes(g, ds, is, batch)))
    return failure();
  int64_t k = is.back();
  int64_t rows = idx->numElements() / k;
  int64_t rowsPerBatch = product(is.drop_front(batch).drop_back());
  std::vector<int64_t> prefixed;
  prefixed.reserve(rows * (k + 1));
  for (int64_t row = 0; row < rows; ++row) {
    prefixed.push_back(row / rowsPerBatch);
    for (int64_t j = 0; j < k; ++j)
      prefixed.push_back(idx->ints[row * k + j]);
  }
  FailureOr<Value> flat = *data;
  if (batch > 1) {
    SmallVector<int64_t> flatShape = {product(ds.take_front(batch))};
    flatShape.append(ds.begin() + batch, ds.end());
    flat = reshapeTo(g, *data, flatShape);
    if (failed(flat))
      return failure();
  }
  SmallVector<int64_t> idxShape(is.begin(), is.end());
  idxShape.back() = k + 1;
  OpBuilder &b = g.builder();
  auto idxType = RankedTensorType::get(idxShape, b.getI64Type());
  Value indices = ConstantOp::create(
      b, g.loc(), DenseElementsAttr::get(idxType, ArrayRef<int64_t>(prefixed)));
  return g.define(0, GatherNdOp::create(b, g.loc(), *flat, indices));
}

static LogicalResult convertExpand(GraphImporter &g) {
  auto in = layoutInput(g, 0);
  auto target = g.constInts(1);
  if (failed(in) || failed(target))
    return failure();
  ArrayRef<int64_t> shape = in->shape();
  if (llvm::any_of(*target, [](int64_t d) { return d < 0; }))
    return g.error("cannot expand to " + listText(*target),
                   "Expand's sizes are at least 0 (1 keeps a dimension; "
                   "-1 is torch's spelling, not ONNX's)");
  auto out = broadcastShape(shape, *target);
  if (failed(out))
    return g.shapeError("cannot expand " + shapeText(shape) + " to " +
                            listText(*target),
                        "the shapes do not broadcast");
  if (in->known && product(*out) <= kMaxFoldedElements) {
    std::vector<int64_t> src(product(*out));
    size_t offset = out->size() - shape.size();
    SmallVector<int64_t> inStrides = stridesOf(shape),
                         outStrides = stridesOf(*out);
    for (int64_t i = 0, n = src.size(); i < n; ++i) {
      int64_t s = 0;
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] != 1)
          s += ((i / outStrides[d + offset]) % (*out)[d + offset]) *
               inStrides[d];
      src[i] = s;
    }
    g.defineConst(0, in->known->select(*out, src));
    return success();
  }
  Value value = in->known ? g.materialize(*in->known) : in->value;
  if (ArrayRef<int64_t>(*out) == shape)
    return defineLayout(g, 0, *in, value);
  // `-1` keeps the input's dimension, so the op follows the batch size.
  SmallVector<int64_t> spec(*out);
  size_t offset = out->size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == (*out)[d + offset])
      spec[d + offset] = -1;
  return defineLayout(g, 0, *in,
                      ExpandOp::create(g.builder(), g.loc(), value,
                                       g.builder().getDenseI64ArrayAttr(spec)));
}

//===----------------------------------------------------------------------===//
// The family's table
//===----------------------------------------------------------------------===//

static const OpConverter kShapeConverters[] = {
    {"Concat", 4, 17, convertConcat,
     "loom.concat (float32); known inputs fold"},
    {"Expand", 8, 17, convertExpand,
     "loom.expand (-1 where the dimension is kept); known inputs fold"},
    {"Flatten", 1, 17, convertFlatten, "loom.reshape"},
    {"Gather", 1, 17, convertGather,
     "loom.gather (float32 data, int64 indices); known inputs fold"},
    {"GatherElements", 11, 17, convertGatherElements,
     "loom.gather_elements (float32 data; the data sliced to the indices' "
     "shape outside the axis); known inputs fold"},
    {"GatherND", 11, 17, convertGatherND,
     "loom.gather_nd (float32 data; batch_dims > 0 with known indices: the "
     "batch dimensions flattened and each index row prefixed with its batch "
     "position); known inputs fold"},
    {"Reshape", 1, 17, convertReshape, "loom.reshape"},
    {"ScatterND", 11, 17, convertScatterND,
     "loom.scatter_nd (float32 data and updates; reduction none, add, "
     "mul); known inputs fold (none)"},
    {"Slice", 1, 17, convertSlice,
     "loom.slice (whole-dimension axes dropped); negative steps: loom.slice "
     "and loom.gather reversing the axis"},
    {"Split", 2, 17, convertSplit, "one loom.slice per output"},
    {"Squeeze", 1, 17, convertSqueeze, "loom.reshape"},
    {"Transpose", 1, 17, convertTranspose, "loom.transpose"},
    {"Unsqueeze", 1, 17, convertUnsqueeze, "loom.reshape"},
};

ArrayRef<OpConverter> onnx_import::getShapeOpConverters() {
  return kShapeConverters;
}
