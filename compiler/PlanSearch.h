//===- PlanSearch.h - The default plan: search the trained step --*- C++ -*-===//
//
// `loomc MODEL.onnx --cluster C` without a pinned mesh: the imported model's
// training step is built once, turned into the planner's request
// (passes/ModelCostAnalysis.h) and searched over every choice the pins
// leave free (passes/planner/JointSearch.h); the driver then compiles the
// plan of the winner once. docs/loomc.md, "How loomc plans".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PLANSEARCH_H
#define LOOM_COMPILER_PLANSEARCH_H

#include "passes/Passes.h"
#include "passes/planner/JointSearch.h"
#include "passes/planner/ModelCost.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace mlir::loom {

/// The request's model and the search's answer.
struct SearchedPlan {
  planner::ModelCost model;
  planner::SearchResult result;
};

/// Builds the training step of a clone of `imported` with `phases` (raise
/// and train; `imported` is left as it is), analyses it and searches
/// `request` (its cluster, setup, pins and budget; its model is filled
/// here). Errors: a step the analysis cannot read, no valid choice, or none
/// that fits (the search's one-line refusal).
llvm::Expected<SearchedPlan> searchTrainingPlan(ModuleOp imported,
                                                const CompilerPipelineOptions &phases,
                                                planner::SearchRequest request,
                                                llvm::StringRef modelName);

/// The summary's line on what the search costed and how long it took.
std::string searchLine(const planner::SearchResult &result);

/// `--explain`'s lines: what binds the plan, why each choice won and the
/// best plan of the next meshes.
std::string explainText(const planner::SearchResult &result);

/// One plan of the search as the summary JSON writes it (`alternatives`).
llvm::json::Object rankedPlanJson(const planner::RankedPlan &plan);

/// The summary JSON's `binding_constraint`, `why`, `alternatives` and
/// `search` of `result`.
void addSearchJson(llvm::json::Object &summary,
                   const planner::SearchResult &result);

} // namespace mlir::loom

#endif // LOOM_COMPILER_PLANSEARCH_H
