//===- OnnxFoldingIndex.cpp - Folding of indexing and scans -----*- C++ -*-===//
//
// Folders for ops that move or accumulate elements of known tensors, as
// exporters use them on constants: OPT's causal mask (`ScatterND`) and
// position ids (`CumSum`), GPT-J's rotary tables (`Tile`,
// `GatherElements`), padding (`Pad`). Each follows the ONNX reference
// semantics; see OnnxFolding.cpp for the dispatch.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

/// The row-major index of `coords` in a tensor of `shape`.
static int64_t linearIndex(ArrayRef<int64_t> coords, ArrayRef<int64_t> strides) {
  int64_t i = 0;
  for (auto [c, s] : llvm::zip(coords, strides))
    i += c * s;
  return i;
}

/// The coordinates of element `i` of a tensor with `shape`.
static SmallVector<int64_t> coordsOf(int64_t i, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> coords(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    coords[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return coords;
}

/// A scalar integer input (axis of CumSum), or failure.
static FailureOr<int64_t> scalarInt(GraphImporter &g, unsigned index,
                                    StringRef what) {
  auto v = g.constInts(index);
  if (failed(v))
    return failure();
  if (v->size() != 1)
    return g.error(g.node().op_type() + " needs a scalar " + what,
                   "got " + listText(*v));
  return (*v)[0];
}

FailureOr<bool> onnx_import::foldCumSum(GraphImporter &g) {
  const ConstTensor &in = *g.constant(0);
  auto rawAxis = scalarInt(g, 1, "axis");
  if (failed(rawAxis))
    return failure();
  auto axis = normalizeAxis(*rawAxis, in.shape.size());
  if (failed(axis))
    return g.error(llvm::formatv("unsupported axis {0}", *rawAxis),
                   llvm::formatv("the input has rank {0}", in.shape.size()));
  bool exclusive = g.intAttr("exclusive", 0) != 0;
  bool reverse = g.intAttr("reverse", 0) != 0;
  if (in.kind == ConstTensor::Kind::Bool)
    return g.error("unsupported CumSum of a bool tensor");
  ConstTensor out = in;
  SmallVector<int64_t> strides = stridesOf(in.shape);
  int64_t len = in.shape[*axis], stride = strides[*axis];
  for (int64_t i = 0, n = in.numElements(); i < n; ++i) {
    if ((i / stride) % len != 0)
      continue; // visit each line once, from its first element
    double sumF = 0;
    int64_t sumI = 0;
    for (int64_t k = 0; k < len; ++k) {
      int64_t pos = reverse ? len - 1 - k : k;
      int64_t at = i + pos * stride;
      if (in.isFloat()) {
        double x = in.floats[at];
        out.floats[at] = static_cast<float>(exclusive ? sumF : sumF + x);
        sumF += x;
      } else {
        int64_t x = in.ints[at];
        out.ints[at] = exclusive ? sumI : sumI + x;
        sumI += x;
      }
    }
  }
  g.defineConst(0, std::move(out));
  return true;
}

FailureOr<bool> onnx_import::foldTile(GraphImporter &g) {
  const ConstTensor &in = *g.constant(0);
  auto repeats = g.constInts(1);
  if (failed(repeats))
    return failure();
  if (repeats->size() != in.shape.size() ||
      llvm::any_of(*repeats, [](int64_t r) { return r < 0; }))
    return g.error("Tile repeats " + listText(*repeats) +
                   " do not fit an input of shape " + shapeText(in.shape));
  SmallVector<int64_t> shape;
  for (auto [d, r] : llvm::zip(in.shape, *repeats))
    shape.push_back(d * r);
  int64_t n = product(shape);
  if (n > kMaxFoldedElements)
    return false;
  SmallVector<int64_t> inStrides = stridesOf(in.shape);
  std::vector<int64_t> src(n);
  for (int64_t i = 0; i < n; ++i) {
    SmallVector<int64_t> c = coordsOf(i, shape);
    for (auto [x, d] : llvm::zip(c, in.shape))
      x %= d;
    src[i] = linearIndex(c, inStrides);
  }
  g.defineConst(0, in.select(shape, src));
  return true;
}

FailureOr<bool> onnx_import::foldGatherElements(GraphImporter &g) {
  const ConstTensor &data = *g.constant(0), &idx = *g.constant(1);
  int64_t rank = data.shape.size();
  auto axis = normalizeAxis(g.intAttr("axis", 0), rank);
  if (failed(axis) || static_cast<int64_t>(idx.shape.size()) != rank)
    return g.error("GatherElements of indices " + shapeText(idx.shape) +
                   " into " + shapeText(data.shape) + " along axis " +
                   std::to_string(g.intAttr("axis", 0)));
  if (idx.isFloat())
    return g.error("GatherElements indices are not integers");
  SmallVector<int64_t> strides = stridesOf(data.shape);
  int64_t n = idx.numElements();
  std::vector<int64_t> src(n);
  for (int64_t i = 0; i < n; ++i) {
    SmallVector<int64_t> c = coordsOf(i, idx.shape);
    int64_t k = idx.ints[i];
    int64_t len = data.shape[*axis];
    if (k < -len || k >= len)
      return g.error(llvm::formatv("GatherElements index {0} is out of "
                                   "range for axis {1} of size {2}",
                                   k, *axis, len));
    c[*axis] = k < 0 ? k + len : k;
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && c[d] >= data.shape[d])
        return g.error("GatherElements indices " + shapeText(idx.shape) +
                       " exceed the data " + shapeText(data.shape));
    src[i] = linearIndex(c, strides);
  }
  g.defineConst(0, data.select(SmallVector<int64_t>(idx.shape), src));
  return true;
}

FailureOr<bool> onnx_import::foldGatherND(GraphImporter &g) {
  const ConstTensor &data = *g.constant(0), &idx = *g.constant(1);
  if (idx.isFloat() || idx.shape.empty())
    return g.error("GatherND needs integer indices");
  int64_t batch = g.intAttr("batch_dims", 0);
  if (failed(checkGatherNdShapes(g, data.shape, idx.shape, batch)))
    return failure();
  int64_t k = idx.shape.back();
  SmallVector<int64_t> shape(idx.shape.begin(), idx.shape.end() - 1);
  shape.append(data.shape.begin() + batch + k, data.shape.end());
  int64_t n = product(shape);
  if (n > kMaxFoldedElements)
    return false;
  SmallVector<int64_t> strides = stridesOf(data.shape);
  int64_t slice = product(ArrayRef<int64_t>(data.shape).drop_front(batch + k));
  // Index rows per batch position, and the data's elements per position.
  int64_t rowsPerBatch =
      product(ArrayRef<int64_t>(idx.shape).drop_front(batch).drop_back());
  int64_t batchStride =
      product(ArrayRef<int64_t>(data.shape).drop_front(batch));
  std::vector<int64_t> src;
  src.reserve(n);
  for (int64_t row = 0; row * k < idx.numElements(); ++row) {
    int64_t base = (row / rowsPerBatch) * batchStride;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = idx.ints[row * k + j], len = data.shape[batch + j];
      if (v < -len || v >= len)
        return g.error(llvm::formatv("GatherND index {0} is out of range "
                                     "for dimension {1} of size {2}",
                                     v, batch + j, len));
      base += (v < 0 ? v + len : v) * strides[batch + j];
    }
    for (int64_t e = 0; e < slice; ++e)
      src.push_back(base + e);
  }
  g.defineConst(0, data.select(shape, src));
  return true;
}

FailureOr<bool> onnx_import::foldScatterND(GraphImporter &g) {
  const ConstTensor &data = *g.constant(0), &idx = *g.constant(1),
                    &upd = *g.constant(2);
  if (g.attr("reduction") && g.attr("reduction")->s() != "none")
    return false; // loom.scatter_nd computes it
  if (idx.isFloat() || idx.shape.empty() || data.kind != upd.kind)
    return g.error("ScatterND needs integer indices and updates of the "
                   "data's element type");
  int64_t k = idx.shape.back(), rank = data.shape.size();
  if (k > rank)
    return g.error(llvm::formatv("ScatterND indices address {0} dimensions "
                                 "of a rank-{1} tensor",
                                 k, rank));
  int64_t slice = product(ArrayRef<int64_t>(data.shape).drop_front(k));
  int64_t rows = product(ArrayRef<int64_t>(idx.shape).drop_back());
  if (upd.numElements() != rows * slice)
    return g.error("ScatterND updates of shape " + shapeText(upd.shape) +
                   " do not match indices " + shapeText(idx.shape) +
                   " into " + shapeText(data.shape));
  SmallVector<int64_t> strides = stridesOf(data.shape);
  ConstTensor out = data;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t c = idx.ints[r * k + d], len = data.shape[d];
      if (c < -len || c >= len)
        return g.error(llvm::formatv("ScatterND index {0} is out of range "
                                     "for dimension {1} of size {2}",
                                     c, d, len));
      base += (c < 0 ? c + len : c) * strides[d];
    }
    for (int64_t j = 0; j < slice; ++j) {
      if (out.isFloat())
        out.floats[base + j] = upd.floats[r * slice + j];
      else
        out.ints[base + j] = upd.ints[r * slice + j];
    }
  }
  g.defineConst(0, std::move(out));
  return true;
}

FailureOr<SmallVector<PadSpec>> onnx_import::padSpecs(GraphImporter &g,
                                                      int64_t rank) {
  auto pads = g.constInts(1);
  if (failed(pads))
    return failure();
  SmallVector<int64_t> axes;
  if (g.hasInput(3)) {
    auto given = g.constInts(3);
    if (failed(given))
      return failure();
    for (int64_t a : *given) {
      auto axis = normalizeAxis(a, rank);
      if (failed(axis))
        return g.error(llvm::formatv("unsupported Pad axis {0}", a),
                       llvm::formatv("the input has rank {0}", rank));
      axes.push_back(*axis);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads->size() != 2 * axes.size())
    return g.error(llvm::formatv("Pad has {0} pads for {1} axes",
                                 pads->size(), axes.size()));
  SmallVector<PadSpec> specs(rank);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    specs[axis].before = (*pads)[i];
    specs[axis].after = (*pads)[i + axes.size()];
  }
  return specs;
}

FailureOr<std::string> onnx_import::padMode(GraphImporter &g) {
  std::string mode = g.attr("mode") ? g.attr("mode")->s() : "constant";
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return g.error("unsupported Pad mode '" + mode + "'",
                   "constant, reflect and edge are supported");
  return mode;
}

FailureOr<bool> onnx_import::foldPad(GraphImporter &g) {
  const ConstTensor &in = *g.constant(0);
  int64_t rank = in.shape.size();
  auto specs = padSpecs(g, rank);
  auto modeOr = padMode(g);
  if (failed(specs) || failed(modeOr))
    return failure();
  const std::string &mode = *modeOr;
  double fill = 0;
  if (g.hasInput(2)) {
    const ConstTensor *value = g.constant(2);
    if (!value || value->numElements() != 1)
      return g.error("Pad needs a scalar constant_value");
    fill = value->get(0);
  }
  SmallVector<int64_t> shape;
  for (auto [d, s] : llvm::zip(in.shape, *specs)) {
    int64_t size = d + s.before + s.after;
    if (size < 0 || (mode == "reflect" && (s.before >= d || s.after >= d)) ||
        (mode != "constant" && d == 0 && (s.before > 0 || s.after > 0)))
      return g.error("cannot Pad " + shapeText(in.shape) + " in " + mode +
                     " mode by these pads");
    shape.push_back(size);
  }
  int64_t n = product(shape);
  if (n > kMaxFoldedElements)
    return false;
  SmallVector<int64_t> inStrides = stridesOf(in.shape);
  ConstTensor out;
  out.kind = in.kind;
  out.shape = shape;
  for (int64_t i = 0; i < n; ++i) {
    SmallVector<int64_t> c = coordsOf(i, shape);
    bool inside = true;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t x = c[d] - (*specs)[d].before, len = in.shape[d];
      if (x >= 0 && x < len) {
        c[d] = x;
        continue;
      }
      if (mode == "constant") {
        inside = false;
        break;
      }
      if (mode == "edge")
        c[d] = x < 0 ? 0 : len - 1;
      else
        c[d] = x < 0 ? -x : 2 * (len - 1) - x;
    }
    if (!inside) {
      if (out.isFloat())
        out.floats.push_back(static_cast<float>(fill));
      else
        out.ints.push_back(static_cast<int64_t>(fill));
      continue;
    }
    int64_t src = linearIndex(c, inStrides);
    if (out.isFloat())
      out.floats.push_back(in.floats[src]);
    else
      out.ints.push_back(in.ints[src]);
  }
  g.defineConst(0, std::move(out));
  return true;
}
