//===- OnnxComposedMath.cpp - Activations and reductions from loom ops -*-===//
//
// ONNX activations, reductions and LogSoftmax that loom builds from the
// element-wise ops and reductions it has, so each trains with their kernels
// and gradients:
//
// - `Elu`, `Selu`, `Celu`: `relu(x) + a * (exp(min(x, 0) / c) - 1)` (times
//   gamma for Selu); `LeakyRelu`, `PRelu`: `relu(x) + slope * min(x, 0)`;
//   `HardSigmoid`: `min(max(alpha * x + beta, 0), 1)`, `HardSwish` x times
//   it; `Softplus`: `relu(x) + log(1 + exp(-|x|))` (never overflows; absolute
//   error about 1e-7 where the result is tiny); `Softsign`: `x / (1 + |x|)`;
//   `ThresholdedRelu`, `Shrink`, `Sign`: `select` on comparison masks (no
//   gradient through the masks); `Sinh`, `Cosh` from `exp`, `Tan` as
//   `sin / cos`;
// - `Sum`, `Mean` of any number of broadcasting inputs;
// - `ReduceMin` = `-reduce_max(-x)`; `ReduceL1`, `ReduceL2`,
//   `ReduceSumSquare`, `ReduceLogSum` from `reduce_sum`; `ReduceLogSumExp`
//   (`m + log(sum(exp(x - m)))`, m the max) and `LogSoftmax`
//   (`(x - m) - log(sum(exp(x - m)))`) shifted by the max, so large inputs
//   neither overflow nor lose precision.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

namespace {

/// Builds element-wise expressions at the current node's location.
struct Ops {
  GraphImporter &g;
  OpBuilder &b;
  Location loc;
  explicit Ops(GraphImporter &g) : g(g), b(g.builder()), loc(g.loc()) {}

  Value c(float v) { return g.scalar(v); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value scale(Value x, double f) {
    return f == 1.0 ? x : ScaleOp::create(b, loc, x, b.getF64FloatAttr(f));
  }
  Value max(Value x, Value y) { return MaxOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return MinOp::create(b, loc, x, y); }
  Value less(Value x, Value y) { return LessOp::create(b, loc, x, y); }
  Value select(Value m, Value x, Value y) {
    return SelectOp::create(b, loc, m, x, y);
  }
  Value relu(Value x) { return ReluOp::create(b, loc, x); }
  Value exp(Value x) { return ExpOp::create(b, loc, x); }
  Value log(Value x) { return LogOp::create(b, loc, x); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value abs(Value x) { return max(x, neg(x)); }
  /// `exp(min(x, 0) / c) - 1`, the negative branch of the ELU family.
  Value expm1Negative(Value x, double c) {
    Value negative = min(x, this->c(0));
    Value e = exp(scale(negative, 1.0 / c));
    return sub(e, this->c(1));
  }
  /// `relu(x) + branch`.
  Value reluPlus(Value x, Value branch) {
    Value r = relu(x);
    return add(r, branch);
  }
};

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

LogicalResult convertEluFamily(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  Ops o(g);
  StringRef op = g.node().op_type();
  if (op == "Selu") {
    float alpha = g.floatAttr("alpha", 1.67326319217681884765625f);
    float gamma = g.floatAttr("gamma", 1.05070102214813232421875f);
    Value branch = o.scale(o.expm1Negative(*x, 1.0), alpha);
    return g.define(0, o.scale(o.reluPlus(*x, branch), gamma));
  }
  float alpha = g.floatAttr("alpha", 1.0f);
  if (op == "Celu" && alpha == 0.0f)
    return g.error("unsupported attribute alpha=0", "Celu divides by alpha");
  double c = op == "Celu" ? alpha : 1.0;
  Value branch = o.scale(o.expm1Negative(*x, c), alpha);
  return g.define(0, o.reluPlus(*x, branch));
}

/// `LeakyRelu(x)` (slope `alpha`) and `PRelu(x, slope)`.
LogicalResult convertLeakyRelu(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  Ops o(g);
  Value negative = o.min(*x, o.c(0));
  if (g.node().op_type() == "LeakyRelu")
    return g.define(
        0, o.reluPlus(*x, o.scale(negative, g.floatAttr("alpha", 0.01f))));
  auto slope = g.data(1);
  if (failed(slope))
    return failure();
  auto shape = broadcastShape(shapeOf(*x), shapeOf(*slope));
  if (failed(shape) || *shape != shapeOf(*x))
    return g.error("PRelu slope of shape " + shapeText(shapeOf(*slope)) +
                   " does not broadcast to the input " +
                   shapeText(shapeOf(*x)));
  return g.define(0, o.reluPlus(*x, o.mul(*slope, negative)));
}

/// `HardSigmoid(x)` and `HardSwish(x) = x * HardSigmoid(x)` (alpha 1/6).
LogicalResult convertHardSigmoid(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  Ops o(g);
  bool swish = g.node().op_type() == "HardSwish";
  float alpha = swish ? 1.0f / 6 : g.floatAttr("alpha", 0.2f);
  float beta = swish ? 0.5f : g.floatAttr("beta", 0.5f);
  Value scaled = o.scale(*x, alpha);
  Value lin = o.add(scaled, o.c(beta));
  Value low = o.max(lin, o.c(0));
  Value y = o.min(low, o.c(1));
  return g.define(0, swish ? o.mul(*x, y) : y);
}

LogicalResult convertSoftplus(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  Ops o(g);
  Value e = o.exp(o.neg(o.abs(*x)));
  Value one = o.c(1);
  Value tail = o.log(o.add(one, e));
  return g.define(0, o.reluPlus(*x, tail));
}

LogicalResult convertSoftsign(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  Ops o(g);
  Value magnitude = o.abs(*x);
  Value denominator = o.add(o.c(1), magnitude);
  return g.define(0, o.div(*x, denominator));
}

/// `ThresholdedRelu` (x where x > alpha, else 0), `Shrink` (x + bias below
/// -lambd, x - bias above lambd, else 0) and `Sign` (1, 0 or -1).
LogicalResult convertMasked(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  Ops o(g);
  StringRef op = g.node().op_type();
  if (op == "ThresholdedRelu") {
    Value mask = o.less(o.c(g.floatAttr("alpha", 1.0f)), *x);
    return g.define(0, o.select(mask, *x, o.c(0)));
  }
  if (op == "Sign") {
    Value positive = o.less(o.c(0), *x);
    Value negative = o.less(*x, o.c(0));
    return g.define(0, o.sub(positive, negative));
  }
  float lambd = g.floatAttr("lambd", 0.5f), bias = g.floatAttr("bias", 0.0f);
  Value isAbove = o.less(o.c(lambd), *x);
  Value shifted = o.sub(*x, o.c(bias));
  Value above = o.select(isAbove, shifted, o.c(0));
  Value isBelow = o.less(*x, o.c(-lambd));
  Value below = o.add(*x, o.c(bias));
  return g.define(0, o.select(isBelow, below, above));
}

/// `Sinh`, `Cosh` = `(exp(x) -+ exp(-x)) / 2`; `Tan` = `sin(x) / cos(x)`.
LogicalResult convertHyperbolic(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  Ops o(g);
  StringRef op = g.node().op_type();
  if (op == "Tan") {
    Value sin = SinOp::create(o.b, o.loc, *x);
    Value cos = CosOp::create(o.b, o.loc, *x);
    return g.define(0, o.div(sin, cos));
  }
  Value up = o.exp(*x);
  Value down = o.exp(o.neg(*x));
  return g.define(
      0, o.scale(op == "Sinh" ? o.sub(up, down) : o.add(up, down), 0.5));
}

/// `Sum` and `Mean` of any number of broadcasting inputs.
LogicalResult convertSumMean(GraphImporter &g) {
  int n = g.node().input_size();
  if (n < 1)
    return g.error(g.node().op_type() + " needs at least one input");
  Ops o(g);
  auto sum =
      chainInputs(g, [&](Value acc, Value next) { return o.add(acc, next); });
  if (failed(sum))
    return failure();
  Value result = *sum;
  if (g.node().op_type() == "Mean")
    result = o.scale(result, 1.0 / n);
  return g.define(0, result);
}

//===----------------------------------------------------------------------===//
// Reductions and LogSoftmax
//===----------------------------------------------------------------------===//

/// Over `axes` (kept as size-1 dimensions): the max `m`, `x - m` and
/// `log(sum(exp(x - m)))`. Log-sum-exp is `m + logSum`, log-softmax
/// `shifted - logSum` (subtracting `m + logSum` at once would round it to the
/// precision of `m`).
struct LogSumExp {
  Value m, shifted, logSum;
};
LogSumExp logSumExp(Ops &o, Value x, ArrayRef<int64_t> axes) {
  LogSumExp r;
  r.m = ReduceMaxOp::create(o.b, o.loc, x, o.b.getDenseI64ArrayAttr(axes),
                            o.b.getUnitAttr());
  r.shifted = o.sub(x, r.m);
  r.logSum = o.log(ReduceSumOp::create(o.b, o.loc, o.exp(r.shifted),
                                       o.b.getDenseI64ArrayAttr(axes),
                                       o.b.getUnitAttr()));
  return r;
}

LogicalResult convertComposedReduce(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  auto r = reduceAxes(g, shapeOf(*x).size());
  if (failed(r))
    return failure();
  Ops o(g);
  StringRef op = g.node().op_type();
  // The element-wise part, applied before the sum (or max).
  Value v = *x;
  if (op == "ReduceL1")
    v = o.abs(v);
  else if (op == "ReduceL2" || op == "ReduceSumSquare")
    v = o.mul(v, v);
  else if (op == "ReduceMin")
    v = o.neg(v);
  if (r->noop) {
    // No axes and noop_with_empty_axes: the element-wise part only.
    if (op == "ReduceL2")
      v = SqrtOp::create(o.b, o.loc, v);
    else if (op == "ReduceLogSum")
      v = o.log(v);
    else if (op == "ReduceMin")
      v = o.neg(v);
    return g.define(0, v);
  }
  DenseI64ArrayAttr axes = o.b.getDenseI64ArrayAttr(r->axes);
  UnitAttr keep = r->keepDims ? o.b.getUnitAttr() : UnitAttr();
  Value y;
  if (op == "ReduceLogSumExp") {
    LogSumExp lse = logSumExp(o, v, r->axes);
    y = o.add(lse.m, lse.logSum);
    if (!r->keepDims) {
      SmallVector<int64_t> shape;
      for (auto [i, d] : llvm::enumerate(shapeOf(*x)))
        if (!llvm::is_contained(r->axes, static_cast<int64_t>(i)))
          shape.push_back(d);
      auto reshaped = reshapeTo(g, y, shape);
      if (failed(reshaped))
        return failure();
      y = *reshaped;
    }
  } else if (op == "ReduceMin") {
    y = o.neg(ReduceMaxOp::create(o.b, o.loc, v, axes, keep));
  } else {
    y = ReduceSumOp::create(o.b, o.loc, v, axes, keep);
    if (op == "ReduceL2")
      y = SqrtOp::create(o.b, o.loc, y);
    else if (op == "ReduceLogSum")
      y = o.log(y);
  }
  return g.define(0, y);
}

/// `LogSoftmax` along `axis` (opset 13+), or before opset 13 over the input
/// coerced to 2-D at `axis` (a reshape to `[outer, inner]` and back).
LogicalResult convertLogSoftmax(GraphImporter &g) {
  auto x = g.data(0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(*x);
  int64_t rank = shape.size();
  int64_t raw = g.intAttr("axis", g.opset() >= 13 ? -1 : 1);
  auto axis = normalizeAxis(raw, rank);
  if (failed(axis))
    return g.error(llvm::formatv("unsupported attribute axis={0}", raw),
                   llvm::formatv("the input has rank {0}", rank));
  Ops o(g);
  Value v = *x;
  int64_t along = *axis;
  bool coerced = g.opset() < 13 && *axis + 1 < rank &&
                 product(shape.drop_front(*axis + 1)) != 1;
  if (coerced) {
    auto flat = reshapeTo(
        g, v,
        {product(shape.take_front(*axis)), product(shape.drop_front(*axis))});
    if (failed(flat))
      return failure();
    v = *flat;
    along = 1;
  }
  LogSumExp lse = logSumExp(o, v, {along});
  Value y = o.sub(lse.shifted, lse.logSum);
  if (coerced) {
    auto back = reshapeTo(g, y, SmallVector<int64_t>(shape));
    if (failed(back))
      return failure();
    y = *back;
  }
  return g.define(0, y);
}

} // namespace

//===----------------------------------------------------------------------===//
// The family's table
//===----------------------------------------------------------------------===//

static const OpConverter kComposedMathConverters[] = {
    {"Celu", 12, 17, convertEluFamily,
     "relu(x) + alpha * (exp(min(x, 0) / alpha) - 1)"},
    {"Cosh", 9, 17, convertHyperbolic, "(exp(x) + exp(-x)) / 2"},
    {"Elu", 6, 17, convertEluFamily, "relu(x) + alpha * (exp(min(x, 0)) - 1)"},
    {"HardSigmoid", 6, 17, convertHardSigmoid,
     "min(max(alpha * x + beta, 0), 1)"},
    {"HardSwish", 14, 17, convertHardSigmoid,
     "x * min(max(x / 6 + 0.5, 0), 1)"},
    {"LeakyRelu", 6, 17, convertLeakyRelu, "relu(x) + alpha * min(x, 0)"},
    {"LogSoftmax", 1, 17, convertLogSoftmax,
     "x - m - log(reduce_sum(exp(x - m))), m = reduce_max (opset < 13: over "
     "the input coerced to 2-D)"},
    {"Mean", 6, 17, convertSumMean, "loom.add of the inputs, loom.scale 1/n"},
    {"PRelu", 7, 17, convertLeakyRelu, "relu(x) + slope * min(x, 0)"},
    {"ReduceL1", 1, 17, convertComposedReduce, "loom.reduce_sum of |x|"},
    {"ReduceL2", 1, 17, convertComposedReduce,
     "loom.sqrt of loom.reduce_sum of x * x"},
    {"ReduceLogSum", 1, 17, convertComposedReduce,
     "loom.log of loom.reduce_sum"},
    {"ReduceLogSumExp", 1, 17, convertComposedReduce,
     "m + log(reduce_sum(exp(x - m))), m = reduce_max"},
    {"ReduceMin", 1, 17, convertComposedReduce, "-loom.reduce_max(-x)"},
    {"ReduceSumSquare", 1, 17, convertComposedReduce,
     "loom.reduce_sum of x * x"},
    {"Selu", 6, 17, convertEluFamily,
     "gamma * (relu(x) + alpha * (exp(min(x, 0)) - 1))"},
    {"Shrink", 9, 17, convertMasked,
     "loom.select on loom.less masks: x + bias below -lambd, x - bias above "
     "lambd, else 0"},
    {"Sign", 9, 17, convertMasked, "loom.less(0, x) - loom.less(x, 0)"},
    {"Sinh", 9, 17, convertHyperbolic, "(exp(x) - exp(-x)) / 2"},
    {"Softplus", 1, 17, convertSoftplus, "relu(x) + log(1 + exp(-|x|))"},
    {"Softsign", 1, 17, convertSoftsign, "x / (1 + |x|)"},
    {"Sum", 6, 17, convertSumMean, "loom.add of the inputs"},
    {"Tan", 7, 17, convertHyperbolic, "loom.sin(x) / loom.cos(x)"},
    {"ThresholdedRelu", 10, 17, convertMasked,
     "loom.select(loom.less(alpha, x), x, 0)"},
};

ArrayRef<OpConverter> onnx_import::getComposedMathConverters() {
  return kComposedMathConverters;
}
