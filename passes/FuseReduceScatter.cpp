//===- FuseReduceScatter.cpp - A sum then a slice is a reduce-scatter -*- C++ -*-===//
//
// Partition sums a partial value over a mesh axis with `shard.all_reduce`
// and, where its user needs only this rank's block (a gradient that ZeRO-2
// updates block by block), slices the sum with `shard.all_slice`. The two
// are one `shard.reduce_scatter`: half the traffic of the all-reduce
// (docs/planner.md), and only the block is ever held.
//
//===----------------------------------------------------------------------===//

#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMFUSEREDUCESCATTERPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct FuseReduceScatterPass
    : public loom::impl::LoomFuseReduceScatterPassBase<FuseReduceScatterPass> {
  using LoomFuseReduceScatterPassBase::LoomFuseReduceScatterPassBase;

  void runOnOperation() override {
    bool fuseData = dataParallel;
    SmallVector<shard::AllSliceOp> slices;
    getOperation()->walk([&](shard::AllSliceOp op) { slices.push_back(op); });
    for (shard::AllSliceOp slice : slices) {
      auto sum = slice.getInput().getDefiningOp<shard::AllReduceOp>();
      if (!sum || !sum->hasOneUse() ||
          sum.getReduction() != shard::ReductionKind::Sum ||
          sum.getGridAttr() != slice.getGridAttr() ||
          sum.getGridAxes() != slice.getGridAxes())
        continue;
      // Below ZeRO-2 a gradient is summed whole over dp (ZeRO-1 keeps it).
      if (!fuseData && llvm::is_contained(sum.getGridAxes(), kDataAxis))
        continue;
      OpBuilder b(slice);
      auto scatter = shard::ReduceScatterOp::create(
          b, slice.getLoc(), slice.getType(), slice.getGridAttr(),
          slice.getGridAxesAttr(), sum.getInput(), sum.getReductionAttr(),
          slice.getSliceAxisAttr());
      slice.getResult().replaceAllUsesWith(scatter.getResult());
      slice.erase();
      sum.erase();
    }
  }
};

} // namespace
