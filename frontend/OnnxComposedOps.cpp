//===- OnnxComposedOps.cpp - ONNX ops built from other loom ops -*- C++ -*-===//
//
// ONNX ops that real models use at run time and that loom builds from ops
// it has, so they train with the existing kernels and gradients:
//
// - `Abs(x)` = `max(x, -x)`; `Clip(x, lo, hi)` = `min(max(x, lo), hi)`
//   (MobileNet's ReLU6), scalar bounds;
// - `CumSum` along an axis = a product with a constant triangular matrix
//   (exact for the integer counts position ids are made of);
// - `Tile` = `concat` of copies; `Pad` = `concat` with constant blocks
//   (constant mode) or with slices of the edge (edge, reflect), `slice` for
//   negative pads;
// - `AveragePool` = a depthwise `conv2d` with a constant 1/k filter, scaled
//   by the share of real elements in each window when the padding is not
//   counted (ONNX's default);
// - 3-D pooling = 2-D pooling of `[N, C*D, H, W]`, then the max or mean of
//   the depth window's strided slices; a dilated `MaxPool` window = the max
//   of its strided slices of the input padded with -inf.
//
// With all inputs known, each folds instead (OnnxFolding*.cpp).
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomOps.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

static LogicalResult convertAbs(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  OpBuilder &b = g.builder();
  Value neg = NegOp::create(b, g.loc(), *x);
  return g.define(0, MaxOp::create(b, g.loc(), *x, neg));
}

static LogicalResult convertClip(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  // Bounds: attributes before opset 11, optional scalar inputs after.
  Value lo, hi;
  if (g.opset() < 11) {
    if (g.attr("min"))
      lo = g.scalar(g.floatAttr("min", 0));
    if (g.attr("max"))
      hi = g.scalar(g.floatAttr("max", 0));
  }
  for (unsigned i : {1u, 2u}) {
    if (!g.hasInput(i))
      continue;
    auto bound = g.data(i);
    if (failed(bound))
      return failure();
    if (!shapeOf(*bound).empty())
      return g.error("unsupported Clip bound '" + g.node().input(i) +
                         "' of shape " + shapeText(shapeOf(*bound)),
                     "the bounds must be scalars");
    (i == 1 ? lo : hi) = *bound;
  }
  OpBuilder &b = g.builder();
  Value y = *x;
  if (lo)
    y = MaxOp::create(b, g.loc(), y, lo);
  if (hi)
    y = MinOp::create(b, g.loc(), y, hi);
  return g.holdsConvertedInts(0) ? g.defineConvertedInts(0, y)
                                 : g.define(0, y);
}

//===----------------------------------------------------------------------===//
// Scans and repetition
//===----------------------------------------------------------------------===//

/// `perm` moving axis `axis` of a rank-`rank` tensor last (its own inverse
/// composed with `inversePerm`).
static SmallVector<int64_t> axisLast(int64_t axis, int64_t rank) {
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  return perm;
}

static SmallVector<int64_t> inversePerm(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inv[p] = i;
  return inv;
}

static LogicalResult convertCumSum(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  auto axisValues = g.constInts(1);
  if (failed(axisValues))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(*x);
  int64_t rank = shape.size();
  if (axisValues->size() != 1 || rank == 0)
    return g.error("unsupported CumSum axis " + listText(*axisValues),
                   "expected one axis of a tensor of rank >= 1");
  auto axis = normalizeAxis((*axisValues)[0], rank);
  if (failed(axis))
    return g.error(llvm::formatv("unsupported axis {0}", (*axisValues)[0]),
                   llvm::formatv("the input has rank {0}", rank));
  int64_t len = shape[*axis];
  if (len * len > kMaxFoldedElements)
    return g.error(llvm::formatv("unsupported CumSum over {0} elements", len),
                   "loom computes it as a product with a " +
                       std::to_string(len) + "x" + std::to_string(len) +
                       " triangular matrix, which is too large");
  bool exclusive = g.intAttr("exclusive", 0) != 0;
  bool reverse = g.intAttr("reverse", 0) != 0;
  // out[j] = sum_i x[i] * u[i][j], u[i][j] = 1 where i reaches j.
  std::vector<float> u(len * len, 0.0f);
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j < len; ++j) {
      bool reaches = reverse ? i > j : i < j;
      u[i * len + j] = (reaches || (!exclusive && i == j)) ? 1.0f : 0.0f;
    }
  OpBuilder &b = g.builder();
  SmallVector<int64_t> perm = axisLast(*axis, rank);
  Value v = *x;
  bool moved = *axis != rank - 1;
  if (moved)
    v = TransposeOp::create(b, g.loc(), v, b.getDenseI64ArrayAttr(perm));
  SmallVector<int64_t> movedShape(shapeOf(v));
  int64_t rows = product(movedShape) / std::max<int64_t>(len, 1);
  auto flat = reshapeTo(g, v, {rows, len});
  if (failed(flat))
    return failure();
  Value tri = g.materialize(ConstTensor::ofFloats({len, len}, std::move(u)));
  Value sum = MatmulOp::create(b, g.loc(), *flat, tri, UnitAttr(), UnitAttr());
  auto back = reshapeTo(g, sum, movedShape);
  if (failed(back))
    return failure();
  Value y = *back;
  if (moved)
    y = TransposeOp::create(b, g.loc(), y,
                            b.getDenseI64ArrayAttr(inversePerm(perm)));
  return g.holdsConvertedInts(0) ? g.defineConvertedInts(0, y)
                                 : g.define(0, y);
}

/// `count` copies of `v` along `axis`, or `v` itself.
static Value repeatAlong(GraphImporter &g, Value v, int64_t axis,
                         int64_t count) {
  if (count == 1)
    return v;
  SmallVector<Value> copies(count, v);
  return ConcatOp::create(g.builder(), g.loc(), copies,
                          g.builder().getI64IntegerAttr(axis));
}

static LogicalResult convertTile(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  auto repeats = g.constInts(1);
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(*x);
  if (repeats->size() != shape.size() ||
      llvm::any_of(*repeats, [](int64_t r) { return r < 1; }))
    return g.error("unsupported Tile repeats " + listText(*repeats) +
                       " of a tensor of shape " + shapeText(shape),
                   "expected one positive repeat count per dimension");
  Value v = *x;
  for (auto [axis, count] : llvm::enumerate(*repeats))
    v = repeatAlong(g, v, axis, count);
  return g.holdsConvertedInts(0) ? g.defineConvertedInts(0, v)
                                 : g.define(0, v);
}

//===----------------------------------------------------------------------===//
// Padding
//===----------------------------------------------------------------------===//

/// `v[start:end]` along `axis`.
static Value sliceAlong(GraphImporter &g, Value v, int64_t axis, int64_t start,
                        int64_t end) {
  OpBuilder &b = g.builder();
  return SliceOp::create(b, g.loc(), v, b.getDenseI64ArrayAttr({axis}),
                         b.getDenseI64ArrayAttr({start}),
                         b.getDenseI64ArrayAttr({end}),
                         b.getDenseI64ArrayAttr({1}));
}

/// The `count` elements padded on one side of `axis` (`before` or after);
/// `fill` is the scalar of constant mode.
static Value padBlock(GraphImporter &g, Value v, int64_t axis, int64_t count,
                      bool before, StringRef mode, Value fill) {
  SmallVector<int64_t> shape(shapeOf(v));
  int64_t len = shape[axis];
  if (mode == "constant") {
    shape[axis] = count;
    return ExpandOp::create(g.builder(), g.loc(), fill,
                            g.builder().getDenseI64ArrayAttr(shape));
  }
  if (mode == "edge")
    return repeatAlong(g, before ? sliceAlong(g, v, axis, 0, 1)
                                 : sliceAlong(g, v, axis, len - 1, len),
                       axis, count);
  // reflect: the elements next to the edge, mirrored, one slice each.
  SmallVector<Value> parts;
  for (int64_t k = 0; k < count; ++k) {
    int64_t src = before ? count - k : len - 2 - k;
    parts.push_back(sliceAlong(g, v, axis, src, src + 1));
  }
  if (parts.size() == 1)
    return parts.front();
  return ConcatOp::create(g.builder(), g.loc(), parts,
                          g.builder().getI64IntegerAttr(axis));
}

static LogicalResult convertPad(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(*x);
  int64_t rank = shape.size();
  auto specs = padSpecs(g, rank);
  auto modeOr = padMode(g);
  if (failed(specs) || failed(modeOr))
    return failure();
  const std::string &mode = *modeOr;
  Value fill;
  if (g.hasInput(2)) {
    auto value = g.data(2);
    if (failed(value))
      return failure();
    if (!shapeOf(*value).empty())
      return g.error("unsupported Pad constant_value '" + g.node().input(2) +
                         "' of shape " + shapeText(shapeOf(*value)),
                     "it must be a scalar");
    fill = *value;
  } else if (mode == "constant") {
    fill = g.scalar(0.0f);
  }
  Value v = *x;
  for (int64_t axis = 0; axis < rank; ++axis) {
    PadSpec s = (*specs)[axis];
    int64_t len = shapeOf(v)[axis];
    // Negative pads crop.
    if (s.before < 0 || s.after < 0) {
      int64_t start = std::max<int64_t>(0, -s.before);
      int64_t end = len - std::max<int64_t>(0, -s.after);
      if (end <= start)
        return g.error("Pad crops all of axis " + std::to_string(axis) +
                       " of " + shapeText(shape));
      v = sliceAlong(g, v, axis, start, end);
      len = end - start;
    }
    int64_t before = std::max<int64_t>(0, s.before);
    int64_t after = std::max<int64_t>(0, s.after);
    if (before == 0 && after == 0)
      continue;
    if ((mode == "reflect" && (before >= len || after >= len)) ||
        (mode == "edge" && len == 0))
      return g.error(llvm::formatv("cannot Pad axis {0} of size {1} by {2} "
                                   "and {3} in {4} mode",
                                   axis, len, before, after, mode));
    SmallVector<Value> parts;
    if (before)
      parts.push_back(padBlock(g, v, axis, before, true, mode, fill));
    parts.push_back(v);
    if (after)
      parts.push_back(padBlock(g, v, axis, after, false, mode, fill));
    v = ConcatOp::create(g.builder(), g.loc(), parts,
                         g.builder().getI64IntegerAttr(axis));
  }
  return g.holdsConvertedInts(0) ? g.defineConvertedInts(0, v)
                                 : g.define(0, v);
}

//===----------------------------------------------------------------------===//
// Average pooling
//===----------------------------------------------------------------------===//

/// The average pooling of the 2-D `x2` ([N, C, H, W]) over `win`: a
/// depthwise `conv2d` with a constant `1/k` filter, times the window's share
/// of counted elements where a window holds padding (the real elements, or
/// with `includePad` the `declared` pads as well, not ceil_mode's).
static Value averagePool2d(GraphImporter &g, Value x2, const Window &win,
                           ArrayRef<int64_t> declared, bool includePad) {
  ArrayRef<int64_t> in2 = shapeOf(x2);
  int64_t kh = win.kernel[0], kw = win.kernel[1], c = in2[1];
  OpBuilder &b = g.builder();
  Value filter = g.materialize(ConstTensor::ofFloats(
      {c, 1, kh, kw}, std::vector<float>(c * kh * kw, 1.0f / (kh * kw))));
  Value y = Conv2dOp::create(b, g.loc(), x2, filter,
                             b.getDenseI64ArrayAttr(win.strides),
                             b.getDenseI64ArrayAttr(win.pads),
                             b.getDenseI64ArrayAttr({1, 1}),
                             b.getI64IntegerAttr(c));
  ArrayRef<int64_t> out = shapeOf(y);
  int64_t oh = out[2], ow = out[3];
  std::vector<float> scale(oh * ow);
  bool partial = false;
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t j = 0; j < ow; ++j) {
      auto counted = [&](int64_t o, int d, int64_t k) {
        int64_t start = o * win.strides[d] - win.pads[d];
        int64_t lo = includePad ? -declared[d] : 0;
        int64_t hi = in2[2 + d] + (includePad ? declared[d + 2] : 0);
        return std::min(start + k, hi) - std::max(start, lo);
      };
      int64_t count = counted(i, 0, kh) * counted(j, 1, kw);
      partial |= count != kh * kw;
      scale[i * ow + j] = static_cast<float>(kh * kw) / count;
    }
  if (!partial)
    return y;
  return MulOp::create(b, g.loc(), y,
                       g.materialize(ConstTensor::ofFloats({1, 1, oh, ow},
                                                           std::move(scale))));
}

/// 3-D pooling of `[N, C, D, H, W]`: the 2-D pooling of `[N, C*D, H, W]`,
/// then the max or mean of the depth window's strided slices.
static LogicalResult convertPool3d(GraphImporter &g, Value x, bool isMax) {
  ArrayRef<int64_t> in = shapeOf(x);
  auto win = poolWindow(g, in.drop_front(2));
  if (failed(win))
    return failure();
  SmallVector<int64_t> &k = win->kernel, &s = win->strides, &p = win->pads;
  if (p[0] != 0 || p[3] != 0 || g.intAttr("ceil_mode", 0) != 0)
    return g.error("unsupported 3-D " + g.node().op_type() + " with depth "
                       "pads " + listText({p[0], p[3]}) + " or ceil_mode",
                   "3-D pooling takes pads and ceil_mode only along height "
                   "and width");
  int64_t n = in[0], c = in[1], depth = in[2];
  if (depth < k[0])
    return g.error(g.node().op_type() + " window does not fit",
                   "input " + shapeText(in) + ", kernel " + listText(k));
  Window w2;
  w2.kernel = {k[1], k[2]};
  w2.strides = {s[1], s[2]};
  w2.dilations = {1, 1};
  w2.pads = {p[1], p[2], p[4], p[5]};
  auto flat = reshapeTo(g, x, {n, c * depth, in[3], in[4]});
  if (failed(flat))
    return failure();
  OpBuilder &b = g.builder();
  Value pooled;
  if (isMax) {
    for (int d = 0; d < 2; ++d)
      if (w2.pads[d] >= w2.kernel[d] || w2.pads[d + 2] >= w2.kernel[d])
        return g.error("unsupported MaxPool pads " + listText(p) +
                           " for the kernel " + listText(k),
                       "pads must be smaller than the kernel");
    pooled = MaxPool2dOp::create(b, g.loc(), *flat,
                                 b.getDenseI64ArrayAttr(w2.kernel),
                                 b.getDenseI64ArrayAttr(w2.strides),
                                 b.getDenseI64ArrayAttr(w2.pads));
  } else {
    pooled = averagePool2d(g, *flat, w2, w2.pads,
                           g.intAttr("count_include_pad", 0) != 0);
  }
  ArrayRef<int64_t> out2 = shapeOf(pooled);
  auto unflat = reshapeTo(g, pooled, {n, c, depth, out2[2], out2[3]});
  if (failed(unflat))
    return failure();
  int64_t outDepth = (depth - k[0]) / s[0] + 1;
  Value result;
  for (int64_t j = 0; j < k[0]; ++j) {
    Value slice = SliceOp::create(
        b, g.loc(), *unflat, b.getDenseI64ArrayAttr({2}),
        b.getDenseI64ArrayAttr({j}),
        b.getDenseI64ArrayAttr({j + (outDepth - 1) * s[0] + 1}),
        b.getDenseI64ArrayAttr({s[0]}));
    if (!result)
      result = slice;
    else if (isMax)
      result = MaxOp::create(b, g.loc(), result, slice);
    else
      result = AddOp::create(b, g.loc(), result, slice);
  }
  if (!isMax && k[0] > 1)
    result = ScaleOp::create(b, g.loc(), result,
                             b.getF64FloatAttr(1.0 / k[0]));
  return isMax && g.isIntegral(0) ? g.defineConvertedInts(0, result)
                                  : g.define(0, result);
}

LogicalResult onnx_import::convertMaxPool3d(GraphImporter &g, Value x) {
  return convertPool3d(g, x, /*isMax=*/true);
}

FailureOr<Value> onnx_import::dilatedMaxPool2d(GraphImporter &g, Value x2,
                                               Window win) {
  OpBuilder &b = g.builder();
  Value fill = g.scalar(-std::numeric_limits<float>::infinity());
  // Pad with -inf, which never wins a max of a window holding an element.
  Value v = x2;
  for (int d = 0; d < 2; ++d) {
    int64_t axis = 2 + d;
    SmallVector<Value> parts;
    if (win.pads[d] > 0)
      parts.push_back(
          padBlock(g, v, axis, win.pads[d], true, "constant", fill));
    parts.push_back(v);
    if (win.pads[d + 2] > 0)
      parts.push_back(
          padBlock(g, v, axis, win.pads[d + 2], false, "constant", fill));
    if (parts.size() > 1)
      v = ConcatOp::create(b, g.loc(), parts, b.getI64IntegerAttr(axis));
  }
  ArrayRef<int64_t> padded = shapeOf(v);
  SmallVector<int64_t> out(2);
  for (int d = 0; d < 2; ++d)
    out[d] = (padded[2 + d] - win.dilations[d] * (win.kernel[d] - 1) - 1) /
                 win.strides[d] +
             1;
  Value result;
  for (int64_t i = 0; i < win.kernel[0]; ++i)
    for (int64_t j = 0; j < win.kernel[1]; ++j) {
      int64_t h = i * win.dilations[0], w = j * win.dilations[1];
      Value tap = SliceOp::create(
          b, g.loc(), v, b.getDenseI64ArrayAttr({2, 3}),
          b.getDenseI64ArrayAttr({h, w}),
          b.getDenseI64ArrayAttr({h + (out[0] - 1) * win.strides[0] + 1,
                                  w + (out[1] - 1) * win.strides[1] + 1}),
          b.getDenseI64ArrayAttr(win.strides));
      result =
          result ? MaxOp::create(b, g.loc(), result, tap).getResult() : tap;
    }
  return result;
}

static LogicalResult convertAveragePool(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> in = shapeOf(*x);
  if (in.size() == 5)
    return convertPool3d(g, *x, /*isMax=*/false);
  if (in.size() != 3 && in.size() != 4)
    return g.error("unsupported AveragePool of shape " + shapeText(in),
                   "only 1-D, 2-D and 3-D pooling of NC(D)(H)W inputs is "
                   "supported");
  size_t rank = in.size();
  auto win = poolWindow(g, in.drop_front(2));
  auto x2 = liftTo2d(g, *x);
  if (failed(win) || failed(x2))
    return failure();
  SmallVector<int64_t> in2(shapeOf(*x2));
  // The pads a window's divisor counts when count_include_pad is set: the
  // declared ones, not ceil_mode's extra end padding.
  SmallVector<int64_t> declared = win->pads;
  if (failed(ceilModePads(g, in2, *win)))
    return failure();
  Value y = averagePool2d(g, *x2, *win, declared,
                          g.intAttr("count_include_pad", 0) != 0);
  auto lowered = lowerTo1d(g, y, rank);
  if (failed(lowered))
    return failure();
  return g.define(0, *lowered);
}

//===----------------------------------------------------------------------===//
// The family's table
//===----------------------------------------------------------------------===//

static const OpConverter kComposedConverters[] = {
    {"Abs", 6, 17, convertAbs, "loom.max(x, loom.neg(x))"},
    {"AveragePool", 7, 17, convertAveragePool,
     "depthwise loom.conv2d with a constant 1/k filter (x the window's share "
     "of counted elements where a window holds padding); 1-D (as 1 x k) and "
     "2-D, dilation 1, ceil_mode as extra end padding; 3-D as 2-D pooling "
     "then the mean of the depth window's strided slices"},
    {"Clip", 6, 17, convertClip, "loom.max / loom.min with the scalar bounds"},
    {"CumSum", 11, 17, convertCumSum,
     "loom.matmul with a constant triangular matrix along the axis"},
    {"Einsum", 12, 17, convertEinsum,
     "loom.reduce_sum of labels one operand alone has, loom.transpose and "
     "loom.reshape to [batch, kept, contracted], loom.batch_matmul (or "
     "loom.matmul); one or two operands; a diagonal as a strided slice"},
    {"Pad", 11, 17, convertPad,
     "loom.concat with constant blocks (constant) or edge slices (edge, "
     "reflect); loom.slice for negative pads"},
    {"Tile", 6, 17, convertTile, "loom.concat of copies"},
};

ArrayRef<OpConverter> onnx_import::getComposedOpConverters() {
  return kComposedConverters;
}
