//===- OnnxNNOps.cpp - Normalisation, convolution, pooling ------*- C++ -*-===//
//
// Converters for ONNX's neural-network layers. Only the forms the loom ops
// express are accepted (1-D and 2-D convolution and max pooling, the 1-D
// ones as 1 x k windows; statistics outputs that reductions compute);
// everything else is refused with the attribute that is in the way.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

static SmallVector<int64_t> intsAttr(GraphImporter &g, StringRef name,
                                     ArrayRef<int64_t> dflt) {
  if (const onnx::AttributeProto *a = g.attr(name))
    return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
  return SmallVector<int64_t>(dflt);
}

static std::string stringAttr(GraphImporter &g, StringRef name,
                              StringRef dflt) {
  if (const onnx::AttributeProto *a = g.attr(name))
    return a->s();
  return dflt.str();
}

/// Refuses outputs after the first one that some node reads.
static LogicalResult onlyFirstOutputUsed(GraphImporter &g, StringRef why) {
  for (int i = 1; i < g.node().output_size(); ++i)
    if (g.outputUsed(i))
      return g.error(llvm::formatv("unsupported use of output {0} ('{1}') of "
                                   "{2}",
                                   i, g.node().output(i), g.node().op_type()),
                     why);
  return success();
}

/// `value` of shape `[C]` reshaped to `[1, C, 1, ...]` for a rank-`rank`
/// NC... tensor.
static FailureOr<Value> perChannel(GraphImporter &g, Value value,
                                   int64_t rank) {
  SmallVector<int64_t> shape(rank, 1);
  shape[1] = shapeOf(value).front();
  return reshapeTo(g, value, shape);
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

/// `rsqrt(mean((x - mean)^2 over axes) + eps)` with the reduced axes kept as
/// size 1; `mean` is `x`'s mean over the same axes, kept as well.
static Value invStdDev(GraphImporter &g, Value x, Value mean,
                       ArrayRef<int64_t> axes, double eps) {
  OpBuilder &b = g.builder();
  Value centered = SubOp::create(b, g.loc(), x, mean);
  Value squared = MulOp::create(b, g.loc(), centered, centered);
  Value var = ReduceMeanOp::create(b, g.loc(), squared,
                                   b.getDenseI64ArrayAttr(axes),
                                   b.getUnitAttr());
  Value shifted = AddOp::create(b, g.loc(), var,
                                g.scalar(static_cast<float>(eps)));
  return RsqrtOp::create(b, g.loc(), shifted);
}

static LogicalResult convertLayerNorm(GraphImporter &g) {
  auto x = g.data(0);
  auto scale = g.data(1);
  if (failed(x) || failed(scale))
    return failure();
  FailureOr<Value> bias = Value();
  if (g.hasInput(2))
    bias = g.data(2);
  if (failed(bias))
    return failure();
  ArrayRef<int64_t> in = shapeOf(*x);
  int64_t raw = g.intAttr("axis", -1);
  auto axis = normalizeAxis(raw, in.size());
  if (failed(axis))
    return g.error(llvm::formatv("unsupported attribute axis={0}", raw),
                   llvm::formatv("the input has rank {0}", in.size()));
  ArrayRef<int64_t> normalized = in.drop_front(*axis);
  for (Value p : {*scale, *bias})
    if (p && shapeOf(p) != normalized)
      return g.error("unsupported LayerNormalization parameter of shape " +
                         shapeText(shapeOf(p)),
                     "loom.layer_norm needs scale and bias shaped like the "
                     "normalised dimensions " +
                         shapeText(normalized));
  // `stash_type` is the element type of the statistics (and of their
  // computation); loom computes in float32. Other float types only change
  // the rounding of Y, but the Mean/InvStdDev outputs would have them.
  int64_t stash = g.intAttr("stash_type", onnx::TensorProto::FLOAT);
  bool statsUsed = g.outputUsed(1) || g.outputUsed(2);
  if (stash != onnx::TensorProto::FLOAT &&
      (statsUsed || (stash != onnx::TensorProto::DOUBLE &&
                     stash != onnx::TensorProto::FLOAT16 &&
                     stash != onnx::TensorProto::BFLOAT16)))
    return g.error("unsupported attribute stash_type=" + std::to_string(stash) +
                       " (" + elementTypeName(stash) + ")",
                   statsUsed ? "the Mean and InvStdDev outputs are float32 "
                               "only"
                             : "expected a floating-point type");
  OpBuilder &b = g.builder();
  double eps = g.floatAttr("epsilon", 1e-5f);
  if (failed(g.define(0, LayerNormOp::create(b, g.loc(), *x, *scale, *bias,
                                             b.getI64IntegerAttr(*axis),
                                             b.getF64FloatAttr(eps)))))
    return failure();
  if (!statsUsed)
    return success();
  // Mean and InvStdDev: the statistics over the normalised dimensions,
  // which are kept as size 1 (`X.shape[:axis] + [1] * (rank - axis)`).
  SmallVector<int64_t> axes;
  for (int64_t i = *axis; i < static_cast<int64_t>(in.size()); ++i)
    axes.push_back(i);
  Value mean = ReduceMeanOp::create(b, g.loc(), *x,
                                    b.getDenseI64ArrayAttr(axes),
                                    b.getUnitAttr());
  if (g.outputUsed(1) && failed(g.define(1, mean)))
    return failure();
  if (g.outputUsed(2) &&
      failed(g.define(2, invStdDev(g, *x, mean, axes, eps))))
    return failure();
  return success();
}

/// Running statistic `index` (3: mean, 4: variance) of BatchNormalization
/// as data: a float32 initializer with data becomes a constant (a buffer, not
/// a parameter), a runtime value (a graph input) is used as is. An
/// initializer without data is refused: it would become a parameter.
static FailureOr<Value> runningStatistic(GraphImporter &g, unsigned index,
                                         int64_t channels, StringRef why) {
  if (std::optional<ConstTensor> init = g.floatInitializer(index)) {
    if (init->shape != SmallVector<int64_t>{channels})
      return g.error("BatchNormalization statistic of shape " +
                     shapeText(init->shape) + " for " +
                     std::to_string(channels) + " channels");
    return g.materialize(*init);
  }
  if (g.hasInput(index) && g.isInitializer(g.node().input(index)))
    return g.error("unsupported BatchNormalization with running statistics "
                   "that are initializers without data",
                   why);
  auto v = g.data(index);
  if (failed(v))
    return failure();
  if (shapeOf(*v) != ArrayRef<int64_t>{channels})
    return g.error("BatchNormalization statistic of shape " +
                   shapeText(shapeOf(*v)) + " for " +
                   std::to_string(channels) + " channels");
  return v;
}

/// The shortest decimal that `f` is the float32 rounding of: the value an
/// exporter wrote (torch's BatchNorm momentum 0.1 is ONNX's 0.9f, which is
/// 0.89999997615814209 as a double).
static double writtenDecimal(float f) {
  for (int digits = 1; digits < 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.*g", digits, static_cast<double>(f));
    double d = std::strtod(text, nullptr);
    if (static_cast<float>(d) == f)
      return d;
  }
  return f;
}

static LogicalResult convertBatchNorm(GraphImporter &g) {
  auto x = g.data(0);
  auto scale = g.data(1);
  auto bias = g.data(2);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  ArrayRef<int64_t> in = shapeOf(*x);
  if (in.size() < 2)
    return g.error("BatchNormalization input must be N x C x ..., got shape " +
                   shapeText(in));
  for (Value p : {*scale, *bias})
    if (shapeOf(p).size() != 1 || shapeOf(p)[0] != in[1])
      return g.error("BatchNormalization parameter of shape " +
                     shapeText(shapeOf(p)) + " for " + std::to_string(in[1]) +
                     " channels");
  // Opsets 14-15 say it with `training_mode`; before, training graphs have
  // the running statistics as extra outputs.
  bool training = g.opset() >= 14 ? g.intAttr("training_mode", 0) != 0
                                  : g.node().output_size() > 1;
  if (g.opset() < 9 && g.intAttr("spatial", 1) == 0)
    return g.error("unsupported attribute spatial=0",
                   "only per-channel statistics are supported");
  // Outputs 1 and 2 are the updated running statistics (training mode);
  // 3 and 4 (before opset 14) the batch's saved statistics.
  for (int i = 3; i < g.node().output_size(); ++i)
    if (g.outputUsed(i))
      return g.error(llvm::formatv("unsupported use of output {0} ('{1}') of "
                                   "BatchNormalization",
                                   i, g.node().output(i)),
                     "only the running statistics (outputs 1 and 2) are "
                     "computed");
  OpBuilder &b = g.builder();
  double eps = g.floatAttr("epsilon", 1e-5f);
  int64_t rank = in.size();
  if (training) {
    // Running statistics that are initializers are state of the training
    // step, updated by it and written back (loom-append-running-stats).
    double momentum = writtenDecimal(g.floatAttr("momentum", 0.9f));
    auto statOf = [&](unsigned index) -> StringAttr {
      if (!g.hasInput(index) || !g.isInitializer(g.node().input(index)) ||
          g.inputElementType(index) != onnx::TensorProto::FLOAT)
        return nullptr;
      return b.getStringAttr(g.node().input(index));
    };
    StringAttr runningMean = statOf(3), runningVar = statOf(4);
    bool tracked = runningMean && runningVar;
    auto bn = BatchNormOp::create(
        b, g.loc(), *x, *scale, *bias, b.getF64FloatAttr(eps),
        tracked ? b.getF64FloatAttr(momentum) : nullptr,
        tracked ? runningMean : nullptr, tracked ? runningVar : nullptr);
    if (failed(g.define(0, bn)))
      return failure();
    if (!g.outputUsed(1) && !g.outputUsed(2))
      return success();
    // Outputs 1 and 2 as the ONNX operator defines them: running * momentum
    // + batch * (1 - momentum), with the batch's mean and biased variance
    // over every dimension but the channels (the value loom.batch_norm
    // normalises with).
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < rank; ++i)
      if (i != 1)
        axes.push_back(i);
    Value keptMean = ReduceMeanOp::create(b, g.loc(), *x,
                                          b.getDenseI64ArrayAttr(axes),
                                          b.getUnitAttr());
    Value centered = SubOp::create(b, g.loc(), *x, keptMean);
    Value squared = MulOp::create(b, g.loc(), centered, centered);
    Value batchVar = ReduceMeanOp::create(b, g.loc(), squared,
                                          b.getDenseI64ArrayAttr(axes),
                                          UnitAttr());
    auto batchMean = reshapeTo(g, keptMean, {in[1]});
    if (failed(batchMean))
      return failure();
    Value batchStats[2] = {*batchMean, batchVar};
    for (unsigned out : {1u, 2u}) {
      if (!g.outputUsed(out))
        continue;
      auto running = runningStatistic(
          g, 2 + out, in[1],
          "the updated running statistics are computed from them");
      if (failed(running))
        return failure();
      Value kept = ScaleOp::create(b, g.loc(), *running,
                                   b.getF64FloatAttr(momentum));
      Value added = ScaleOp::create(b, g.loc(), batchStats[out - 1],
                                    b.getF64FloatAttr(1.0 - momentum));
      if (failed(g.define(out, AddOp::create(b, g.loc(), kept, added))))
        return failure();
    }
    return success();
  }
  for (int i = 1; i < 3 && i < g.node().output_size(); ++i)
    if (g.outputUsed(i))
      return g.error(llvm::formatv("unsupported use of output {0} ('{1}') of "
                                   "BatchNormalization in inference mode",
                                   i, g.node().output(i)),
                     "the running statistics are outputs in training mode "
                     "only");

  // Inference: (x - mean) / sqrt(var + eps) * scale + bias. Running
  // statistics that are initializers with data become constants (they are
  // buffers, not parameters) and 1/sqrt(var + eps) is folded; runtime ones
  // (graph inputs) are reshaped to [1, C, 1, ...] and computed with.
  SmallVector<int64_t> channel(rank, 1);
  channel[1] = in[1];
  Value centered, normalized;
  auto mean = g.floatInitializer(3), var = g.floatInitializer(4);
  if (mean && var) {
    if (mean->shape != SmallVector<int64_t>{in[1]} ||
        var->shape != SmallVector<int64_t>{in[1]})
      return g.error("BatchNormalization statistics of shapes " +
                     shapeText(mean->shape) + " and " + shapeText(var->shape) +
                     " for " + std::to_string(in[1]) + " channels");
    ConstTensor inv = *var;
    for (float &v : inv.floats)
      v = static_cast<float>(1.0 / std::sqrt(static_cast<double>(v) + eps));
    mean->shape = channel;
    inv.shape = channel;
    centered = SubOp::create(b, g.loc(), *x, g.materialize(*mean));
    normalized = MulOp::create(b, g.loc(), centered, g.materialize(inv));
  } else {
    const char *why = "export with the statistics as initializers with data";
    auto m = runningStatistic(g, 3, in[1], why);
    if (failed(m))
      return failure();
    auto v = runningStatistic(g, 4, in[1], why);
    if (failed(v))
      return failure();
    auto m4 = perChannel(g, *m, rank);
    auto v4 = perChannel(g, *v, rank);
    if (failed(m4) || failed(v4))
      return failure();
    centered = SubOp::create(b, g.loc(), *x, *m4);
    Value shifted = AddOp::create(b, g.loc(), *v4,
                                  g.scalar(static_cast<float>(eps)));
    normalized = MulOp::create(b, g.loc(), centered,
                               RsqrtOp::create(b, g.loc(), shifted));
  }
  auto s = perChannel(g, *scale, rank);
  auto c = perChannel(g, *bias, rank);
  if (failed(s) || failed(c))
    return failure();
  Value scaled = MulOp::create(b, g.loc(), normalized, *s);
  return g.define(0, AddOp::create(b, g.loc(), scaled, *c));
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// SAME_UPPER / SAME_LOWER become explicit pads giving `ceil(in / stride)`
/// outputs, the odd pad at the end / the beginning.
FailureOr<Window> onnx_import::windowAttrs(GraphImporter &g,
                                           ArrayRef<int64_t> spatial,
                                           ArrayRef<int64_t> kernelDflt) {
  size_t r = spatial.size();
  Window w;
  w.kernel = intsAttr(g, "kernel_shape", kernelDflt);
  w.strides = intsAttr(g, "strides", SmallVector<int64_t>(r, 1));
  w.dilations = intsAttr(g, "dilations", SmallVector<int64_t>(r, 1));
  if (w.kernel.size() != r || w.strides.size() != r ||
      w.dilations.size() != r)
    return g.error("unsupported " + g.node().op_type() + " attributes " +
                       "kernel_shape=" + listText(w.kernel) +
                       " strides=" + listText(w.strides) +
                       " dilations=" + listText(w.dilations),
                   llvm::formatv("expected {0} of each for a {0}-D window", r));
  for (size_t d = 0; d < r; ++d)
    if (w.kernel[d] < 1 || w.strides[d] < 1 || w.dilations[d] < 1)
      return g.error("unsupported " + g.node().op_type() + " attributes " +
                         "kernel_shape=" + listText(w.kernel) +
                         " strides=" + listText(w.strides) +
                         " dilations=" + listText(w.dilations),
                     "sizes, strides and dilations must be positive");
  std::string autoPad = stringAttr(g, "auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    w.pads.assign(2 * r, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    w.pads.assign(2 * r, 0);
    for (size_t d = 0; d < r; ++d) {
      int64_t out = (spatial[d] + w.strides[d] - 1) / w.strides[d];
      int64_t span = w.dilations[d] * (w.kernel[d] - 1) + 1;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * w.strides[d] + span - spatial[d]);
      int64_t small = total / 2, large = total - small;
      bool upper = autoPad == "SAME_UPPER";
      w.pads[d] = upper ? small : large;
      w.pads[d + r] = upper ? large : small;
    }
  } else if (autoPad == "NOTSET") {
    w.pads = intsAttr(g, "pads", SmallVector<int64_t>(2 * r, 0));
    if (w.pads.size() != 2 * r ||
        llvm::any_of(w.pads, [](int64_t p) { return p < 0; }))
      return g.error("unsupported attribute pads=" + listText(w.pads),
                     llvm::formatv("expected {0} non-negative pads of a {1}-D "
                                   "window",
                                   2 * r, r));
  } else {
    return g.error("unsupported attribute auto_pad=" + autoPad,
                   "expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  }
  if (r == 1) {
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    w.pads = {0, w.pads[0], 0, w.pads[1]};
  }
  return w;
}

FailureOr<Window> onnx_import::poolWindow(GraphImporter &g,
                                          ArrayRef<int64_t> spatial,
                                          bool dilated) {
  if (!g.attr("kernel_shape"))
    return g.error(g.node().op_type() + " needs the attribute kernel_shape");
  auto win = windowAttrs(g, spatial, {});
  if (failed(win))
    return failure();
  if (!dilated &&
      llvm::any_of(win->dilations, [](int64_t d) { return d != 1; }))
    return g.error("unsupported attribute dilations=" +
                       listText(intsAttr(g, "dilations", {})),
                   "only dilation 1 is supported");
  return win;
}

FailureOr<Value> onnx_import::liftTo2d(GraphImporter &g, Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  if (shape.size() != 3)
    return v;
  return reshapeTo(g, v, {shape[0], shape[1], 1, shape[2]});
}

FailureOr<Value> onnx_import::lowerTo1d(GraphImporter &g, Value v,
                                        size_t rank) {
  if (rank != 3)
    return v;
  ArrayRef<int64_t> shape = shapeOf(v);
  return reshapeTo(g, v, {shape[0], shape[1], shape[3]});
}

static LogicalResult convertConv(GraphImporter &g) {
  auto x = g.data(0);
  auto w = g.data(1);
  if (failed(x) || failed(w))
    return failure();
  ArrayRef<int64_t> in = shapeOf(*x), filter = shapeOf(*w);
  if ((in.size() != 3 && in.size() != 4) || filter.size() != in.size())
    return g.error("unsupported Conv of shapes " + shapeText(in) + " and " +
                       shapeText(filter),
                   "only 1-D and 2-D convolutions of NC(H)W inputs are "
                   "supported");
  size_t rank = in.size();
  auto win = windowAttrs(g, in.drop_front(2), filter.drop_front(2));
  if (failed(win))
    return failure();
  int64_t groups = g.intAttr("group", 1);
  if (ArrayRef<int64_t>(win->kernel).take_back(rank - 2) !=
      filter.drop_front(2))
    return g.error("unsupported Conv attribute kernel_shape=" +
                       listText(intsAttr(g, "kernel_shape", {})),
                   "expected the filter's kernel size " +
                       shapeText(filter.drop_front(2)));
  if (groups < 1 || in[1] % groups || filter[0] % groups ||
      filter[1] * groups != in[1])
    return g.error(llvm::formatv("Conv channels {0} do not match filter {1} "
                                 "with group={2}",
                                 in[1], shapeText(filter), groups));
  auto x2 = liftTo2d(g, *x);
  auto w2 = liftTo2d(g, *w);
  if (failed(x2) || failed(w2))
    return failure();
  ArrayRef<int64_t> in2 = shapeOf(*x2), filter2 = shapeOf(*w2);
  for (int d = 0; d < 2; ++d) {
    int64_t span = win->dilations[d] * (filter2[2 + d] - 1) + 1;
    if (in2[2 + d] + win->pads[d] + win->pads[d + 2] < span)
      return g.error("Conv window does not fit the padded input",
                     "input " + shapeText(in) + ", filter " +
                         shapeText(filter) + ", pads " + listText(win->pads));
  }
  OpBuilder &b = g.builder();
  Value result = Conv2dOp::create(
      b, g.loc(), *x2, *w2, b.getDenseI64ArrayAttr(win->strides),
      b.getDenseI64ArrayAttr(win->pads),
      b.getDenseI64ArrayAttr(win->dilations), b.getI64IntegerAttr(groups));
  if (g.hasInput(2)) {
    auto bias = g.data(2);
    if (failed(bias))
      return failure();
    if (shapeOf(*bias) != ArrayRef<int64_t>{filter[0]})
      return g.error("Conv bias of shape " + shapeText(shapeOf(*bias)) +
                     " for " + std::to_string(filter[0]) + " output channels");
    auto reshaped = perChannel(g, *bias, 4);
    if (failed(reshaped))
      return failure();
    result = AddOp::create(b, g.loc(), result, *reshaped);
  }
  auto lowered = lowerTo1d(g, result, rank);
  if (failed(lowered))
    return failure();
  return g.define(0, *lowered);
}

LogicalResult onnx_import::ceilModePads(GraphImporter &g,
                                        ArrayRef<int64_t> in2, Window &win) {
  SmallVector<int64_t> &k = win.kernel, &s = win.strides, &p = win.pads;
  bool ceil = g.intAttr("ceil_mode", 0) != 0;
  for (int d = 0; d < 2; ++d) {
    int64_t room = in2[2 + d] + p[d] + p[d + 2] - k[d];
    if (room < 0)
      return g.error(g.node().op_type() + " window does not fit",
                     "input " + shapeText(in2) + ", kernel " +
                         listText(intsAttr(g, "kernel_shape", {})) +
                         ", pads " + listText(intsAttr(g, "pads", {})));
    if (!ceil || room % s[d] == 0)
      continue;
    // ceil_mode: one more window, which reaches past the end pad; it becomes
    // extra end padding (padding never wins a max, and an average does not
    // count it). The last window must start before the end pad, where ONNX's
    // conventions agree.
    int64_t last = (room / s[d] + 1) * s[d];
    if (last >= in2[2 + d] + p[d])
      return g.error("unsupported attribute ceil_mode=1",
                     "the last window would start in the padding");
    p[d + 2] += last + k[d] - (in2[2 + d] + p[d] + p[d + 2]);
  }
  return success();
}

static LogicalResult convertMaxPool(GraphImporter &g) {
  if (failed(onlyFirstOutputUsed(g, "loom.max_pool2d has no Indices output")))
    return failure();
  // Integers (uint8 images) pool as the f32 values that hold them: a max of
  // exact values is exact.
  bool ints = g.isIntegral(0);
  auto x = ints ? g.numeric(0) : g.data(0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> in = shapeOf(*x);
  if (in.size() == 5)
    return convertMaxPool3d(g, *x);
  if (in.size() != 3 && in.size() != 4)
    return g.error("unsupported MaxPool of shape " + shapeText(in),
                   "only 1-D, 2-D and 3-D pooling of NC(D)(H)W inputs is "
                   "supported");
  size_t rank = in.size();
  auto win = poolWindow(g, in.drop_front(2), /*dilated=*/true);
  if (failed(win))
    return failure();
  if (g.intAttr("storage_order", 0) != 0)
    return g.error("unsupported attribute storage_order=1");
  auto x2 = liftTo2d(g, *x);
  if (failed(x2))
    return failure();
  ArrayRef<int64_t> in2 = shapeOf(*x2);
  // The window's extent: a dilated kernel spans d * (k - 1) + 1 elements.
  Window span = *win;
  for (int d = 0; d < 2; ++d)
    span.kernel[d] = win->dilations[d] * (win->kernel[d] - 1) + 1;
  if (failed(ceilModePads(g, in2, span)))
    return failure();
  SmallVector<int64_t> &k = span.kernel, &p = span.pads;
  for (int d = 0; d < 2; ++d)
    if (p[d] >= k[d] || p[d + 2] >= k[d])
      return g.error("unsupported MaxPool pads " + listText(p) +
                         " for the kernel " + listText(win->kernel),
                     "pads must be smaller than the window");
  win->pads = span.pads;
  FailureOr<Value> pooled;
  if (llvm::any_of(win->dilations, [](int64_t d) { return d != 1; })) {
    pooled = dilatedMaxPool2d(g, *x2, *win);
  } else {
    OpBuilder &b = g.builder();
    pooled = MaxPool2dOp::create(b, g.loc(), *x2,
                                 b.getDenseI64ArrayAttr(win->kernel),
                                 b.getDenseI64ArrayAttr(win->strides),
                                 b.getDenseI64ArrayAttr(win->pads))
                 .getResult();
  }
  if (failed(pooled))
    return failure();
  auto lowered = lowerTo1d(g, *pooled, rank);
  if (failed(lowered))
    return failure();
  return ints ? g.defineConvertedInts(0, *lowered) : g.define(0, *lowered);
}

/// `GlobalAveragePool` / `GlobalMaxPool`: the mean / max over the spatial
/// axes, kept as size-1 dimensions.
template <typename ReduceOpT>
static LogicalResult convertGlobalPool(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  int64_t rank = shapeOf(*x).size();
  if (rank < 3)
    return g.error(g.node().op_type() +
                   " input must be N x C x ..., got "
                   "shape " +
                   shapeText(shapeOf(*x)));
  SmallVector<int64_t> axes;
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  OpBuilder &b = g.builder();
  return g.define(0, ReduceOpT::create(b, g.loc(), *x,
                                       b.getDenseI64ArrayAttr(axes),
                                       b.getUnitAttr()));
}

//===----------------------------------------------------------------------===//
// The family's table
//===----------------------------------------------------------------------===//

static const OpConverter kNNConverters[] = {
    {"BatchNormalization", 7, 17, convertBatchNorm,
     "loom.batch_norm (training mode, naming its running statistics, which "
     "the training step updates; outputs 1 and 2: loom.reduce_mean, "
     "loom.scale); inference mode: element-wise ops"},
    {"Conv", 1, 17, convertConv,
     "loom.conv2d [+ loom.add of the bias reshaped to [1, C, 1, 1]]; 1-D "
     "as 1 x k"},
    {"GlobalAveragePool", 1, 17, convertGlobalPool<ReduceMeanOp>,
     "loom.reduce_mean over the spatial axes, keep_dims"},
    {"GlobalMaxPool", 1, 17, convertGlobalPool<ReduceMaxOp>,
     "loom.reduce_max over the spatial axes, keep_dims"},
    {"LayerNormalization", 17, 17, convertLayerNorm,
     "loom.layer_norm; Mean/InvStdDev: loom.reduce_mean, loom.rsqrt"},
    {"MaxPool", 1, 17, convertMaxPool,
     "loom.max_pool2d; 1-D as 1 x k; 3-D as 2-D then the max of depth "
     "slices; a dilated window as the max of its strided slices (Indices "
     "unused)"},
};

ArrayRef<OpConverter> onnx_import::getNNOpConverters() { return kNNConverters; }
