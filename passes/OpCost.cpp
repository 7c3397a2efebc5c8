//===- OpCost.cpp - What an op costs the planner -----------------*- C++ -*-===//

#include "passes/OpCost.h"
#include "ir/LoomOps.h"

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

double mlir::loom::contractionFlops(Operation *op) {
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    // With `transpose_lhs` the lhs is [K, M] after collapsing rows.
    Value lhs = mm.getLhs();
    double k = mm.getTransposeLhs() ? numElements(lhs) / dimFromEnd(lhs, 1)
                                    : dimFromEnd(lhs, 1);
    return 2 * numElements(mm.getResult()) * k;
  }
  if (auto bmm = dyn_cast<BatchMatmulOp>(op))
    return 2 * numElements(bmm.getResult()) *
           dimFromEnd(bmm.getLhs(), bmm.getTransposeLhs() ? 2 : 1);
  if (auto linear = dyn_cast<LinearOp>(op))
    return 2 * numElements(linear.getResult()) *
           dimFromEnd(linear.getInput(), 1);
  // A convolution's output element takes (C / groups) kH kW multiply-adds:
  // the filter's elements per output channel. Both gradients run the same
  // products over the output-shaped gradient.
  auto perOutputChannel = [](Value filter) {
    double outChannels = cast<RankedTensorType>(filter.getType()).getDimSize(0);
    return outChannels > 0 ? numElements(filter) / outChannels : 0;
  };
  if (auto conv = dyn_cast<Conv2dOp>(op))
    return 2 * numElements(conv.getResult()) *
           perOutputChannel(conv.getFilter());
  if (auto grad = dyn_cast<Conv2dGradInputOp>(op))
    return 2 * numElements(grad.getGrad()) * perOutputChannel(grad.getFilter());
  if (auto grad = dyn_cast<Conv2dGradFilterOp>(op))
    return 2 * numElements(grad.getGrad()) * perOutputChannel(grad.getResult());
  if (auto attn = dyn_cast<AttentionOp>(op)) {
    double pairs =
        attentionPairs(attn.getQuery(), attn.getKey(), attn.getCausal());
    return 2 * pairs *
           (dimFromEnd(attn.getQuery(), 1) + dimFromEnd(attn.getValue(), 1));
  }
  if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    double pairs =
        attentionPairs(grad.getQuery(), grad.getKey(), grad.getCausal());
    return 2 * pairs *
           (3 * dimFromEnd(grad.getQuery(), 1) +
            2 * dimFromEnd(grad.getValue(), 1));
  }
  return 0;
}

planner::OpRecord mlir::loom::opRecordOf(Operation *op) {
  planner::OpRecord r;
  r.flops = contractionFlops(op);
  std::optional<unsigned> skip = shapeOnlyOperand(op);
  for (OpOperand &operand : op->getOpOperands())
    if (operand.getOperandNumber() != skip)
      r.bytes += bytesOf(operand.get());
  for (Value result : op->getResults())
    r.bytes += bytesOf(result);
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

