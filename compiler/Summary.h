//===- Summary.h - What a plan does, for people and tools -------*- C++ -*-===//

#ifndef LOOM_COMPILER_SUMMARY_H
#define LOOM_COMPILER_SUMMARY_H

#include "compiler/PlanCost.h"
#include "emit/PlanEmitter.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/CostModel.h"
#include "passes/planner/MemoryModel.h"

#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace mlir::loom {

/// The planner's figures for a plan, as the summaries report them.
struct PlanFigures {
  /// The busiest device's memory (arena and kernel workspace).
  planner::DeviceMemory memory;
  /// Each rank's peak bytes, in rank order.
  std::vector<int64_t> peakBytesPerRank;
  int64_t numParameters = 0;
  /// One step, from the cost model (compiler/PlanCost.h).
  planner::StepEstimate step;
  /// The collectives one rank runs in a step.
  std::vector<planner::CollectiveRecord> collectives;
  /// The forward's layer and RMS norms, and those of them that run on a
  /// share of the tokens over tp (sequence parallelism).
  int64_t norms = 0, sequenceParallelNorms = 0;
  /// With pipeline stages: the schedule, how much its waits stretch the
  /// busiest device's step, and each stage's layers, ranks, seconds a step
  /// (its device's program's, shared among the device's stages) and its
  /// device's peak bytes.
  struct Stage {
    int64_t firstLayer = 0, lastLayer = 0;
    std::vector<int32_t> ranks;
    double seconds = 0;
    int64_t peakBytes = 0;
    /// The micro-batches its device's schedule keeps in flight.
    int64_t microBatchesInFlight = 0;
  };
  std::string schedule = "none";
  double pipelineStretch = 1;
  std::vector<Stage> stages;
  /// Activation recomputation (loom-choose-recompute).
  RematFigures remat;
  /// The busiest program's live-set bound: the most bytes its buffers hold
  /// at once, which no placement of them in the arena can beat.
  int64_t liveBytes = 0;
  /// The busiest device's arena as estimated from the planned step, before
  /// lowering (passes/MemoryEstimate.h); 0 when there is none.
  int64_t estimatedBytes = 0;
};

/// "full on 2, selective on 1 of 4 layers" (or "none").
std::string rematText(const RematFigures &remat);

/// The figures of `plan`: each program's arena by what it holds (from the
/// emitter's accounting, plus its kernel workspace) and the step estimate.
PlanFigures planFigures(const plan::Plan &plan, const MemoryBreakdown &emitted,
                        const planner::StepRequest &request,
                        planner::StepEstimate step);

/// Fills `f`'s pipeline figures from the module's `stages` and the step
/// seconds of each pp device's program (`deviceSeconds`, in pp order).
void setPipelineFigures(PlanFigures &f, const plan::Plan &plan,
                        const PipelineStages &stages,
                        const std::vector<double> &deviceSeconds);

/// The `--summary-json` object (docs/loomc.md).
llvm::json::Object summaryJson(const plan::Plan &plan, const Cluster &cluster,
                               const PlanFigures &figures,
                               double planningSeconds);

/// The human summary `loomc` prints.
std::string summaryText(const plan::Plan &plan, const Cluster &cluster,
                        const PlanFigures &figures);

} // namespace mlir::loom

#endif // LOOM_COMPILER_SUMMARY_H
