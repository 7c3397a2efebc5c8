//===- PartitionStages.cpp - Cut the step into pipeline stages --*- C++ -*-===//
//
// With pp > 1, the training step's layers are cut into pipeline stages:
// each op's layer comes from its ONNX node name (`/h.3/attn/Add` is layer
// 3; the backward ops carry their forward op's name), the planner costs each
// layer's forward and backward and splits the line of layers so the slowest
// stage is fastest within each device's memory (planner/StagePartition.h),
// and the schedule (planner/PipelineSchedule.h) fixes the order each device
// runs its micro-batches in. A planning pass: it writes `loom.stage` on
// every op, `loom.backward` on the backward pass's, and `loom.pipeline` on
// the mesh, and changes nothing else.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/ErrorKind.h"
#include "ir/LoomOps.h"
#include "ir/NodeName.h"
#include "passes/ForwardLayers.h"
#include "passes/MeshUtils.h"
#include "passes/OpCost.h"
#include "passes/Passes.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/CostModel.h"
#include "passes/planner/LayerName.h"
#include "passes/planner/NoFit.h"
#include "passes/planner/PipelineSchedule.h"
#include "passes/planner/StagePartition.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMPARTITIONSTAGESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// The bytes each parameter's update holds for the step, per parameter
/// byte: the parameter, its gradient and the optimizer's state slots.
double heldPerParameterByte(func::FuncOp func) {
  double slots = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgAttr(i, attr::kState)) {
      slots = 2; // AdamW's two moments (SGD with momentum: one)
      break;
    }
  return 2 + slots;
}

struct PartitionStagesPass
    : public loom::impl::LoomPartitionStagesPassBase<PartitionStagesPass> {
  using LoomPartitionStagesPassBase::LoomPartitionStagesPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid = lookupMesh(module);
    func::FuncOp func = lookupEntryFunction(module);
    if (!isPlannedMesh(grid) || !func || !func.getBody().hasOneBlock()) {
      module.emitError("loom-partition-stages needs a planned mesh and a "
                       "single-block entry function (run loom-choose-mesh "
                       "first)");
      return signalPassFailure();
    }
    int64_t devices = grid.getShape()[kPipelineAxis];
    if (devices == 1)
      return;
    std::optional<planner::ScheduleKind> kind =
        planner::parseSchedule(schedule);
    if (!kind) {
      module.emitError("unknown pipeline schedule '")
          << schedule << "'; expected gpipe, 1f1b, interleaved or zb-h1";
      return signalPassFailure();
    }
    int64_t chunks = virtualStages;
    int64_t micro = microAxisSize(grid);
    llvm::Expected<planner::PipelineSchedule> order =
        planner::buildSchedule(*kind, devices, micro, chunks);
    if (!order) {
      module.emitError("pp = ")
          << devices << ", " << micro << " micro-batch(es): "
          << llvm::toString(order.takeError());
      return signalPassFailure();
    }
    std::string spec = cluster;
    llvm::Expected<Cluster> parsed = parseCluster(spec);
    if (!parsed) {
      module.emitError("loom-partition-stages: ")
          << llvm::toString(parsed.takeError());
      return signalPassFailure();
    }
    if (failed(partition(func, grid, *order, *parsed)))
      return signalPassFailure();
  }

  /// Finds the layers, splits them and writes the marks.
  LogicalResult partition(func::FuncOp func, shard::GridOp grid,
                          const planner::PipelineSchedule &order,
                          const Cluster &cluster) {
    Block &body = func.getBody().front();
    FailureOr<ForwardLayers> found = forwardLayersOf(func);
    if (failed(found))
      return failure();
    const SmallVector<Operation *> &forward = found->ops;
    const SmallVector<int64_t> &layerOf = found->layerOf;
    int64_t layers = found->numLayers();
    int64_t stages = order.devices * order.chunks;
    if (layers < stages) {
      // One of the model's own layer names, or the form they take.
      std::string example = "such as '/h.3/...'";
      for (auto [op, layer] : llvm::zip(forward, layerOf))
        if (layer >= 0) {
          example = "such as '" + onnxNodeName(op->getLoc()).str() + "'";
          break;
        }
      return func.emitError("pp = ")
                 << order.devices
                 << (order.chunks > 1
                         ? " x " + std::to_string(order.chunks) + " chunks"
                         : std::string())
                 << " needs at least " << stages
                 << " stages' worth of layers: the op names show " << layers
                 << " numbered layers (" << example << "); use a smaller pp",
             failure();
    }

    // Costs per layer (-1 and `layers` are the two ends), forward and
    // backward: a backward op has its forward op's location.
    DenseMap<Location, int64_t> layerAt;
    for (auto [op, layer] : llvm::zip(forward, layerOf))
      layerAt.try_emplace(op->getLoc(), layer);
    planner::StageRequest request;
    request.layerSeconds.assign(layers, 0);
    request.layerStateBytes.assign(layers, 0);
    request.layerActivationBytes.assign(layers, 0);
    int64_t micro = order.microBatches;
    int64_t dataSplit = grid.getShape()[kDataAxis] * micro;
    // Tensor parallelism splits a stage's work, state and activations over
    // its tp devices: evenly, as an estimate (the shardings are chosen
    // after the stages; the emitted plan's memory is proven exactly).
    double tpSplit = static_cast<double>(grid.getShape()[kTensorAxis]);
    auto add = [&](int64_t layer, double secs, double held, double act) {
      secs /= tpSplit;
      held /= tpSplit;
      act /= tpSplit;
      if (layer < 0) {
        request.firstSeconds += secs;
        request.firstStateBytes += held;
        request.firstActivationBytes += act;
      } else if (layer >= layers) {
        request.lastSeconds += secs;
        request.lastStateBytes += held;
        request.lastActivationBytes += act;
      } else {
        request.layerSeconds[layer] += secs;
        request.layerStateBytes[layer] += held;
        request.layerActivationBytes[layer] += act;
      }
    };
    // Ops see the global batch: a micro-batch on one device is 1 / (dp x
    // micro) of it.
    // A parameter belongs to the layer of its first use, with its bytes
    // and its update.
    DenseMap<Value, int64_t> paramLayer;
    double perByte = heldPerParameterByte(func);
    for (auto [op, layer] : llvm::zip(forward, layerOf))
      for (Value v : op->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(v);
            arg && func.getArgAttr(arg.getArgNumber(), attr::kParam) &&
            !func.getArgAttr(arg.getArgNumber(), attr::kState) &&
            paramLayer.try_emplace(v, layer).second)
          add(layer, 0, perByte * bytesOf(v), 0);
    DenseSet<Operation *> isForward(forward.begin(), forward.end());
    for (Operation &op : body.without_terminator()) {
      int64_t layer;
      if (isa<AdamwOp, SgdOp>(op)) {
        auto it = paramLayer.find(op.getOperand(0));
        if (it == paramLayer.end())
          continue;
        layer = it->second;
      } else {
        auto it = layerAt.find(op.getLoc());
        if (it == layerAt.end())
          continue;
        layer = it->second;
      }
      double secs = planner::rooflineSeconds(
                        opRecordOf(&op, cluster.hostKernels()), cluster) /
                    dataSplit;
      double act = 0;
      if (isForward.contains(&op))
        for (Value r : op.getResults())
          act += bytesOf(r) / dataSplit;
      add(layer, secs, 0, act);
    }
    for (int64_t s = 0; s < stages; ++s)
      request.inFlight.push_back(order.inFlight(s % order.devices));
    // A negative budget: the plan search chose the stages and checked their
    // memory; the emitted arena proves it. (0 is no limit to the split.)
    double budget = memoryBudgetGib > 0   ? memoryBudgetGib * (1ull << 30)
                    : memoryBudgetGib < 0 ? 0
                                          : cluster.usableMemoryBytes();
    request.budgetBytes = budget;
    llvm::Expected<planner::StageSplit> split =
        planner::partitionStages(request);
    if (!split) {
      bool noFit = false;
      std::string why = planner::takeMessage(split.takeError(), noFit);
      if (noFit)
        recordErrorKind(ErrorKind::DoesNotFit);
      return func.emitError("cannot cut the model into pipeline stages: ")
                 << why,
             failure();
    }

    // Marks: each forward op its layer's stage; every other op the stage of
    // the forward op whose location it has, or else of its first operand
    // made in a stage (the optimizer update: its parameter's).
    SmallVector<int64_t> stageOfLayer(layers + 2, 0);
    for (auto [s, range] : llvm::enumerate(split->layers))
      for (int64_t l = range.first; l <= range.second; ++l)
        stageOfLayer[l + 1] = s;
    stageOfLayer[layers + 1] = stages - 1;
    auto stageOf = [&](int64_t layer) { return stageOfLayer[layer + 1]; };
    Builder b(func.getContext());
    StringRef mark = LoomDialect::StageAttrHelper::getNameStr();
    DenseMap<Value, int64_t> valueStage;
    for (auto [v, layer] : paramLayer)
      valueStage[v] = stageOf(layer);
    for (Operation &op : body.without_terminator()) {
      int64_t stage = -1;
      if (isa<AdamwOp, SgdOp>(op)) {
        if (auto it = valueStage.find(op.getOperand(0)); it != valueStage.end())
          stage = it->second;
      } else if (auto it = layerAt.find(op.getLoc()); it != layerAt.end()) {
        stage = stageOf(it->second);
      }
      for (Value v : op.getOperands())
        if (stage < 0)
          if (auto it = valueStage.find(v); it != valueStage.end())
            stage = it->second;
      if (stage < 0)
        stage = 0;
      op.setAttr(mark, b.getI64IntegerAttr(stage));
      if (!isForward.contains(&op) && !isa<AdamwOp, SgdOp>(op))
        op.setAttr(LoomDialect::BackwardAttrHelper::getNameStr(),
                   b.getUnitAttr());
      for (Value r : op.getResults())
        valueStage[r] = stage;
    }

    SmallVector<Attribute> layerRanges, orders;
    SmallVector<double> seconds;
    for (auto [s, range] : llvm::enumerate(split->layers)) {
      layerRanges.push_back(
          b.getDenseI64ArrayAttr({range.first, range.second}));
      seconds.push_back(split->seconds[s]);
    }
    for (int64_t d = 0; d < order.devices; ++d)
      orders.push_back(b.getStringAttr(order.text(d)));
    SmallVector<NamedAttribute> pipeline{
        b.getNamedAttr("schedule",
                       b.getStringAttr(planner::stringifySchedule(order.kind))),
        b.getNamedAttr("virtual_stages", b.getI64IntegerAttr(order.chunks)),
        b.getNamedAttr("layers", b.getArrayAttr(layerRanges)),
        b.getNamedAttr("stage_seconds", b.getDenseF64ArrayAttr(seconds)),
        b.getNamedAttr("order", b.getArrayAttr(orders))};
    grid->setAttr(LoomDialect::PipelineAttrHelper::getNameStr(),
                  b.getDictionaryAttr(pipeline));
    return success();
  }
};

} // namespace
