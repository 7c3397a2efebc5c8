//===- MemoryEstimate.cpp - A planned step's memory, before emission ------===//

#include "passes/MemoryEstimate.h"

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/LiveBytes.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <map>

using namespace mlir;
using namespace mlir::loom;

int64_t MemoryEstimate::peakBytes() const {
  int64_t most = 0;
  for (const planner::DeviceMemory &d : devices)
    most = std::max(most, d.total());
  return most;
}

namespace {

/// Micro-batches the shortened step writes out (pp = 1): the first, the
/// second and the last.
constexpr int64_t kWrittenMicroBatches = 3;

/// The data of the micro-batches a shortened step leaves out: their bytes,
/// held from the step's start to the last micro-batch's first op (every
/// micro-batch it leaves out runs before that one and after the second,
/// which holds the same buffers; loom-unroll-micro-batches).
LiveBytesOptions leftOutData(func::FuncOp func, int64_t micro) {
  // The data arguments by micro-batch (sample offset).
  std::map<int64_t, SmallVector<Value>> byOffset;
  for (BlockArgument arg : func.getArguments())
    if (auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                         attr::kSampleOffset))
      byOffset[offset.getInt()].push_back(arg);
  LiveBytesOptions options;
  int64_t written = static_cast<int64_t>(byOffset.size());
  if (written < 2 || written >= micro)
    return options;
  for (Value arg : byOffset.begin()->second)
    options.heldBytes += (micro - written) * arenaBytes(arg);
  // The last micro-batch's values: from its data, or its block of a value
  // sliced over the micro-batches.
  SmallVector<Value> &lastData = byOffset.rbegin()->second;
  DenseSet<Value> last(lastData.begin(), lastData.end());
  for (Operation &op : func.getBody().front()) {
    auto mb = dyn_cast<MicroBatchOp>(op);
    if ((mb && mb.getIndex() == micro - 1) ||
        llvm::any_of(op.getOperands(),
                     [&](Value v) { return last.contains(v); })) {
      if (!options.heldUntil)
        options.heldUntil = &op;
      last.insert(op.result_begin(), op.result_end());
    }
  }
  return options;
}

/// One program's peak by what it holds, as the emitter counts it.
planner::DeviceMemory estimateProgram(func::FuncOp func, int64_t micro) {
  planner::DeviceMemory m;
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    int64_t bytes = arenaBytes(arg);
    if (func.getArgAttr(i, attr::kState))
      m.optimizerState += bytes;
    else if (func.getArgAttr(i, attr::kParam) ||
             func.getArgAttr(i, attr::kRunningMean) ||
             func.getArgAttr(i, attr::kRunningVar))
      m.parameters += bytes;
  }
  // A rank's block of an all-reduced gradient (ZeRO-1) still held the whole
  // gradient.
  func.walk([&](Operation *op) {
    if (!isa<AdamwOp, SgdOp>(op))
      return;
    Value grad = op->getOperand(1);
    if (auto slice = grad.getDefiningOp<shard::AllSliceOp>())
      grad = slice.getInput();
    m.gradients += arenaBytes(grad);
  });
  int64_t peak = simulateLiveBytes(func, {}, leftOutData(func, micro));
  m.activations = std::max<int64_t>(0, peak - m.parameters - m.optimizerState -
                                           m.gradients);
  return m;
}

} // namespace

llvm::Expected<MemoryEstimate>
mlir::loom::estimateMemory(ModuleOp planned,
                           const MemoryEstimateOptions &options) {
  auto error = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "memory estimate: " + why);
  };
  shard::GridOp grid = lookupMesh(planned);
  if (!isPlannedMesh(grid) || !lookupEntryFunction(planned))
    return error("needs a planned mesh and the entry function");
  LowerPipelineOptions lower;
  lower.tp = grid.getShape()[kTensorAxis];
  lower.pp = grid.getShape()[kPipelineAxis];
  if (auto z = grid->getAttrOfType<IntegerAttr>(
          LoomDialect::ZeroStageAttrHelper::getNameStr()))
    lower.zero = z.getInt();
  lower.remat = options.remat;
  lower.cluster = options.cluster;
  lower.memoryBudgetGib = options.memoryBudgetGib;
  lower.bucketBytes = options.bucketBytes;
  lower.blockBucketBytes = options.blockBucketBytes;
  // The shortened step, but where the pipeline schedule orders every
  // micro-batch, and where the recomputation is chosen on the step.
  int64_t micro = microAxisSize(grid);
  if (lower.pp == 1 && options.remat != "auto")
    lower.writtenMicroBatches = kWrittenMicroBatches;

  // Lowered on a copy; what goes wrong here the lowering reports.
  OwningOpRef<ModuleOp> copy(planned.clone());
  {
    ScopedDiagnosticHandler quiet(planned.getContext(),
                                  [](Diagnostic &) { return success(); });
    PassManager pm(planned.getContext());
    buildLoomLowerPipeline(pm, lower);
    if (failed(pm.run(*copy)))
      return error("the planned step does not lower");
  }
  MemoryEstimate estimate;
  for (func::FuncOp func : programFunctions(*copy)) {
    if (!func.getBody().hasOneBlock())
      return error("a lowered program is not one block");
    estimate.devices.push_back(estimateProgram(func, micro));
  }
  if (estimate.devices.empty())
    return error("the lowered step has no program");
  return estimate;
}
