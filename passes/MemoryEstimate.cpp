//===- MemoryEstimate.cpp - A planned step's memory, before lowering ------===//

#include "passes/MemoryEstimate.h"

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/LiveBytes.h"
#include "passes/MeshUtils.h"
#include "passes/OpCost.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::loom;

int64_t MemoryEstimate::peakBytes() const {
  int64_t most = 0;
  for (const DeviceEstimate &d : devices)
    most = std::max(most, d.memory.total());
  return most;
}

namespace {

int64_t aligned(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// Whether `op` is a collective over the micro axis: where the
/// micro-batches' values meet (loom-unroll-micro-batches accumulates them).
bool meetsMicroBatches(Operation *op) {
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  return axes && llvm::is_contained(axes.asArrayRef(), kMicroAxis);
}

/// The partitioned step as the pipeline devices run it: which ops run on
/// which device, which values each micro-batch makes anew, and the sums
/// the micro-batches accumulate into.
class PartitionedStep {
public:
  PartitionedStep(func::FuncOp func, int64_t pp) : func(func), pp(pp) {
    for (BlockArgument arg : func.getArguments())
      if (isDataArgument(func, arg.getArgNumber()))
        perMicro.insert(arg);
    for (Operation &op : func.getBody().front()) {
      if (meetsMicroBatches(&op)) {
        sums.insert(op.result_begin(), op.result_end());
        continue;
      }
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return perMicro.contains(v); }))
        perMicro.insert(op.result_begin(), op.result_end());
    }
  }

  /// Whether `op` runs on pipeline device `device`: its stage's, or, for
  /// what has none (the partition's collectives, constants), that of a
  /// reader, or else of what it reads.
  bool runsOn(Operation *op, int64_t device) {
    if (pp == 1)
      return true;
    auto key = std::make_pair(op, device);
    if (auto it = runs.find(key); it != runs.end())
      return it->second;
    runs[key] = false; // a cycle reads as not
    bool result;
    if (auto stage = op->getAttrOfType<IntegerAttr>(
            LoomDialect::StageAttrHelper::getNameStr())) {
      result = stage.getInt() % pp == device;
    } else if (llvm::any_of(op->getUsers(), [](Operation *u) {
                 return !isa<func::ReturnOp>(u);
               })) {
      result = llvm::any_of(op->getUsers(), [&](Operation *u) {
        return !isa<func::ReturnOp>(u) && runsOn(u, device);
      });
    } else {
      result = llvm::any_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && runsOn(def, device);
      });
    }
    return runs[key] = result;
  }

  func::FuncOp func;
  int64_t pp;
  DenseSet<Value> perMicro, sums;

private:
  DenseMap<std::pair<Operation *, int64_t>, bool> runs;
};

/// One pipeline device's estimate on the partitioned step.
DeviceEstimate estimateDevice(PartitionedStep &step, int64_t device,
                              int64_t micro,
                              const planner::PipelineSchedule *schedule,
                              ArrayRef<RecomputeGroup> groups) {
  func::FuncOp func = step.func;
  auto runs = [&](Operation *op) { return step.runsOn(op, device); };
  DeviceEstimate estimate;
  planner::DeviceMemory &m = estimate.memory;
  int64_t data = 0;
  for (BlockArgument arg : func.getArguments()) {
    if (llvm::none_of(arg.getUsers(), runs))
      continue;
    unsigned i = arg.getArgNumber();
    int64_t bytes = aligned(static_cast<int64_t>(bytesOf(arg)));
    if (func.getArgAttr(i, attr::kState))
      m.optimizerState += bytes;
    else if (func.getArgAttr(i, attr::kParam) ||
             func.getArgAttr(i, attr::kRunningMean) ||
             func.getArgAttr(i, attr::kRunningVar))
      m.parameters += bytes;
    else if (isDataArgument(func, i))
      data += bytes;
  }
  LiveBytesOptions options;
  if (step.pp > 1)
    options.runs = runs;
  DenseSet<Operation *> backward = backwardOps(func);
  DenseSet<Value> sent;
  int64_t sentBytes = 0;
  for (Operation &op : func.getBody().front()) {
    if (isa<func::ReturnOp>(op) || !runs(&op))
      continue;
    if (!options.markBefore && backward.contains(&op))
      options.markBefore = &op;
    // As the emitter counts them: a rank's block of an all-reduced
    // gradient (ZeRO-1) still held the whole gradient.
    if (isa<AdamwOp, SgdOp>(op)) {
      Value grad = op.getOperand(1);
      if (auto slice = grad.getDefiningOp<shard::AllSliceOp>())
        grad = slice.getInput();
      m.gradients += aligned(static_cast<int64_t>(bytesOf(grad)));
    }
    for (Value r : op.getResults())
      if (step.perMicro.contains(r) &&
          llvm::any_of(r.getUsers(),
                       [&](Operation *u) {
                         return !isa<func::ReturnOp>(u) && !runs(u);
                       }) &&
          sent.insert(r).second)
        sentBytes += aligned(static_cast<int64_t>(bytesOf(r)));
  }
  // One micro-batch's activations kept for its backward: made anew each
  // micro-batch, and not sent (a send is held to the end anyway).
  options.countAtMark = [&](Value v) {
    return step.perMicro.contains(v) && !sent.contains(v);
  };
  // The first micro-batch, beside the data of the others; the last, with
  // the sums of the ones before and what they sent.
  LiveBytes first = simulateLiveBytes(func, groups, options);
  estimate.keptBytes = first.atMark;
  int64_t peak = first.peak + (micro - 1) * data;
  if (micro > 1) {
    for (Value v : step.sums)
      if (Operation *def = v.getDefiningOp(); def && runs(def))
        options.heldFromStart.insert(v);
    LiveBytes last = simulateLiveBytes(func, groups, options);
    peak = std::max(peak, last.peak + (micro - 1) * sentBytes);
  }
  if (schedule) {
    int64_t chunks = schedule->chunks;
    estimate.inFlight = (schedule->inFlight(device) + chunks - 1) / chunks;
  }
  peak += (estimate.inFlight - 1) * estimate.keptBytes;
  m.activations = std::max<int64_t>(0, peak - m.parameters - m.optimizerState -
                                           m.gradients);
  return estimate;
}

} // namespace

llvm::Expected<MemoryEstimate>
mlir::loom::estimateMemory(ModuleOp planned,
                           const MemoryEstimateOptions &options) {
  RematMode remat = options.remat;
  auto error = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "memory estimate: " + why);
  };
  shard::GridOp grid = lookupMesh(planned);
  if (!isPlannedMesh(grid) || !lookupEntryFunction(planned))
    return error("needs a planned mesh and the entry function");
  int64_t pp = grid.getShape()[kPipelineAxis], micro = microAxisSize(grid);
  int64_t zero = 0;
  if (auto z = grid->getAttrOfType<IntegerAttr>(
          LoomDialect::ZeroStageAttrHelper::getNameStr()))
    zero = z.getInt();
  std::optional<planner::PipelineSchedule> schedule;
  if (pp > 1) {
    llvm::Expected<planner::PipelineSchedule> s = pipelineScheduleOf(grid);
    if (!s)
      return s.takeError();
    schedule = std::move(*s);
  }

  // One rank's step for one micro-batch, on a copy; what goes wrong here
  // the lowering reports.
  OwningOpRef<ModuleOp> copy(planned.clone());
  {
    ScopedDiagnosticHandler quiet(planned.getContext(),
                                  [](Diagnostic &) { return success(); });
    PassManager pm(planned.getContext());
    buildLoomPartitionPipeline(pm);
    buildLoomPartitionCleanupPipeline(pm, zero, grid.getShape()[kTensorAxis]);
    if (zero >= 3)
      pm.addNestedPass<func::FuncOp>(createLoomRegatherParametersPass());
    // Buckets of one micro-batch's sums; with several, the sums accumulate
    // over the whole step anyway.
    if (micro == 1) {
      LoomBucketAllReducesPassOptions buckets;
      buckets.bucketBytes = options.bucketBytes;
      buckets.cluster = options.cluster;
      pm.addNestedPass<func::FuncOp>(createLoomBucketAllReducesPass(buckets));
    }
    if (failed(pm.run(*copy)))
      return error("the planned step does not partition");
  }
  func::FuncOp func = lookupEntryFunction(*copy);
  if (!func || !func.getBody().hasOneBlock())
    return error("the partitioned step is not one block");

  // Recomputation's clones, as loom-recompute would place them.
  SmallVector<RecomputeGroup> groups;
  if (remat != RematMode::None) {
    ProgramLayers layers = findLayers(func);
    for (const LayerInstance &instance : layers.instances) {
      RecomputeGroup g;
      g.ops = recomputedOps(instance, remat, layers);
      g.insertBefore = placeGroup(g.ops, layers.backward);
      if (g.insertBefore)
        groups.push_back(std::move(g));
    }
  }
  PartitionedStep step(func, pp);
  MemoryEstimate estimate;
  for (int64_t d = 0; d < pp; ++d)
    estimate.devices.push_back(estimateDevice(
        step, d, micro, schedule ? &*schedule : nullptr, groups));
  return estimate;
}
