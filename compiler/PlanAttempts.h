//===- PlanAttempts.h - What loomc compiles when a plan does not fit -*- C++
//-*-===//
//
// A compiled plan whose arena does not fit its device is compiled again
// with less memory: without the staging of overlapped reduce-scatters and
// gathers, with the next ZeRO stage, with twice the micro-batches (against
// the recomputation that fits, by the predicted step), then with the
// recomputation that fits; where --force pins a choice it stays
// (docs/loomc.md, item 5).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PLANATTEMPTS_H
#define LOOM_COMPILER_PLANATTEMPTS_H

#include "compiler/LoomcOptions.h"
#include "compiler/PlanSearch.h"
#include "compiler/Summary.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/MemoryModel.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <string>
#include <variant>

namespace mlir::loom::loomc {

/// The choices one compile of the model tries where --force does not pin
/// them: a plan that does not fit the device is compiled again with the
/// next ZeRO stage, then with twice the micro-batches while that keeps
/// shrinking the plan, then with the recomputation that fits.
struct Attempt {
  int64_t zero = 0, micro = 1;
  /// The bytes the plan with half as many micro-batches needed.
  int64_t lastRequired = 0;
  /// loom-choose-recompute's mode and budget (0: the device's memory).
  std::string remat = "none";
  double rematBudgetGib = 0;
  int rematTries = 0;
  /// Micro-batches and recomputation were weighed already: keep to the
  /// order.
  bool weighed = false;
  /// Whether ZeRO's and sequence parallelism's reduce-scatters and gathers
  /// go in overlapped buckets (whose staging holds memory) under
  /// `--comm-buckets=auto`.
  bool blockBuckets = true;
  /// Whether the plan search ran (or is not to run: a pinned mesh, the
  /// one-device reference), and what it chose: the mesh and schedule it
  /// pins; its micro-batches, ZeRO stage and recomputation start the
  /// attempts.
  bool searched = false;
  std::shared_ptr<const SearchedPlan> search;
  /// Why the search chose nothing, when it did not.
  std::string searchError;
};

/// What the compiled plan that did not fit was.
struct FitState {
  bool training = true, hasBatchNorm = false;
  int64_t dp = 1, zero = 0, numMicroBatches = 1, globalBatch = 0;
  const planner::MemoryFit &fit;
  const PlanFigures &figures;
  const Cluster &cluster;
};

/// The attempt to compile after `attempt`'s plan did not fit, or the
/// one-line refusal when none is left. `probe` compiles an attempt quietly
/// and gives its predicted step (infinity when it does not fit).
std::variant<Attempt, std::string>
nextAttempt(const Options &o, const Forced &forced, const Attempt &attempt,
            const FitState &state,
            llvm::function_ref<double(const Attempt &)> probe);

/// Runs the default plan search on `module` (imported, its training step
/// built with `phases` on a clone) for the choices `forced` leaves free,
/// and starts `attempt` from its choice: micro-batches, ZeRO stage and
/// recomputation (the mesh and schedule are read from `attempt.search`).
/// Without a choice, `attempt.searchError` says why.
void searchDefaultPlan(const Options &o, ModuleOp module,
                       const CompilerPipelineOptions &phases,
                       const Cluster &cluster, const Forced &forced,
                       int64_t globalBatch, llvm::StringRef name,
                       Attempt &attempt);

/// The summary's lines on the search of `attempt` (what it costed and
/// chose, with `explain` why), or why none ran on `devices` devices.
std::string searchSummary(const Attempt &attempt, bool explain,
                          int64_t devices);

} // namespace mlir::loom::loomc

#endif // LOOM_COMPILER_PLANATTEMPTS_H
