//===- PlanCost.cpp - The lowered step as the planner's request -*- C++ -*-===//

#include "compiler/PlanCost.h"
#include "passes/OpCost.h"
#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/planner/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::loom;

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
                                               planner::Precision precision,
                                               bool hostKernels) {
  if (func::FuncOp func = lookupEntryFunction(module))
    return stepRequestOf(func, precision, hostKernels);
  planner::StepRequest request;
  request.precision = precision;
  return request;
}

RematFigures mlir::loom::rematFiguresOf(ModuleOp module) {
  RematFigures f;
  for (func::FuncOp func : programFunctions(module)) {
    auto remat = func->getAttrOfType<DictionaryAttr>(
        LoomDialect::RematAttrHelper::getNameStr());
    if (!remat)
      continue;
    auto count = [&](StringRef key) {
      auto v = remat.getAs<IntegerAttr>(key);
      return v ? v.getInt() : 0;
    };
    f.mode = remat.getAs<StringAttr>("mode").str();
    f.layers += count("layers");
    f.fullLayers += count("full_layers");
    f.selectiveLayers += count("selective_layers");
    f.regathered += count("regathered");
    if (auto s = remat.getAs<FloatAttr>("recompute_seconds"))
      f.seconds = std::max(f.seconds, s.getValueAsDouble());
  }
  return f;
}

PipelineStages mlir::loom::pipelineStagesOf(ModuleOp module) {
  PipelineStages stages;
  shard::GridOp grid = lookupMesh(module);
  DictionaryAttr pipeline = pipelineOf(grid);
  if (!pipeline)
    return stages;
  stages.devices = grid.getShape()[kPipelineAxis];
  stages.schedule = pipeline.getAs<StringAttr>("schedule").str();
  for (Attribute a : pipeline.getAs<ArrayAttr>("layers"))
    if (auto range = dyn_cast<DenseI64ArrayAttr>(a); range && range.size() == 2)
      stages.layers.push_back({range[0], range[1]});
  if (auto seconds = pipeline.getAs<DenseF64ArrayAttr>("stage_seconds"))
    stages.plannedSeconds.assign(seconds.asArrayRef().begin(),
                                 seconds.asArrayRef().end());
  llvm::Expected<planner::PipelineSchedule> s = pipelineScheduleOf(grid);
  if (!s) {
    llvm::consumeError(s.takeError());
    return stages;
  }
  for (int64_t d = 0; d < stages.devices; ++d)
    stages.inFlight.push_back(s->microBatchesInFlight(d));
  if (llvm::Expected<double> stretch = s->stretch())
    stages.stretch = *stretch;
  else
    llvm::consumeError(stretch.takeError());
  return stages;
}

planner::StepRequest mlir::loom::stepRequestOf(func::FuncOp func,
                                               planner::Precision precision,
                                               bool hostKernels) {
  planner::StepRequest request;
  request.precision = precision;
  if (!func || func.isExternal())
    return request;
  // The record of each bucket started and not yet waited for.
  DenseMap<int64_t, size_t> buckets;
  for (Operation &op : func.getBody().front()) {
    int64_t here = static_cast<int64_t>(request.ops.size());
    if (auto c = collectiveOf(&op)) {
      c->start = c->wait = here;
      request.collectives.push_back(std::move(*c));
      continue;
    }
    // A bucket is one all-reduce of all its tensors, from its start to its
    // wait.
    if (auto start = dyn_cast<AllReduceStartOp>(op)) {
      planner::CollectiveRecord c;
      c.kind = planner::CollectiveKind::AllReduce;
      for (Value v : start.getInputs())
        c.bytes += bytesOf(v);
      for (int16_t axis : start.getGridAxes())
        c.axes.push_back(axis);
      c.start = here;
      c.bucket = true;
      c.tensors = start.getInputs().size();
      buckets[start.getBucket()] = request.collectives.size();
      request.collectives.push_back(std::move(c));
      continue;
    }
    // A reduce-scatter or all-gather bucket likewise: one collective of
    // the whole tensors (the scattered operands, the gathered results).
    if (isa<ReduceScatterStartOp, AllGatherStartOp>(op)) {
      BlockBucket block = blockBucketOf(&op);
      planner::CollectiveRecord c;
      c.kind = block.scatter ? planner::CollectiveKind::ReduceScatter
                             : planner::CollectiveKind::AllGather;
      for (Value v : block.scatter ? ValueRange(op.getOperands())
                                   : ValueRange(op.getResults()))
        c.bytes += bytesOf(v);
      c.axes.assign(block.axes.begin(), block.axes.end());
      c.start = here;
      c.bucket = true;
      c.tensors = op.getNumOperands();
      buckets[block.bucket] = request.collectives.size();
      request.collectives.push_back(std::move(c));
      continue;
    }
    if (isa<AllReduceWaitOp, ReduceScatterWaitOp, AllGatherWaitOp>(op)) {
      int64_t bucket = op.getAttrOfType<IntegerAttr>("bucket").getInt();
      if (auto it = buckets.find(bucket); it != buckets.end())
        request.collectives[it->second].wait = here;
      continue;
    }
    // Constants are arena data and reshapes are views: neither runs
    // (emit/PlanEmitter.cpp).
    if (!isa<LoomDialect>(op.getDialect()) || isa<ConstantOp, ReshapeOp>(op))
      continue;
    request.ops.push_back(opRecordOf(&op, hostKernels));
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
