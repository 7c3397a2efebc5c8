//===- OpCost.cpp - What an op costs the planner -----------------*- C++ -*-===//

#include "passes/OpCost.h"
#include "ir/LoomOps.h"
#include "runtime/ConvLayout.h"

using namespace mlir;
using namespace mlir::loom;

static double numElements(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

double mlir::loom::bytesOf(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return 0;
  return numElements(v) * ((type.getElementTypeBitWidth() + 7) / 8);
}

/// Dimension `k` counted from the end (1 = last), 1 when there is none.
static double dimFromEnd(Value v, int k) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getRank() >= k ? type.getDimSize(type.getRank() - k) : 1;
}

/// Attention over `q` [..., Sq, D], `k` [..., Sk, D], `v` [..., Sk, Dv]: the
/// query-key pairs, halved when causal.
static double attentionPairs(Value q, Value k, bool causal) {
  double rows = numElements(q) / dimFromEnd(q, 1);
  double pairs = rows * dimFromEnd(k, 2);
  return causal ? pairs / 2 : pairs;
}

namespace {
/// A contraction's FLOPs and the shape of one of its products (m x k by
/// k x n).
struct Contraction {
  double flops = 0, m = 0, n = 0, k = 0;
};
} // namespace

/// `flops` over products whose result rows are what is left of `results`
/// elements after `n` columns.
static Contraction product(double results, double n, double k) {
  return {2 * results * k, n > 0 ? results / n : 0, n, k};
}

static Contraction contractionOf(Operation *op) {
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    // With `transpose_lhs` the lhs is [K, M] after collapsing rows.
    Value lhs = mm.getLhs();
    double k = mm.getTransposeLhs() ? numElements(lhs) / dimFromEnd(lhs, 1)
                                    : dimFromEnd(lhs, 1);
    return product(numElements(mm.getResult()), dimFromEnd(mm.getResult(), 1),
                   k);
  }
  if (auto bmm = dyn_cast<BatchMatmulOp>(op)) {
    Contraction c = product(numElements(bmm.getResult()),
                            dimFromEnd(bmm.getResult(), 1),
                            dimFromEnd(bmm.getLhs(),
                                       bmm.getTransposeLhs() ? 2 : 1));
    c.m = dimFromEnd(bmm.getResult(), 2); // one product a batch entry
    return c;
  }
  if (auto linear = dyn_cast<LinearOp>(op))
    return product(numElements(linear.getResult()),
                   dimFromEnd(linear.getResult(), 1),
                   dimFromEnd(linear.getInput(), 1));
  // A convolution's output element takes (C / groups) kH kW multiply-adds:
  // the filter's elements per output channel. Both gradients run the same
  // products over the output-shaped gradient.
  auto outChannels = [](Value filter) -> double {
    return cast<RankedTensorType>(filter.getType()).getDimSize(0);
  };
  auto perOutputChannel = [&](Value filter) {
    double out = outChannels(filter);
    return out > 0 ? numElements(filter) / out : 0;
  };
  if (auto conv = dyn_cast<Conv2dOp>(op))
    return product(numElements(conv.getResult()), outChannels(conv.getFilter()),
                   perOutputChannel(conv.getFilter()));
  if (auto grad = dyn_cast<Conv2dGradInputOp>(op)) {
    double out = outChannels(grad.getFilter());
    Contraction c = product(numElements(grad.getGrad()), out,
                            perOutputChannel(grad.getFilter()));
    std::swap(c.n, c.k); // the gradient's channels are contracted
    return c;
  }
  if (auto grad = dyn_cast<Conv2dGradFilterOp>(op)) {
    double out = outChannels(grad.getResult());
    double spatial = out > 0 ? numElements(grad.getGrad()) / out : 0;
    return {2 * numElements(grad.getGrad()) * perOutputChannel(grad.getResult()),
            out, perOutputChannel(grad.getResult()), spatial};
  }
  // Attention runs, a head at a time, Sq x D by D x Sk and Sq x Sk by
  // Sk x Dv products.
  auto headShape = [](Value q, Value k, double flops) -> Contraction {
    return {flops, dimFromEnd(q, 2), dimFromEnd(k, 2), dimFromEnd(q, 1)};
  };
  if (auto attn = dyn_cast<AttentionOp>(op)) {
    double pairs =
        attentionPairs(attn.getQuery(), attn.getKey(), attn.getCausal());
    return headShape(attn.getQuery(), attn.getKey(),
                     2 * pairs *
                         (dimFromEnd(attn.getQuery(), 1) +
                          dimFromEnd(attn.getValue(), 1)));
  }
  if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    double pairs =
        attentionPairs(grad.getQuery(), grad.getKey(), grad.getCausal());
    return headShape(grad.getQuery(), grad.getKey(),
                     2 * pairs *
                         (3 * dimFromEnd(grad.getQuery(), 1) +
                          2 * dimFromEnd(grad.getValue(), 1)));
  }
  return {};
}

double mlir::loom::contractionFlops(Operation *op) {
  return contractionOf(op).flops;
}

/// How the CPU kernels run a convolution or one of its gradients
/// (runtime/kernels/cpu/Conv.cpp): one product an image and group, so the
/// filter (the filter's gradient: read and written) passes through memory
/// once an image, and so do im2col's columns, written and read, unless the
/// convolution is 1x1, unstrided and unpadded. Small images
/// (runtime/ConvLayout.h) run one product for the batch instead: the
/// filter passes once, and the stacked columns and the stacked output are
/// each written and read once.
static void hostConvolution(Operation *op, planner::OpRecord &r) {
  Value filter, images, outputs;
  ArrayRef<int64_t> strides, pads;
  int passes = 1;
  if (auto conv = dyn_cast<Conv2dOp>(op)) {
    filter = conv.getFilter(), images = conv.getInput();
    outputs = conv.getResult();
    strides = conv.getStrides(), pads = conv.getPads();
  } else if (auto grad = dyn_cast<Conv2dGradInputOp>(op)) {
    filter = grad.getFilter(), images = grad.getResult();
    outputs = grad.getGrad();
    strides = grad.getStrides(), pads = grad.getPads();
  } else if (auto grad = dyn_cast<Conv2dGradFilterOp>(op)) {
    filter = grad.getResult(), images = grad.getInput();
    outputs = grad.getGrad();
    strides = grad.getStrides(), pads = grad.getPads();
    passes = 2;
  } else {
    return;
  }
  auto filterType = cast<RankedTensorType>(filter.getType());
  auto imageType = cast<RankedTensorType>(images.getType());
  if (!filterType.hasStaticShape() || !imageType.hasStaticShape() ||
      filterType.getRank() != 4 || imageType.getRank() != 4)
    return;
  double n = imageType.getDimSize(0), o = filterType.getDimSize(0);
  double groups = double(imageType.getDimSize(1)) / filterType.getDimSize(1);
  double perOutput = numElements(filter) / o, og = o / groups;
  double p = n * o > 0 ? numElements(outputs) / (n * o) : 0;
  bool stacked = ::loom::runtime::convStacksImages(int64_t(n), int64_t(groups),
                                                   int64_t(p));
  // The columns of one product: an image's, or the batch's side by side.
  double columns = stacked ? n * p : p;
  if (isa<Conv2dOp>(op))
    r.gemmM = og, r.gemmN = columns, r.gemmK = perOutput;
  else if (isa<Conv2dGradInputOp>(op))
    r.gemmM = perOutput, r.gemmN = columns, r.gemmK = og;
  else
    r.gemmM = og, r.gemmN = perOutput, r.gemmK = columns;
  if (stacked) {
    r.bytes += 2 * (perOutput + o) * n * p * 4;
    return;
  }
  r.bytes += bytesOf(filter) * (passes * n - 1);
  bool direct = filterType.getDimSize(2) == 1 &&
                filterType.getDimSize(3) == 1 &&
                llvm::all_of(strides, [](int64_t s) { return s == 1; }) &&
                llvm::all_of(pads, [](int64_t q) { return q == 0; });
  if (!direct)
    r.bytes += 2 * n * groups * perOutput * p * 4;
}

planner::OpRecord mlir::loom::opRecordOf(Operation *op, bool hostKernels) {
  planner::OpRecord r;
  r.kind = op->getName().stripDialect();
  if (isa<AddOp, SubOp, MulOp, DivOp>(op))
    r.broadcast = llvm::any_of(op->getOperands(), [&](Value v) {
      return v.getType() != op->getResult(0).getType();
    });
  Contraction c = contractionOf(op);
  r.flops = c.flops;
  if (c.flops > 0)
    r.gemmM = c.m, r.gemmN = c.n, r.gemmK = c.k;
  std::optional<unsigned> skip = shapeOnlyOperand(op);
  for (OpOperand &operand : op->getOpOperands())
    if (operand.getOperandNumber() != skip)
      r.bytes += bytesOf(operand.get());
  for (Value result : op->getResults())
    r.bytes += bytesOf(result);
  if (hostKernels)
    hostConvolution(op, r);
  // Mixed-precision ops take bf16 operands (all of them: same float types).
  for (Value operand : op->getOperands())
    if (auto type = dyn_cast<RankedTensorType>(operand.getType()))
      if (isa<FloatType>(type.getElementType())) {
        if (type.getElementType().isBF16())
          r.precision = planner::Precision::Bf16;
        break;
      }
  return r;
}
