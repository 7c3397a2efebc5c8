//===- PlanSearch.cpp - The default plan: search the trained step ---------===//

#include "compiler/PlanSearch.h"
#include "passes/ModelCostAnalysis.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::loom;

llvm::Expected<SearchedPlan>
mlir::loom::searchTrainingPlan(ModuleOp imported,
                               const CompilerPipelineOptions &phases,
                               planner::SearchRequest request,
                               llvm::StringRef modelName) {
  // The step is built on a clone, without a mesh: the plan is compiled from
  // the imported module once the search has chosen.
  OwningOpRef<ModuleOp> step = imported.clone();
  std::string firstError;
  ScopedDiagnosticHandler keep(imported.getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error && firstError.empty())
      firstError = d.str();
    return success();
  });
  auto error = [&](llvm::StringRef what) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        what + (firstError.empty() ? std::string() : ": " + firstError));
  };
  PassManager pm(imported.getContext());
  if (phases.raise)
    buildLoomRaisePipeline(pm);
  buildLoomTrainPipeline(pm, phases.train);
  if (failed(pm.run(*step)))
    return error("cannot build the training step to plan");
  FailureOr<planner::ModelCost> model = analyzeModelCost(*step, modelName);
  if (failed(model))
    return error("cannot read the training step's costs");
  request.model = *model;
  llvm::Expected<planner::SearchResult> result = planner::searchPlan(request);
  if (!result)
    return result.takeError();
  return SearchedPlan{std::move(*model), std::move(*result)};
}

std::string mlir::loom::searchLine(const planner::SearchResult &s) {
  return llvm::formatv("  search      {0} choices costed ({1} fit, {2} meshes "
                       "pruned) in {3:F3} s{4}\n",
                       s.candidates, s.feasible, s.prunedMeshes, s.seconds,
                       s.complete ? ""
                                  : " (time budget reached: the best so far)")
      .str();
}

std::string mlir::loom::explainText(const planner::SearchResult &s) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "  binding     " << s.binding << "\n"
     << "  dominant    " << s.best.prediction.time.dominant() << "\n";
  for (const planner::ChoiceReason &reason : s.reasons)
    os << "  why         " << reason.dimension << " " << reason.text << "\n";
  os << "  alternatives (the best plan of each mesh):\n";
  for (const planner::RankedPlan &p : s.alternatives)
    os << llvm::format("    %-62s step %9.3f s  MFU %5.1f%%  %6.2f GiB\n",
                       p.choice.text().c_str(), p.prediction.stepSeconds,
                       100 * p.prediction.mfu,
                       double(p.prediction.memory.total()) / (1 << 30));
  return text;
}

llvm::json::Object mlir::loom::rankedPlanJson(const planner::RankedPlan &p) {
  const planner::PlanChoice &c = p.choice;
  const planner::CandidatePrediction &q = p.prediction;
  const planner::StepBreakdown &t = q.time;
  const planner::DeviceMemory &m = q.memory;
  return llvm::json::Object{
      {"mesh", llvm::json::Object{{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}}},
      {"micro_batch", c.microBatchSize},
      {"num_micro_batches", c.microBatches},
      {"schedule",
       c.pp > 1 ? planner::stringifySchedule(c.schedule).str() : "none"},
      {"virtual", c.chunks},
      {"zero_stage", c.zero},
      {"remat", planner::stringifyRemat(c.remat)},
      {"step_time_s", q.stepSeconds},
      {"model_tflops_per_device", q.modelTflopsPerDevice},
      {"mfu", q.mfu},
      {"peak_memory_bytes_per_device", m.total()},
      {"memory_breakdown_bytes_per_device",
       llvm::json::Object{{"parameters", m.parameters},
                          {"gradients", m.gradients},
                          {"optimizer_state", m.optimizerState},
                          {"activations", m.activations},
                          {"workspace", m.workspace}}},
      {"time_breakdown_s",
       llvm::json::Object{{"compute", t.compute},
                          {"recompute", t.recompute},
                          {"pipeline_bubble", t.bubble},
                          {"tensor_parallel", t.tensorParallel},
                          {"pipeline_transfers", t.pipelineTransfers},
                          {"data_parallel_exposed", t.dataParallel},
                          {"optimizer", t.optimizer}}},
      {"dominant_cost", t.dominant()}};
}

void mlir::loom::addSearchJson(llvm::json::Object &summary,
                               const planner::SearchResult &s) {
  llvm::json::Array alternatives, reasons;
  for (const planner::RankedPlan &p : s.alternatives)
    alternatives.push_back(rankedPlanJson(p));
  for (const planner::ChoiceReason &reason : s.reasons)
    reasons.push_back(llvm::json::Object{{"choice", reason.dimension},
                                         {"why", reason.text}});
  summary["binding_constraint"] = s.binding;
  summary["why"] = std::move(reasons);
  summary["alternatives"] = std::move(alternatives);
  summary["search"] =
      llvm::json::Object{{"candidates", s.candidates},
                         {"feasible", s.feasible},
                         {"pruned_meshes", s.prunedMeshes},
                         {"complete", s.complete},
                         {"seconds", s.seconds},
                         {"chosen", rankedPlanJson(s.best)}};
}
