//===- CandidateCost.h - Step time and memory of one plan choice -*- C++ -*-===//
//
// The joint search's inner loop: for a model's cost table (ModelCost.h), a
// cluster and one set of plan choices (PlanChoice.h), the predicted step
// time, split into what it is spent on, and each device's memory, split by
// kind. Each layer's products, memory-bound bytes and collectives are costed
// from the table, so it costs microseconds; docs/planner.md, "Joint search",
// gives each term.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_CANDIDATECOST_H
#define LOOM_PASSES_PLANNER_CANDIDATECOST_H

#include "passes/planner/Cluster.h"
#include "passes/planner/CostModel.h"
#include "passes/planner/MemoryModel.h"
#include "passes/planner/ModelCost.h"
#include "passes/planner/PlanChoice.h"

#include <cstdint>

namespace mlir::loom::planner {

/// What the model trains with: its arithmetic and optimizer.
struct TrainingSetup {
  int64_t globalBatch = 1;
  Precision precision = Precision::Bf16;
  /// AdamW keeps two moments a parameter; SGD none (momentum: one).
  int64_t optimizerMoments = 2;
};

/// Seconds of one step, by where they go. The parts add up to the step.
struct StepBreakdown {
  /// The busiest pipeline device's forward and backward over all its
  /// micro-batches (matrix products, attention, memory-bound ops).
  double compute = 0;
  /// Forward work run again for the backward pass.
  double recompute = 0;
  /// The pipeline's idle time (its bubble), at the busiest device's pace.
  double bubble = 0;
  /// Tensor-parallel all-reduces (or all-gather + reduce-scatter under
  /// sequence parallelism) in each layer, forward and backward.
  double tensorParallel = 0;
  /// Activations and their gradients sent between stages.
  double pipelineTransfers = 0;
  /// Gradient reduction (and ZeRO's gathers) over dp not hidden behind the
  /// backward pass, and the tied embedding's gradient between stages.
  double dataParallel = 0;
  /// The optimizer's update of this device's parameters.
  double optimizer = 0;

  double total() const {
    return compute + recompute + bubble + tensorParallel + pipelineTransfers +
           dataParallel + optimizer;
  }
  /// The name of the largest part (`compute`, `pipeline bubble`, ...).
  llvm::StringRef dominant() const;
};

struct CandidatePrediction {
  StepBreakdown time;
  double stepSeconds = 0;
  /// Model FLOPs of a step (forward and backward, no recomputation) per
  /// second and device, and their share of the peak.
  double modelTflopsPerDevice = 0, mfu = 0;
  /// The device of most memory (the first pipeline stage's, or the last's
  /// when the head makes it larger).
  DeviceMemory memory;
  bool fits = false;
};

/// Whether `choice` is a plan at all for `model` on `devices` devices with
/// `setup`'s batch: the mesh uses every device, tp divides each of the
/// model's `tpDivides` and is at most its `maxTp`, pp is at most the layers
/// (pp x chunks divides them with interleaving), the micro-batches divide
/// each rank's share (one micro-batch for a model with batch statistics),
/// ZeRO needs dp > 1, a schedule needs pp > 1, interleaving a multiple of
/// pp micro-batches.
bool isValidChoice(const ModelCost &model, int64_t devices,
                   const TrainingSetup &setup, const PlanChoice &choice);

/// The step time and memory of `choice` (valid) for `model` on `cluster`.
CandidatePrediction predictCandidate(const ModelCost &model,
                                     const Cluster &cluster,
                                     const TrainingSetup &setup,
                                     const PlanChoice &choice);

/// Model FLOPs of one step (Megatron-LM's count: forward and backward, no
/// recomputation, attention not halved for causality).
double modelFlopsPerStep(const ModelCost &model, int64_t globalBatch);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_CANDIDATECOST_H
