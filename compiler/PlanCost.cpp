//===- PlanCost.cpp - The lowered step as the planner's request -*- C++ -*-===//

#include "compiler/PlanCost.h"
#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::loom;

static double numElements(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

/// Bytes of a static-shaped tensor (0 for anything else).
static double bytesOf(Value v) {
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

static planner::OpRecord opRecordOf(Operation *op) {
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

/// A collective's record: `bytes` is the S of its cost formula.
static planner::CollectiveRecord collective(planner::CollectiveKind kind,
                                            Value sized,
                                            ArrayRef<int16_t> axes) {
  planner::CollectiveRecord c;
  c.kind = kind;
  c.bytes = bytesOf(sized);
  for (int16_t axis : axes)
    c.axes.push_back(axis);
  return c;
}

/// The collective record of `op`, when it is a `shard` collective Loom
/// lowers to.
static std::optional<planner::CollectiveRecord> collectiveOf(Operation *op) {
  using Kind = planner::CollectiveKind;
  if (auto c = dyn_cast<shard::AllReduceOp>(op))
    return collective(Kind::AllReduce, c.getInput(), c.getGridAxes());
  // The gathered result and the scattered operand are the full tensor.
  if (auto c = dyn_cast<shard::AllGatherOp>(op))
    return collective(Kind::AllGather, c.getResult(), c.getGridAxes());
  if (auto c = dyn_cast<shard::ReduceScatterOp>(op))
    return collective(Kind::ReduceScatter, c.getInput(), c.getGridAxes());
  if (auto c = dyn_cast<shard::AllToAllOp>(op))
    return collective(Kind::AllToAll, c.getInput(), c.getGridAxes());
  if (auto c = dyn_cast<shard::SendOp>(op))
    return collective(Kind::Send, c.getInput(), c.getGridAxes());
  if (auto c = dyn_cast<shard::RecvOp>(op))
    return collective(Kind::Recv, c.getResult(), c.getGridAxes());
  return std::nullopt;
}

planner::StepRequest mlir::loom::stepRequestOf(ModuleOp module,
                                               planner::Precision precision) {
  planner::StepRequest request;
  request.precision = precision;
  func::FuncOp func = lookupEntryFunction(module);
  if (!func || func.isExternal())
    return request;
  for (Operation &op : func.getBody().front()) {
    if (auto c = collectiveOf(&op)) {
      request.collectives.push_back(std::move(*c));
      continue;
    }
    // Constants are arena data and reshapes are views: neither runs
    // (emit/PlanEmitter.cpp).
    if (!isa<LoomDialect>(op.getDialect()) || isa<ConstantOp, ReshapeOp>(op))
      continue;
    request.ops.push_back(opRecordOf(&op));
  }
  return request;
}

planner::MeshTopology mlir::loom::meshTopologyOf(ModuleOp module,
                                                 const Cluster &cluster) {
  SmallVector<planner::MeshAxis, 3> axes{{"pp", 1}, {"dp", 1}, {"tp", 1}};
  if (shard::GridOp grid = lookupMesh(module)) {
    auto names = grid->getAttrOfType<ArrayAttr>(kMeshAxesAttr);
    axes.clear();
    for (auto [i, size] : llvm::enumerate(grid.getShape())) {
      std::string name = "axis" + std::to_string(i);
      if (names && i < names.size())
        if (auto s = dyn_cast<StringAttr>(names[i]))
          name = s.str();
      axes.push_back({name, size});
    }
  }
  return planner::MeshTopology(axes, cluster.devicesPerNode);
}

planner::DeviceMemory mlir::loom::deviceMemoryOf(const MemoryBreakdown &emitted,
                                                 int64_t arenaBytes) {
  planner::DeviceMemory m;
  m.parameters = emitted.parameters;
  m.gradients = emitted.gradients;
  m.optimizerState = emitted.optimizerState;
  m.activations = std::max<int64_t>(
      0, arenaBytes - m.parameters - m.gradients - m.optimizerState);
  m.workspace = emitted.workspace;
  return m;
}
