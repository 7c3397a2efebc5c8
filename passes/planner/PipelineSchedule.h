//===- PipelineSchedule.h - The order of micro-batches on each stage -*- C++ -*-===//
//
// A pipeline schedule as plain data: for each device of a pipeline of `p`
// devices, the order in which it runs the forward (F), backward (B) and, for
// zero-bubble schedules, weight-gradient (W) parts of each micro-batch on
// each of its model chunks. docs/planner.md states each schedule's rule.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_PIPELINESCHEDULE_H
#define LOOM_PASSES_PLANNER_PIPELINESCHEDULE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::loom::planner {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };

/// `gpipe`, `1f1b`, `interleaved`, `zb-h1`.
llvm::StringRef stringifySchedule(ScheduleKind kind);
std::optional<ScheduleKind> parseSchedule(llvm::StringRef s);

/// One unit of work of a device.
struct PipelineTask {
  enum Kind { Forward, Backward, WeightGrad };
  Kind kind;
  int64_t microBatch;
  /// The device's model chunk (0 unless interleaved): chunk c of device d is
  /// pipeline stage c * p + d.
  int64_t chunk = 0;
  bool operator==(const PipelineTask &o) const {
    return kind == o.kind && microBatch == o.microBatch && chunk == o.chunk;
  }
};

struct PipelineSchedule {
  ScheduleKind kind;
  int64_t devices = 1, microBatches = 1, chunks = 1;
  /// Per device, its tasks in order.
  std::vector<std::vector<PipelineTask>> order;

  /// Device `d`'s order as text: `F0 F1 B0 ...`, with `.c` after the
  /// micro-batch for chunk c when there are several (`F3.1`).
  std::string text(int64_t device) const;
  /// The most micro-batches whose forward has run and whose backward (W
  /// where there is one) has not, at any point of device `d`'s order: the
  /// activations it holds at once.
  int64_t inFlight(int64_t device) const;
  /// The most micro-batches open at once on device `d`, each from its first
  /// forward on any chunk to its last backward part on any chunk: what the
  /// runtime counts. `inFlight` without chunks; with them, fewer (a
  /// micro-batch with forwards on two chunks counts once).
  int64_t microBatchesInFlight(int64_t device) const;
  /// Runs the schedule with every task taking one unit of time, each device
  /// taking its tasks in order as soon as what they need is done (a
  /// forward: the previous stage's forward of the micro-batch; a backward:
  /// its own forward and the next stage's backward; W: its backward). Per
  /// device, the time each of its tasks starts, increasing along its order;
  /// a task starts after the tasks it needs have ended. An error when the
  /// devices wait on each other for ever.
  llvm::Expected<std::vector<std::vector<int64_t>>> startTimes() const;
  /// The step's length under `startTimes` over the most tasks a device
  /// runs: how much longer than its busiest device's work the waits make
  /// the step (1 + (p - 1) / m for 1F1B; 1 without stages).
  llvm::Expected<double> stretch() const;
};

/// The schedule of `kind` for `devices` devices, `microBatches`
/// micro-batches and `chunks` model chunks a device (interleaved only;
/// otherwise 1). Errors: interleaved without chunks >= 2 or with a number
/// of micro-batches that is not a multiple of the devices, chunks > 1 for
/// another kind, or fewer micro-batches than devices for interleaved.
llvm::Expected<PipelineSchedule> buildSchedule(ScheduleKind kind,
                                               int64_t devices,
                                               int64_t microBatches,
                                               int64_t chunks = 1);

/// The micro-batches a pipeline of `devices` devices runs when the user
/// gives no count: the fewest that divide the `share` samples of a dp rank
/// (a multiple of the devices for interleaved) and keep the schedule's
/// stretch at most `maxStretch` (its waits a fifth of the step by
/// default); without such a count, the one of least stretch (ties: the
/// fewest). 1 when no count is valid.
int64_t defaultMicroBatches(ScheduleKind kind, int64_t devices, int64_t share,
                            int64_t chunks = 1, double maxStretch = 1.25);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_PIPELINESCHEDULE_H
