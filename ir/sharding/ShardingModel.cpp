//===- ShardingModel.cpp - shard::ShardingInterface for loom ops -*- C++ -*-===//
//
// One external model serves every loom op through its loop nest
// (ir/sharding/LoopNest.h). Two things differ from upstream's defaults:
// - propagation never splits an unsplittable loop, and an op whose operands
//   are known to be replicated is annotated replicated (upstream leaves it
//   unannotated, which its partition then rejects);
// - partition all-reduces each result over the split loops it does not
//   index, with the loop's reduction kind (a mean: a sum, then the scale),
//   and writes the global shape facts a local op needs: the `count` of a
//   loss, the `shape` of a reshape or expand.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "ir/sharding/LoopNest.h"

#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::sharding;
using shard::GridAxis;
using shard::ReductionKind;
using shard::Sharding;

namespace {

/// `sharding` without the axes that split unsplittable loops.
Sharding dropUnsplittable(const Sharding &sharding, ArrayRef<int64_t> dims,
                          const LoopNest &nest, MLIRContext *ctx) {
  if (!sharding)
    return sharding;
  SmallVector<shard::GridAxesAttr> axes(sharding.getSplitAxes());
  bool changed = false;
  for (auto [d, a] : llvm::enumerate(axes)) {
    if (d < dims.size() && !nest.loops[dims[d]].splittable && !a.empty()) {
      a = shard::GridAxesAttr::get(ctx, {});
      changed = true;
    }
  }
  if (!changed)
    return sharding;
  while (!axes.empty() && axes.back().empty())
    axes.pop_back();
  return Sharding::get(sharding.getGridAttr(), axes);
}

/// "operand 1" / "result 0" for the tensor at position `index` of `nest`.
std::string describeTensor(Operation *op, unsigned index) {
  unsigned operands = op->getNumOperands();
  return index < operands ? "operand " + std::to_string(index)
                          : "result " + std::to_string(index - operands);
}

int64_t devicesOn(shard::GridOp grid, ArrayRef<GridAxis> axes) {
  int64_t n = 1;
  for (GridAxis a : axes)
    n *= grid.getShape()[a];
  return n;
}

/// The local type of the tensor at `index` under `loopAxes`.
FailureOr<RankedTensorType> localType(Operation *op, unsigned index,
                                      RankedTensorType type,
                                      const LoopNest &nest,
                                      const shard::ShardingArray &loopAxes,
                                      shard::GridOp grid) {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [d, loop] : llvm::enumerate(nest.maps[index])) {
    int64_t n = devicesOn(grid, loopAxes[loop]);
    if (shape[d] % n != 0)
      return op->emitOpError("dimension ")
             << d << " of " << describeTensor(op, index) << " (size "
             << shape[d] << ") does not split evenly over " << n
             << " devices";
    shape[d] /= n;
  }
  return type.clone(shape);
}

int64_t numElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

/// Writes on the cloned op the global facts it can no longer see in its
/// local operand shapes.
void setGlobalFacts(Operation *original, Operation *local) {
  Builder b(local->getContext());
  auto setShape = [&](StringRef name) {
    auto type = cast<RankedTensorType>(local->getResult(0).getType());
    local->setAttr(name, b.getDenseI64ArrayAttr(type.getShape()));
  };
  auto setCount = [&](int64_t count) {
    if (!local->hasAttr("count"))
      local->setAttr("count", b.getI64IntegerAttr(count));
  };
  if (isa<ReshapeOp, ExpandOp>(original))
    setShape("shape");
  else if (isa<CrossEntropyOp, CrossEntropyGradOp>(original))
    setCount(numElements(original->getOperand(1)));
  else if (isa<MseOp, MseGradOp>(original))
    setCount(numElements(original->getOperand(0)));
}

/// The sum (or max, min, product) of `value` over the devices of `axes`;
/// a mean becomes a sum and a scale.
FailureOr<Value> combine(OpBuilder &b, Operation *op, Value value,
                         shard::GridOp grid, ArrayRef<GridAxis> axes,
                         ReductionKind kind) {
  Location loc = op->getLoc();
  ReductionKind collective =
      kind == ReductionKind::Average ? ReductionKind::Sum : kind;
  if (kind == ReductionKind::Generic)
    return op->emitOpError("has a split reduction with no collective");
  Value reduced = shard::AllReduceOp::create(b, loc, value, grid.getSymName(),
                                             axes, collective);
  if (kind == ReductionKind::Average)
    reduced = ScaleOp::create(b, loc, reduced,
                              b.getF64FloatAttr(1.0 / devicesOn(grid, axes)));
  return reduced;
}

/// A constant split by its users: a splat shrinks; anything else is whole on
/// every device, which keeps its block (`shard.all_slice`).
LogicalResult partitionConstant(ConstantOp op, const LoopNest &nest,
                                const shard::ShardingArray &loopAxes,
                                shard::GridOp grid, IRMapping &partitionMap,
                                OpBuilder &b) {
  auto type = cast<RankedTensorType>(op.getType());
  FailureOr<RankedTensorType> local =
      localType(op, 0, type, nest, loopAxes, grid);
  if (failed(local))
    return failure();
  if (*local == type) {
    partitionMap.map(op.getResult(), b.clone(*op)->getResult(0));
    return success();
  }
  auto splat = dyn_cast<SplatElementsAttr>(op.getValue());
  if (splat) {
    Value c = ConstantOp::create(b, op.getLoc(), splat.resizeSplat(*local));
    partitionMap.map(op.getResult(), c);
    return success();
  }
  // Every device holds the whole constant and keeps its block.
  Value c = b.clone(*op)->getResult(0);
  for (auto [d, loop] : llvm::enumerate(nest.maps[0])) {
    if (loopAxes[loop].empty())
      continue;
    auto current = cast<RankedTensorType>(c.getType());
    SmallVector<int64_t> shape(current.getShape());
    shape[d] /= devicesOn(grid, loopAxes[loop]);
    c = shard::AllSliceOp::create(b, op.getLoc(), current.clone(shape), c,
                                  grid.getSymName(), loopAxes[loop], d);
  }
  partitionMap.map(op.getResult(), c);
  return success();
}

/// The sharding the `shard.shard` users of an unannotated constant ask for;
/// an error when they ask for different ones (one value cannot serve them:
/// loom-shard-data-parallel gives each use its own constant).
FailureOr<Sharding> shardingAskedByUsers(ConstantOp op) {
  Sharding asked;
  for (Operation *user : op->getUsers()) {
    auto shardOp = dyn_cast<shard::ShardOp>(user);
    if (!shardOp)
      continue;
    Sharding s(shardOp.getSharding());
    if (asked && asked != s &&
        !(shard::isFullReplication(asked) && shard::isFullReplication(s)))
      return op.emitOpError("its users ask for different splits of it; "
                            "give each use its own constant");
    asked = s;
  }
  return asked;
}

template <typename Op>
struct LoomShardingModel
    : public shard::ShardingInterface::ExternalModel<LoomShardingModel<Op>,
                                                     Op> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return loopNestOf(op).iteratorTypes();
  }

  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *op) const {
    return loopNestOf(op).reductionKinds();
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    return loopNestOf(op).affineMaps(op->getContext());
  }

  FailureOr<shard::ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    LoopNest nest = loopNestOf(op);
    MLIRContext *ctx = op->getContext();
    unsigned numOperands = op->getNumOperands();
    std::vector<Sharding> operands, results;
    FlatSymbolRefAttr grid;
    for (auto [i, s] : llvm::enumerate(operandShardings)) {
      operands.push_back(dropUnsplittable(s, nest.maps[i], nest, ctx));
      if (s && !grid)
        grid = s.getGridAttr();
    }
    for (auto [i, s] : llvm::enumerate(resultShardings)) {
      results.push_back(
          dropUnsplittable(s, nest.maps[numOperands + i], nest, ctx));
      if (s && !grid)
        grid = s.getGridAttr();
    }
    FailureOr<shard::ShardingOption> option =
        shard::detail::defaultGetShardingOption(op, operands, results);
    if (failed(option) || !grid)
      return option;
    // Replicated operands are known shardings too.
    option->empty = false;
    option->grid = grid;
    return option;
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    LoopNest nest = loopNestOf(op);
    std::vector<Sharding> results(resultShardings.begin(), resultShardings.end());
    if (auto constant = dyn_cast<ConstantOp>(op); constant && !results[0]) {
      FailureOr<Sharding> asked = shardingAskedByUsers(constant);
      if (failed(asked))
        return failure();
      results[0] = *asked;
    }
    FailureOr<shard::ShardingArray> loopAxes =
        loopAxesOf(op, nest, operandShardings, results);
    if (failed(loopAxes))
      return failure();
    FlatSymbolRefAttr gridName;
    for (const Sharding &s : llvm::concat<const Sharding>(operandShardings,
                                                          results))
      if (s && !gridName)
        gridName = s.getGridAttr();
    bool split = llvm::any_of(*loopAxes, [](auto &a) { return !a.empty(); });
    if (!split) {
      partitionMap.map(op->getResults(),
                       builder.clone(*op, partitionMap)->getResults());
      return success();
    }
    shard::GridOp grid = shard::getGrid(op, gridName, symbolTable);
    if (auto constant = dyn_cast<ConstantOp>(op))
      return partitionConstant(constant, nest, *loopAxes, grid, partitionMap,
                               builder);

    // Partition hands over no value where it found no resharding.
    for (auto [i, v] : llvm::enumerate(partitionedOperands))
      if (!v)
        return op->emitOpError("operand ")
               << i << " could not be resharded to its sharding (more than "
               << "one step from its producer's)";
    IRMapping local;
    local.map(op->getOperands(), partitionedOperands);
    Operation *newOp = builder.clone(*op, local);
    unsigned numOperands = op->getNumOperands();
    for (OpResult result : newOp->getResults()) {
      unsigned index = numOperands + result.getResultNumber();
      FailureOr<RankedTensorType> type =
          localType(op, index, cast<RankedTensorType>(result.getType()), nest,
                    *loopAxes, grid);
      if (failed(type))
        return failure();
      result.setType(*type);
    }
    setGlobalFacts(op, newOp);

    // Each result is combined over the split loops it does not index.
    for (OpResult result : newOp->getResults()) {
      ArrayRef<int64_t> dims = nest.maps[numOperands + result.getResultNumber()];
      SmallVector<GridAxis> axes;
      std::optional<ReductionKind> kind;
      for (auto [loop, loopSplit] : llvm::enumerate(*loopAxes)) {
        if (loopSplit.empty() || llvm::is_contained(dims, loop))
          continue;
        ReductionKind k = nest.loops[loop].kind;
        if (kind && *kind != k)
          return op->emitOpError("combines partial results of different "
                                 "reduction kinds");
        kind = k;
        llvm::append_range(axes, loopSplit);
      }
      Value value = result;
      if (kind) {
        // Every rank would add the bias to its partial sum, so the sum
        // would hold it once per rank: add it once, after the sum.
        Value bias;
        if (auto linear = dyn_cast<LinearOp>(newOp); linear && linear.getBias()) {
          bias = linear.getBias();
          linear.getBiasMutable().clear();
        }
        llvm::sort(axes);
        FailureOr<Value> reduced =
            combine(builder, op, result, grid, axes, *kind);
        if (failed(reduced))
          return failure();
        value = *reduced;
        if (bias)
          value = AddOp::create(builder, op->getLoc(), value, bias);
      }
      partitionMap.map(op->getResult(result.getResultNumber()), value);
    }
    return success();
  }
};

template <typename... Ops> void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<LoomShardingModel<Ops>>(*ctx), ...);
}

} // namespace

FailureOr<shard::ShardingArray>
mlir::loom::sharding::loopAxesOf(Operation *op, const LoopNest &nest, ArrayRef<Sharding> operands,
           ArrayRef<Sharding> results) {
  shard::ShardingArray loopAxes(nest.loops.size());
  SmallVector<int> setBy(nest.loops.size(), -1);
  std::vector<Sharding> all(operands.begin(), operands.end());
  all.insert(all.end(), results.begin(), results.end());
  for (auto [index, sharding] : llvm::enumerate(all)) {
    if (!sharding)
      continue;
    ArrayRef<int64_t> dims = nest.maps[index];
    for (auto [d, loop] : llvm::enumerate(dims)) {
      SmallVector<GridAxis> axes;
      if (d < sharding.getSplitAxes().size())
        llvm::append_range(axes, sharding.getSplitAxes()[d].asArrayRef());
      if (!axes.empty() && !nest.loops[loop].splittable)
        return op->emitOpError("cannot split dimension ")
               << d << " of " << describeTensor(op, index)
               << ": the op needs it whole (a window, normalised or softmax "
                  "axis); replicate it along that dimension";
      if (setBy[loop] < 0) {
        loopAxes[loop] = axes;
        setBy[loop] = static_cast<int>(index);
      } else if (loopAxes[loop] != axes) {
        return op->emitOpError("dimension ")
               << d << " of " << describeTensor(op, index)
               << " is split differently from the same dimension of "
               << describeTensor(op, setBy[loop]);
      }
    }
  }
  return loopAxes;
}

void mlir::loom::sharding::attachShardingModels(MLIRContext *ctx) {
  // Grouped as in loopNestOf (ir/sharding/LoopNests.cpp).
  attach<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, EqualOp, LessOp,
         LessEqualOp, SelectOp, ExpandOp,
         BroadcastLikeOp, SumToOp>(ctx);
  attach<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, SoftmaxOp, SoftmaxGradOp>(
      ctx);
  attach<TransposeOp, ReshapeOp, SliceOp, SliceGradOp, ConcatOp, GatherOp,
         GatherGradOp, GatherElementsOp, GatherElementsGradOp, ScatterNdOp,
         GatherNdOp>(ctx);
  attach<MatmulOp, LinearOp, BatchMatmulOp>(ctx);
  attach<LayerNormOp, RmsNormOp, LayerNormGradOp, RmsNormGradOp, BatchNormOp,
         BatchNormGradOp, Conv2dOp, Conv2dGradInputOp, Conv2dGradFilterOp,
         MaxPool2dOp, MaxPool2dGradOp, AttentionOp, AttentionGradOp>(ctx);
  attach<CrossEntropyOp, CrossEntropyGradOp, MseOp, MseGradOp>(ctx);
  attach<ConstantOp, ReluOp, TanhOp, SigmoidOp, ScaleOp, ReluGradOp,
         TanhGradOp, SigmoidGradOp, ExpOp, LogOp, SqrtOp, RsqrtOp, NegOp,
         ReciprocalOp, ErfOp, SinOp, CosOp, RoundF16Op, TruncOp, GeluOp, GeluGradOp, ConvertOp, SgdOp, AdamwOp>(
      ctx);
}
