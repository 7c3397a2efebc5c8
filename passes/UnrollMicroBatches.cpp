//===- UnrollMicroBatches.cpp - Run the step once per micro-batch -*- C++ -*-===//
//
// `loom-choose-mesh` gives a step that runs in m micro-batches a fourth mesh
// axis, `micro`, and the batch is split over it like over dp, so the
// partition types the step for one micro-batch and puts a collective over
// the micro axis wherever the micro-batches' values meet (the gradients, the
// loss). The micro "ranks" are one device taking turns: this pass writes
// the turns out. Each op that depends on the data is cloned once per
// micro-batch, micro-batch after micro-batch, so the memory a step needs is
// one micro-batch's activations; the collectives over the micro axis become
// local accumulations (and a collective over the axes that remain); what
// reads them runs once, after the last micro-batch.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMUNROLLMICROBATCHESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// What an op of the partitioned step is to the micro-batches.
enum class Kind {
  Once,     // reads no data: runs once, where it is
  PerMicro, // reads the data: runs once per micro-batch
  Meet,     // a collective over the micro axis: combines the micro-batches
  After,    // reads a combined value: runs once, after the last micro-batch
};

/// The mesh axes of a shard collective (its `grid_axes`), if `op` is one.
std::optional<ArrayRef<int16_t>> collectiveAxes(Operation *op) {
  if (auto attr = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes"))
    return attr.asArrayRef();
  return std::nullopt;
}

/// `axes` without the micro axis.
SmallVector<int16_t> withoutMicro(ArrayRef<int16_t> axes) {
  SmallVector<int16_t> rest;
  for (int16_t a : axes)
    if (a != kMicroAxis)
      rest.push_back(a);
  return rest;
}

/// `type` with dimension `dim` `factor` times longer.
RankedTensorType scaledDim(Type type, int64_t dim, int64_t factor) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] *= factor;
  return t.clone(shape);
}

struct UnrollMicroBatchesPass
    : public loom::impl::LoomUnrollMicroBatchesPassBase<UnrollMicroBatchesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid = lookupMesh(module);
    if (!grid || grid.getRank() != 4)
      return;
    perMicro.clear();
    combined.clear();
    kinds.clear();
    once.clear();
    sums.clear();
    blocks.clear();
    sliced.clear();
    int64_t m = grid.getShape()[kMicroAxis];
    pipelined = grid.getShape()[kPipelineAxis] > 1;
    func::FuncOp func = lookupEntryFunction(module);
    if (!func || !func.getBody().hasOneBlock()) {
      module.emitError("loom-unroll-micro-batches needs a single-block "
                       "entry function");
      return signalPassFailure();
    }
    if (writtenMicroBatches < 0 || writtenMicroBatches == 1) {
      module.emitError("loom-unroll-micro-batches: written-micro-batches "
                       "must be 0 (all) or at least 2, got ")
          << static_cast<int64_t>(writtenMicroBatches);
      return signalPassFailure();
    }
    if (failed(classify(func)))
      return signalPassFailure();
    // Micro-batches 0 to k-2 and the last (see the pass description).
    SmallVector<int64_t> written;
    int64_t k = writtenMicroBatches;
    bool gathers = llvm::any_of(kinds, [](auto &entry) {
      return entry.second == Kind::Meet && isa<shard::AllGatherOp>(entry.first);
    });
    for (int64_t j = 0; j < m; ++j)
      if (k == 0 || k >= m || gathers || j < k - 1 || j == m - 1)
        written.push_back(j);
    if (failed(unroll(func, m, written)))
      return signalPassFailure();

    // The micro axis is spent: the mesh is the devices' again.
    SmallVector<int64_t> shape(grid.getShape().take_front(3));
    OpBuilder b(grid);
    auto devices = shard::GridOp::create(b, grid.getLoc(), kMeshName, shape);
    devices->setAttr(kMeshAxesAttr, b.getStrArrayAttr({"pp", "dp", "tp"}));
    for (NamedAttribute attr : grid->getDiscardableAttrs())
      if (attr.getName() != kMeshAxesAttr)
        devices->setAttr(attr.getName(), attr.getValue());
    devices->setAttr(LoomDialect::NumMicroBatchesAttrHelper::getNameStr(),
                     b.getI64IntegerAttr(m));
    grid.erase();
  }

  /// Sorts each op of the step into a `Kind`; refuses what cannot run one
  /// micro-batch after another.
  LogicalResult classify(func::FuncOp func) {
    for (BlockArgument arg : func.getArguments())
      if (isDataArgument(func, arg.getArgNumber()))
        perMicro.insert(arg);
    for (Operation &op : func.getBody().front().without_terminator()) {
      bool readsData = false, readsCombined = false;
      for (Value v : op.getOperands()) {
        readsData |= perMicro.contains(v);
        readsCombined |= combined.contains(v);
      }
      std::optional<ArrayRef<int16_t>> axes = collectiveAxes(&op);
      bool meet = axes && llvm::is_contained(*axes, kMicroAxis);
      Kind kind = readsData ? Kind::PerMicro
                  : readsCombined ? Kind::After
                                  : Kind::Once;
      if (meet) {
        if (failed(checkMeet(&op, readsData || readsCombined)))
          return failure();
        kind = Kind::Meet;
      } else if (readsData && readsCombined) {
        return op.emitError("'")
                   << op.getName()
                   << "' reads a value of one micro-batch and a value "
                      "combined over all of them (statistics of the whole "
                      "batch, such as a batch norm's), so the micro-batches "
                      "cannot run one after another; train without "
                      "micro-batches (micro=1)",
               failure();
      }
      kinds[&op] = kind;
      bool resultPerMicro = kind == Kind::PerMicro ||
                            (meet && isa<shard::AllSliceOp>(op));
      if (kind != Kind::Once)
        for (Value r : op.getResults())
          (resultPerMicro ? perMicro : combined).insert(r);
    }
    Operation *ret = func.getBody().front().getTerminator();
    for (Value v : ret->getOperands())
      if (perMicro.contains(v))
        return ret->emitError("the step returns a value of one micro-batch "
                              "(a result that is not summed over the "
                              "batch); train without micro-batches "
                              "(micro=1)"),
               failure();
    return success();
  }

  /// A collective over the micro axis that the pass can write out.
  LogicalResult checkMeet(Operation *op, bool readsPerMicroOrCombined) {
    ArrayRef<int16_t> axes = *collectiveAxes(op);
    if (axes.back() != kMicroAxis)
      return op->emitError("a collective over the micro-batch axis must "
                           "have it last (innermost), got grid_axes = [")
                 << llvm::make_range(axes.begin(), axes.end()) << "]",
             failure();
    if (isa<shard::AllReduceOp, shard::AllGatherOp>(op) &&
        combined.contains(op->getOperand(0)))
      return op->emitError("a collective over the micro-batch axis of a "
                           "value already combined over the micro-batches is "
                           "not supported; train without micro-batches "
                           "(micro=1)"),
             failure();
    if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
      if (ar.getReduction() != shard::ReductionKind::Sum)
        return op->emitError("only sums accumulate over micro-batches, got "
                             "a ")
                   << shard::stringifyReductionKind(ar.getReduction())
                   << " all-reduce",
               failure();
      return success();
    }
    if (isa<shard::AllGatherOp>(op))
      return success();
    if (isa<shard::AllSliceOp>(op)) {
      // The whole value must exist before the first micro-batch.
      if (readsPerMicroOrCombined)
        return op->emitError("an all-slice over the micro-batch axis of a "
                             "value that is made per micro-batch or after "
                             "them is not supported; train without "
                             "micro-batches (micro=1)"),
               failure();
      return success();
    }
    return op->emitError("'")
               << op->getName()
               << "' over the micro-batch axis is not supported; train "
                  "without micro-batches (micro=1)",
           failure();
  }

  /// Writes the step out micro-batch after micro-batch (see the file
  /// comment), those of `written` (ascending, the first and the last of m
  /// among them), then erases the partitioned ops.
  LogicalResult unroll(func::FuncOp func, int64_t m,
                       ArrayRef<int64_t> written) {
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);

    // Each data argument becomes one a micro-batch, placed in the rank's
    // share of the batch by `loom.sample_offset`.
    SmallVector<BlockArgument> data;
    for (BlockArgument arg : func.getArguments())
      if (perMicro.contains(arg))
        data.push_back(arg);
    DenseMap<Value, SmallVector<Value>> microArgs;
    Builder attrs(func.getContext());
    for (BlockArgument arg : llvm::reverse(data)) {
      unsigned index = arg.getArgNumber();
      int64_t samples = cast<RankedTensorType>(arg.getType()).getDimSize(0);
      SmallVector<Value> &args = microArgs[arg];
      for (auto [i, j] : llvm::enumerate(written)) {
        NamedAttrList named(func.getArgAttrDict(index));
        named.set(attr::kSampleOffset, attrs.getI64IntegerAttr(j * samples));
        if (failed(func.insertArgument(index + 1 + i, arg.getType(),
                                       named.getDictionary(func.getContext()),
                                       arg.getLoc())))
          return func.emitError("cannot add micro-batch arguments"), failure();
        args.push_back(func.getArgument(index + 1 + i));
      }
    }

    OpBuilder b(ret);
    for (auto [i, j] : llvm::enumerate(written)) {
      IRMapping map; // micro-batch j's values
      for (BlockArgument arg : data)
        map.map(arg, microArgs[arg][i]);
      for (Operation *op : ops) {
        Kind kind = kinds.lookup(op);
        if (kind == Kind::Once && j == 0) {
          b.clone(*op, once);
          continue;
        }
        if (kind == Kind::After && j == m - 1) {
          b.clone(*op, once);
          continue;
        }
        if (kind != Kind::PerMicro && kind != Kind::Meet)
          continue;
        // The values that exist once join this micro-batch's mapping as
        // they are read (copying the whole mapping would be quadratic).
        for (Value v : op->getOperands())
          if (!map.contains(v))
            if (Value shared = once.lookupOrNull(v))
              map.map(v, shared);
        if (kind == Kind::PerMicro) {
          Operation *clone = b.clone(*op, map);
          // Pipeline stages run each micro-batch's part in its turn.
          if (pipelined)
            clone->setAttr(LoomDialect::MicroBatchAttrHelper::getNameStr(),
                           b.getI64IntegerAttr(j));
        } else
          meet(b, op, j, m, map);
      }
    }
    b.clone(*ret, once);

    // The partitioned ops, users first.
    ret->erase();
    for (Operation *op : llvm::reverse(ops))
      op->erase();
    llvm::BitVector erased(func.getNumArguments());
    for (BlockArgument arg : data)
      erased.set(arg.getArgNumber());
    if (failed(func.eraseArguments(erased)))
      return func.emitError("cannot remove the step's data arguments"),
             failure();
    return success();
  }

  /// Micro-batch `j`'s turn at collective `op` over the micro axis; `map`
  /// holds micro-batch j's values.
  void meet(OpBuilder &b, Operation *op, int64_t j, int64_t m,
            IRMapping &map) {
    Location loc = op->getLoc();
    SmallVector<int16_t> rest = withoutMicro(*collectiveAxes(op));
    auto overRest = [&](Value input, Type resultType) -> Value {
      if (rest.empty())
        return input;
      IRMapping in;
      in.map(op->getOperand(0), input);
      Operation *c = b.clone(*op, in);
      c->setAttr("grid_axes", b.getDenseI16ArrayAttr(rest));
      c->getResult(0).setType(resultType);
      return c->getResult(0);
    };
    Value input = map.lookupOrDefault(op->getOperand(0));
    if (isa<shard::AllReduceOp>(op)) {
      // Added as soon as it is made: one running sum lives, not m values.
      Value sum = j == 0 ? input : AddOp::create(b, loc, sums[op], input);
      sums[op] = sum;
      if (j == m - 1)
        once.map(op->getResult(0), overRest(sum, sum.getType()));
      return;
    }
    if (auto gather = dyn_cast<shard::AllGatherOp>(op)) {
      SmallVector<Value> &parts = blocks[op];
      parts.push_back(input);
      if (j == m - 1) {
        int64_t axis = gather.getGatherAxis().getSExtValue();
        Value whole = ConcatOp::create(b, loc, parts, static_cast<uint64_t>(axis));
        once.map(op->getResult(0), overRest(whole, op->getResult(0).getType()));
      }
      return;
    }
    auto slice = cast<shard::AllSliceOp>(op);
    int64_t axis = slice.getSliceAxis().getSExtValue();
    Value &mine = sliced[op];
    if (!mine)
      mine = overRest(input, scaledDim(op->getResult(0).getType(), axis, m));
    map.map(op->getResult(0), MicroBatchOp::create(b, loc, mine, axis, j, m));
  }

  // Whether the step has pipeline stages: each per-micro-batch op is then
  // marked with its micro-batch (`loom.micro_batch`).
  bool pipelined = false;
  // What `classify` found.
  DenseSet<Value> perMicro, combined;
  DenseMap<Operation *, Kind> kinds;
  // What `unroll` builds: the values that exist once; per collective over
  // the micro axis, the running sum, the blocks of an all-gather so far, or
  // the all-slice over the other axes.
  IRMapping once;
  DenseMap<Operation *, Value> sums;
  DenseMap<Operation *, SmallVector<Value>> blocks;
  DenseMap<Operation *, Value> sliced;
};

} // namespace
