//===- RecomputePlan.cpp - What recomputation runs again, and its peak ----===//

#include "passes/RecomputePlan.h"

#include "ir/LoomOps.h"
#include "passes/LayerKey.h"
#include "passes/MeshUtils.h"
#include "passes/OpCost.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::loom;

std::optional<std::optional<RematMode>>
mlir::loom::parseRematMode(StringRef text) {
  if (text == "none")
    return std::optional<RematMode>(RematMode::None);
  if (text == "selective")
    return std::optional<RematMode>(RematMode::Selective);
  if (text == "full")
    return std::optional<RematMode>(RematMode::Full);
  if (text == "auto")
    return std::optional<RematMode>();
  return std::nullopt;
}

StringRef mlir::loom::stringifyRematMode(RematMode mode) {
  switch (mode) {
  case RematMode::None:
    return "none";
  case RematMode::Selective:
    return "selective";
  case RematMode::Full:
    return "full";
  }
  return "none";
}

DenseSet<Operation *> mlir::loom::backwardOps(func::FuncOp func) {
  DenseSet<Operation *> backward;
  for (Operation &op : func.getBody().front().without_terminator()) {
    bool isBackward =
        isa<CrossEntropyGradOp, MseGradOp>(op) ||
        op.hasAttr(LoomDialect::BackwardAttrHelper::getNameStr()) ||
        op.hasAttr(LoomDialect::RecomputedAttrHelper::getNameStr()) ||
        llvm::any_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && backward.contains(def);
        });
    if (isBackward)
      backward.insert(&op);
  }
  return backward;
}

/// Whether `op` gathers an activation over `tp` alone (sequence
/// parallelism's gather before a column-parallel linear).
static bool gathersOverTensor(Operation *op) {
  auto gather = dyn_cast<shard::AllGatherOp>(op);
  return gather && !isa<BlockArgument>(gather.getInput()) &&
         llvm::all_of(gather.getGridAxes(),
                      [](int16_t a) { return a == kTensorAxis; });
}

/// Whether a clone of `op` computes what `op` did, later: no effects, no
/// communication but a gather over `tp` (which every rank of the group
/// clones at the same place), no regions, something to compute from. A
/// slice over the grid is local.
static bool canRecompute(Operation *op) {
  if (gathersOverTensor(op) || isa<shard::AllSliceOp>(op))
    return true;
  return op->getNumRegions() == 0 && op->getNumOperands() > 0 &&
         isMemoryEffectFree(op) && !isa<ConstantOp>(op) &&
         !isa<shard::ShardDialect, tensor::TensorDialect>(op->getDialect());
}

/// Whether the backward gathers `op`'s result again (ProgramLayers::
/// regathered).
static bool regathers(Operation *op, const DenseSet<Operation *> &backward) {
  if (!gathersOverTensor(op))
    return false;
  Operation *lastForward = nullptr, *firstBackward = nullptr;
  for (Operation *u : op->getResult(0).getUsers()) {
    if (!backward.contains(u)) {
      if (!lastForward || lastForward->isBeforeInBlock(u))
        lastForward = u;
    } else if (!firstBackward || u->isBeforeInBlock(firstBackward)) {
      firstBackward = u;
    }
  }
  if (!firstBackward)
    return false;
  for (Operation *at = lastForward ? lastForward->getNextNode() : op;
       at && at != firstBackward; at = at->getNextNode())
    if (contractionFlops(at) > 0)
      return true;
  return false;
}

ProgramLayers mlir::loom::findLayers(func::FuncOp func) {
  ProgramLayers layers;
  layers.backward = backwardOps(func);
  Block &body = func.getBody().front();
  // Ops computed from parameters and constants alone are shared by every
  // micro-batch: they join no layer.
  DenseSet<Operation *> &fixed = layers.fixed;
  auto isFixed = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return !isDataArgument(func, arg.getArgNumber());
    Operation *def = v.getDefiningOp();
    return isa<ConstantOp>(def) || fixed.contains(def);
  };
  SmallVector<Operation *> keyed;
  DenseMap<Operation *, std::string> keyOf;
  for (Operation &op : body.without_terminator()) {
    if (layers.backward.contains(&op))
      continue;
    // A receive brings another device's value, whatever its operand.
    if (op.getNumOperands() > 0 && !isa<shard::RecvOp>(op) &&
        llvm::all_of(op.getOperands(), isFixed)) {
      fixed.insert(&op);
      continue;
    }
    std::string key = layerKeyOf(func, &op);
    if (key.empty())
      continue;
    keyOf[&op] = key;
    keyed.push_back(&op);
  }
  llvm::EquivalenceClasses<Operation *> joined;
  for (Operation *op : keyed) {
    joined.insert(op);
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && keyOf.count(def) && keyOf[def] == keyOf[op])
        joined.unionSets(def, op);
  }
  std::map<std::string, int64_t> index;
  DenseMap<Operation *, size_t> instanceOf; // by the class's leader
  for (Operation *op : keyed) {
    Operation *leader = joined.getLeaderValue(op);
    auto [it, added] = instanceOf.try_emplace(leader, layers.instances.size());
    if (added) {
      auto [k, fresh] = index.try_emplace(keyOf[op], layers.keys.size());
      if (fresh)
        layers.keys.push_back(keyOf[op]);
      layers.instances.push_back({k->second, {}});
    }
    layers.instances[it->second].ops.push_back(op);
  }
  for (Operation &op : body.without_terminator()) {
    if (fixed.contains(&op) || layers.backward.contains(&op) ||
        !regathers(&op, layers.backward))
      continue;
    layers.regathered.insert(&op);
    if (!keyOf.count(&op))
      layers.looseGathers.push_back(&op);
  }
  return layers;
}

SmallVector<Operation *>
mlir::loom::recomputedOps(const LayerInstance &instance, RematMode mode,
                          const ProgramLayers &layers, bool regather) {
  const DenseSet<Operation *> &backward = layers.backward;
  DenseSet<Operation *> inInstance(instance.ops.begin(), instance.ops.end());
  auto readByBackward = [&](Value v) {
    return llvm::any_of(v.getUsers(),
                        [&](Operation *u) { return backward.contains(u); });
  };
  // A value another layer (or the head) reads in the forward pass is that
  // layer's input: kept, as the checkpoint it starts from.
  auto isOutput = [&](Operation *op) {
    for (Value r : op->getResults())
      for (Operation *u : r.getUsers())
        if (!backward.contains(u) && !inInstance.contains(u))
          return true;
    return false;
  };
  // Under every mode the backward gathers over `tp` again what the forward
  // gathered: the layer keeps its share only (Korthikanti et al.). A gather
  // of the layer's output that the next layer reads is made again too: its
  // input, the checkpoint, is kept instead.
  DenseSet<Operation *> chosen;
  for (Operation *op : instance.ops)
    if (regather && layers.regathered.contains(op))
      chosen.insert(op);
  auto readByChosen = [&](Value v) {
    return llvm::any_of(v.getUsers(),
                        [&](Operation *u) { return chosen.contains(u); });
  };
  if (mode == RematMode::Full) {
    SmallVector<Operation *> work;
    for (Operation *op : instance.ops)
      if (canRecompute(op) && !isOutput(op) &&
          llvm::any_of(op->getResults(), readByBackward))
        work.push_back(op);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!chosen.insert(op).second)
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && inInstance.contains(def) && canRecompute(def) &&
            !isOutput(def))
          work.push_back(def);
    }
  } else if (mode == RematMode::Selective) {
    // Values computed from parameters alone (a weight's bf16 copy) are
    // parameter-sized: reading them later holds no activation. A cheap op
    // whose result only a gather made again reads (a sequence-split norm)
    // runs again too.
    for (Operation *op : instance.ops) {
      if (chosen.contains(op) || !canRecompute(op) ||
          contractionFlops(op) > 0 || isOutput(op) ||
          !llvm::any_of(op->getResults(), [&](Value r) {
            return readByBackward(r) || readByChosen(r);
          }))
        continue;
      std::optional<unsigned> like = shapeOnlyOperand(op);
      bool available = true;
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        Operation *def = v.getDefiningOp();
        if ((like && i == *like) || !def || isa<ConstantOp>(def) ||
            chosen.contains(def) || readByBackward(v) ||
            layers.fixed.contains(def))
          continue;
        available = false;
      }
      if (available)
        chosen.insert(op);
    }
  }
  SmallVector<Operation *> ops;
  for (Operation *op : instance.ops)
    if (chosen.contains(op))
      ops.push_back(op);
  return ops;
}

Operation *mlir::loom::placeGroup(SmallVectorImpl<Operation *> &ops,
                                  const DenseSet<Operation *> &backward) {
  DenseSet<Operation *> group(ops.begin(), ops.end());
  Operation *first = nullptr;
  for (Operation *op : ops)
    for (Value r : op->getResults())
      for (Operation *u : r.getUsers())
        if (backward.contains(u) && !group.contains(u) &&
            (!first || u->isBeforeInBlock(first)))
          first = u;
  if (!first)
    return ops.clear(), nullptr;
  llvm::erase_if(ops,
                 [&](Operation *op) { return !op->isBeforeInBlock(first); });
  return ops.empty() ? nullptr : first;
}

int64_t mlir::loom::keptActivationBytes(const LayerInstance &instance,
                                        RematMode mode,
                                        const ProgramLayers &layers,
                                        bool regather) {
  const DenseSet<Operation *> &backward = layers.backward;
  SmallVector<Operation *> recomputed =
      recomputedOps(instance, mode, layers, regather);
  placeGroup(recomputed, backward);
  DenseSet<Operation *> again(recomputed.begin(), recomputed.end());
  // A view's bytes are the buffer it views.
  auto root = [](Value v) {
    while (auto reshape = v.getDefiningOp<ReshapeOp>())
      v = reshape.getInput();
    return v;
  };
  DenseSet<Operation *> inInstance(instance.ops.begin(), instance.ops.end());
  DenseSet<Value> kept;
  // What the recomputed ops read and do not make again is kept for them.
  for (Operation *op : recomputed) {
    std::optional<unsigned> like = shapeOnlyOperand(op);
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      Value buffer = root(v);
      Operation *def = buffer.getDefiningOp();
      if ((!like || i != *like) && def && inInstance.contains(def) &&
          !again.contains(def))
        kept.insert(buffer);
    }
  }
  for (Operation *op : instance.ops) {
    if (again.contains(op))
      continue;
    for (Value r : op->getResults()) {
      Value buffer = root(r);
      Operation *def = buffer.getDefiningOp();
      if (!def || !inInstance.contains(def) || again.contains(def))
        continue;
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return backward.contains(u); }))
        kept.insert(buffer);
    }
  }
  int64_t bytes = 0;
  for (Value v : kept)
    bytes += static_cast<int64_t>(bytesOf(v));
  return bytes;
}

int64_t mlir::loom::simulatePeakBytes(func::FuncOp func,
                                      ArrayRef<RecomputeGroup> groups) {
  return simulateLiveBytes(func, groups);
}
