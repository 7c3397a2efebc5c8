//===- PlanChoice.h - One set of plan choices, and pinned ones ---*- C++ -*-===//
//
// The choices a plan makes — mesh (dp x tp x pp), micro-batch size,
// pipeline schedule and its chunks, ZeRO stage, activation recomputation —
// and `--force`'s pins of any subset of them, which the joint search fills
// in and loomc's compile honours.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_PLANCHOICE_H
#define LOOM_PASSES_PLANNER_PLANCHOICE_H

#include "passes/planner/PipelineSchedule.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::loom::planner {

/// Activation recomputation of every layer.
enum class Remat { None, Selective, Full };
llvm::StringRef stringifyRemat(Remat remat);

struct PlanChoice {
  int64_t dp = 1, tp = 1, pp = 1;
  /// Samples a rank runs at once, and the micro-batches of a step.
  int64_t microBatchSize = 1, microBatches = 1;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int64_t chunks = 1; // model chunks a device (interleaved)
  int64_t zero = 0;
  Remat remat = Remat::None;

  /// `dp=8 tp=8 pp=16 micro-batch=1x96 1f1b zero=1 remat=selective`.
  std::string text() const;
};

/// The choices `--force` pins; the rest are free.
struct ChoicePins {
  std::optional<int64_t> dp, tp, pp, micro, zero, chunks;
  /// Samples a rank runs at once (`loomc --micro-batch`).
  std::optional<int64_t> microBatchSize;
  std::optional<ScheduleKind> schedule;
  /// `none`, `selective`, `full` or `auto` (the least that fits: free for
  /// the joint search).
  std::optional<std::string> remat;

  /// Whether `choice` agrees with every pin (`micro` is micro-batches).
  bool admits(const PlanChoice &choice) const;
};

/// Parses `--force dp=N,tp=N,pp=N,micro=N,zero=0-3,remat=none|selective|
/// full|auto,schedule=gpipe|1f1b|interleaved|zb-h1,virtual=N`; an error
/// names the bad item.
llvm::Expected<ChoicePins> parseChoicePins(llvm::StringRef text);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_PLANCHOICE_H
