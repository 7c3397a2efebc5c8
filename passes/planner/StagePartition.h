//===- StagePartition.h - Layers into pipeline stages ------------*- C++ -*-===//
//
// The inter-operator half of the planner as plain data (Alpa's stage
// construction, on a line of layers): contiguous runs of layers per stage,
// the slowest stage as fast as it can be, each stage within the device
// memory its schedule leaves it. docs/planner.md, "Pipeline stages".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_STAGEPARTITION_H
#define LOOM_PASSES_PLANNER_STAGEPARTITION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace mlir::loom::planner {

struct StageRequest {
  /// Per layer, in order: the seconds of its forward and backward on one
  /// micro-batch, the bytes it holds for the whole step (parameters,
  /// gradients, optimizer state) and the activation bytes one micro-batch
  /// keeps from its forward to its backward.
  std::vector<double> layerSeconds, layerStateBytes, layerActivationBytes;
  /// What runs before the first layer (the embedding: first stage) and after
  /// the last (the head and the loss: last stage), likewise.
  double firstSeconds = 0, lastSeconds = 0;
  double firstStateBytes = 0, lastStateBytes = 0;
  double firstActivationBytes = 0, lastActivationBytes = 0;
  /// Per stage, the micro-batches whose activations it holds at once (from
  /// the schedule: p - s for 1F1B, all of them for GPipe).
  std::vector<int64_t> inFlight;
  /// Bytes each stage may use; 0: no limit.
  double budgetBytes = 0;
};

struct StageSplit {
  /// Per stage, its first and last layer.
  std::vector<std::pair<int64_t, int64_t>> layers;
  /// Per stage, its seconds a micro-batch and its bytes.
  std::vector<double> seconds, bytes;
};

/// The split of the layers into `request.inFlight.size()` stages, each at
/// least one layer, whose slowest stage is fastest among the splits that fit
/// the budget (dynamic programming over the layer line; ties go to the
/// split whose stages are closest in time). Errors: fewer layers than
/// stages, or no split that fits.
llvm::Expected<StageSplit> partitionStages(const StageRequest &request);

/// The layers of each of `stages` contiguous stages (each at least one)
/// whose slowest stage, the sum of its layers' `seconds`, is as fast as any
/// split's, to a relative 1e-12: a bisection on that bound, each step one
/// greedy pass, so O(L log) and no memory bound, for the joint search's
/// inner loop (`partitionStages` is the exact one with a budget). Needs
/// 1 <= stages <= seconds.size().
std::vector<int64_t> splitLayersByTime(llvm::ArrayRef<double> seconds,
                                       int64_t stages);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_STAGEPARTITION_H
