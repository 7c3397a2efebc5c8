//===- LoopNest.h - The iteration space behind a loom op's sharding -*- C++ -*-===//
//
// Every loom op implements upstream `shard::ShardingInterface` through one
// description: its loop nest. A loop is parallel or a reduction (with its
// kind), and splittable or not; each operand and result maps each of its
// dimensions to one loop. Upstream's propagation reads the loops and maps;
// the partition of a loom op clones it on the local shapes and all-reduces
// each result over the split loops it does not index.
//
// Maps are plain dimension lists (projected permutations), which is all
// upstream's propagation accepts. Where a tensor dimension is not an affine
// function of the loops — a broadcast size-1 dimension, a convolution window,
// the inner dimensions of a reshape group — it gets a loop of its own that is
// not splittable: propagation never splits it, and the value is replicated
// along that dimension around the op.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IR_SHARDING_LOOPNEST_H
#define LOOM_IR_SHARDING_LOOPNEST_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Operation.h"

namespace mlir::loom::sharding {

/// One loop of an op's iteration space.
struct Loop {
  utils::IteratorType type = utils::IteratorType::parallel;
  /// For reductions: how partial results combine.
  shard::ReductionKind kind = shard::ReductionKind::Sum;
  /// Whether devices may each take a block of it.
  bool splittable = true;
};

/// Loops and, for each operand then each result, the loop of each dimension.
class LoopNest {
public:
  int64_t parallel() { return add({}); }
  int64_t reduction(shard::ReductionKind kind) {
    return add({utils::IteratorType::reduction, kind, true});
  }
  /// A loop no split may cut (a window, a normalised or softmax axis, ...).
  int64_t fixed() { return add({utils::IteratorType::parallel,
                                shard::ReductionKind::Generic, false}); }
  int64_t fixedReduction() {
    return add({utils::IteratorType::reduction, shard::ReductionKind::Generic,
                false});
  }
  int64_t add(Loop loop) {
    loops.push_back(loop);
    return static_cast<int64_t>(loops.size()) - 1;
  }
  /// Appends the map of the next operand or result.
  void map(ArrayRef<int64_t> dims) { maps.emplace_back(dims); }
  /// Appends a map of fresh unsplittable loops, one per dimension.
  void mapFixed(int64_t rank);

  SmallVector<utils::IteratorType> iteratorTypes() const;
  SmallVector<shard::ReductionKind> reductionKinds() const;
  SmallVector<AffineMap> affineMaps(MLIRContext *ctx) const;

  SmallVector<Loop> loops;
  SmallVector<SmallVector<int64_t>> maps;
};

/// The loop nest of a loom op (every op in ir/*.td has one).
LoopNest loopNestOf(Operation *op);

/// Which mesh axes split each loop of `op`, read from its operand and
/// result shardings (null ones say nothing); an error on the op when a
/// split cuts an unsplittable loop or two tensors split one loop
/// differently.
FailureOr<shard::ShardingArray>
loopAxesOf(Operation *op, const LoopNest &nest,
           ArrayRef<shard::Sharding> operands,
           ArrayRef<shard::Sharding> results);

/// Attaches the sharding models to every loom op.
void attachShardingModels(MLIRContext *ctx);

} // namespace mlir::loom::sharding

#endif // LOOM_IR_SHARDING_LOOPNEST_H
