//===- JointSearch.h - Every plan choice at once -----------------*- C++ -*-===//
//
// The joint search over the mesh (dp x tp x pp on the cluster's nodes, tp
// innermost), the micro-batch size, the pipeline schedule and its chunks,
// the ZeRO stage and activation recomputation: every valid combination is
// costed (CandidateCost.h) after meshes that cannot fit at their leanest
// are pruned, and the fastest that fits wins. Deterministic; a time budget
// keeps the best found so far. The model is a cost table (ModelCost.h), a
// model spec's or an imported model's alike. docs/planner.md, "Joint search".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_JOINTSEARCH_H
#define LOOM_PASSES_PLANNER_JOINTSEARCH_H

#include "passes/planner/CandidateCost.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlir::loom::planner {

struct SearchRequest {
  /// The model as the search costs it (a model spec's `modelCostOf`, or
  /// the training step's IR).
  ModelCost model;
  Cluster cluster;
  TrainingSetup setup;
  ChoicePins pins;
  /// Seconds the search may take; past them the best plan so far wins.
  double timeBudgetSeconds = 5;
  /// How many meshes `alternatives` lists.
  int64_t alternatives = 5;
};

struct RankedPlan {
  PlanChoice choice;
  CandidatePrediction prediction;
};

/// Why the winner chose what it did along one dimension.
struct ChoiceReason {
  std::string dimension; // mesh, micro-batch, schedule, zero, remat
  std::string text;
};

struct SearchResult {
  RankedPlan best;
  /// The fastest plan of each of the best meshes, the winner first.
  std::vector<RankedPlan> alternatives;
  /// What keeps the winner from being faster: `memory: ...`, the pins, or
  /// `none: ...`.
  std::string binding;
  std::vector<ChoiceReason> reasons;
  /// Choices costed, of them those that fit, meshes pruned by their memory
  /// lower bound; seconds spent; whether every choice was costed.
  int64_t candidates = 0, feasible = 0, prunedMeshes = 0;
  double seconds = 0;
  bool complete = true;
};

/// The fastest plan that fits. Errors, in one line: no valid choice (with
/// the pins, or for the batch), or none that fits — naming the least memory
/// a plan needs, its largest part, and the smallest cluster of the same
/// devices that would fit.
llvm::Expected<SearchResult> searchPlan(const SearchRequest &request);

/// Every valid choice for `request` (pins applied), in the search's order;
/// the unit tests compare the search with costing all of them.
std::vector<PlanChoice> enumerateChoices(const SearchRequest &request);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_JOINTSEARCH_H
