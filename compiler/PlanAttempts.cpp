//===- PlanAttempts.cpp - What loomc compiles when a plan does not fit ----===//

#include "compiler/PlanAttempts.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loomc;

std::variant<Attempt, std::string>
loomc::nextAttempt(const Options &o, const Forced &forced,
                   const Attempt &attempt, const FitState &state,
                   llvm::function_ref<double(const Attempt &)> probe) {
  const planner::MemoryFit &fit = state.fit;
  const PlanFigures &figures = state.figures;
  bool training = state.training, hasBatchNorm = state.hasBatchNorm;
  int64_t dp = state.dp, zero = state.zero,
          numMicroBatches = state.numMicroBatches,
          globalBatch = state.globalBatch;
  bool rematAttempt = attempt.remat != "none";
  // Recomputation's budget: what the kernels' workspace leaves.
  double rematBudget = fit.capacityBytes - figures.memory.workspace;
  // First without the staging of overlapped reduce-scatters and gathers
  // (their collectives then wait where they are made).
  bool blockBuckets =
      llvm::any_of(figures.collectives, [](const planner::CollectiveRecord &c) {
        return c.bucket && c.kind != planner::CollectiveKind::AllReduce;
      });
  if (blockBuckets && attempt.blockBuckets && o.commBuckets == "auto") {
    Attempt next = attempt;
    next.blockBuckets = false;
    return next;
  }
  // The lowest ZeRO stage that fits, unless --force pins one.
  if (training && !rematAttempt && !forced.zeroGiven && dp > 1 && zero < 3) {
    Attempt next = attempt;
    next.zero = zero + 1;
    next.blockBuckets = true;
    return next;
  }
  // Then micro-batches, unless given: one micro-batch's activations at a
  // time (docs/auto-shard.md, "Micro-batches"), while doubling them takes
  // a tenth off the plan (the data and the state do not shrink).
  bool microFree = forced.micro == 0 && o.microBatch == 0 && !hasBatchNorm;
  int64_t share = dp > 0 ? globalBatch / dp : globalBatch;
  if (training && !rematAttempt && microFree &&
      share % (2 * numMicroBatches) == 0 &&
      (attempt.lastRequired == 0 ||
       fit.requiredBytes < 0.9 * attempt.lastRequired)) {
    Attempt next = attempt;
    next.zero = forced.zeroGiven ? forced.zero : 0;
    next.micro = 2 * numMicroBatches;
    next.blockBuckets = true;
    next.lastRequired = fit.requiredBytes;
    next.weighed = true;
    // Unless --force pins recomputation: the faster (by the predicted
    // step) of more micro-batches and the recomputation that fits now.
    if (forced.remat.empty() && !attempt.weighed && rematBudget > 0) {
      Attempt remat = attempt;
      remat.remat = "auto";
      remat.rematBudgetGib = rematBudget / (1024.0 * 1024 * 1024);
      remat.rematTries = 1;
      remat.weighed = true;
      if (probe(remat) < probe(next))
        return remat;
    }
    return next;
  }
  // Then recomputation, unless --force pins it: the cheapest that fits
  // what the kernels' workspace leaves, and again with less by what
  // the arena's placement took beyond the live bytes it planned for.
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  if (training && forced.remat.empty() && attempt.rematTries < 3) {
    Attempt next = attempt;
    next.remat = "auto";
    double budget = rematAttempt ? attempt.rematBudgetGib * kGiB -
                                       double(fit.shortfallBytes)
                                 : rematBudget;
    if (budget > 0) {
      next.rematBudgetGib = budget / kGiB;
      ++next.rematTries;
      return next;
    }
  }
  std::string withZero =
      zero > 0 ? " even with ZeRO stage " + std::to_string(zero) : "";
  auto also = [&](const std::string &what) {
    withZero += (withZero.empty() ? " even with " : " and ") + what;
  };
  if (numMicroBatches > 1)
    also(std::to_string(numMicroBatches) + " micro-batches");
  if (figures.remat.fullLayers > 0 || figures.remat.selectiveLayers > 0)
    also("recomputation (" + rematText(figures.remat) + ")");
  const planner::DeviceMemory &m = figures.memory;
  std::pair<int64_t, const char *> parts[] = {
      {m.parameters, "parameters"},
      {m.gradients, "gradients"},
      {m.optimizerState, "optimizer state"},
      {m.activations, "activations"},
      {m.workspace, "kernel workspace"}};
  auto largest = *std::max_element(
      std::begin(parts), std::end(parts),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  auto size = [&](double bytes) {
    if (bytes < 1024.0 * 1024)
      return llvm::formatv("{0:F1} KiB", bytes / 1024.0).str();
    return bytes < kGiB
               ? llvm::formatv("{0:F2} MiB", bytes / (1024.0 * 1024)).str()
               : llvm::formatv("{0:F2} GiB", bytes / kGiB).str();
  };
  return std::string("the plan needs ") + size(fit.requiredBytes) +
         " per device" + withZero + " but " + state.cluster.deviceName +
         " has " + size(fit.capacityBytes) +
         (state.cluster.reserveGiB > 0 ? " usable" : "") + " (" +
         size(fit.shortfallBytes) + " short; the most is " + largest.second +
         ", " + size(largest.first) + "); use more devices or a smaller batch";
}

void loomc::searchDefaultPlan(const Options &o, ModuleOp module,
                              const CompilerPipelineOptions &phases,
                              const Cluster &cluster, const Forced &forced,
                              int64_t globalBatch, llvm::StringRef name,
                              Attempt &attempt) {
  attempt.searched = true;
  planner::SearchRequest request;
  request.cluster = cluster;
  request.setup.globalBatch = globalBatch;
  request.setup.precision = phases.train.precision == Precision::Bf16
                                ? planner::Precision::Bf16
                                : planner::Precision::Fp32;
  request.setup.optimizerMoments =
      phases.train.optimizer == OptimizerKind::AdamW ? 2
                                                     : (o.momentum > 0 ? 1 : 0);
  request.pins = forced.pins;
  if (o.microBatch > 0)
    request.pins.microBatchSize = o.microBatch.getValue();
  request.timeBudgetSeconds = o.searchSeconds;
  llvm::Expected<SearchedPlan> found =
      searchTrainingPlan(module, phases, request, name);
  // Without a plan from the search (no valid choice or none that fits by
  // its estimate), the data-parallel plan and its attempts give the
  // compiler's own verdict.
  if (!found) {
    attempt.searchError = llvm::toString(found.takeError());
    return;
  }
  attempt.search = std::make_shared<SearchedPlan>(std::move(*found));
  const planner::PlanChoice &c = attempt.search->result.best.choice;
  attempt.micro = c.microBatches;
  attempt.zero = c.zero;
  attempt.remat = planner::stringifyRemat(c.remat).str();
}

std::string loomc::searchSummary(const Attempt &attempt, bool explain,
                                 int64_t devices) {
  std::string text;
  if (attempt.search) {
    const planner::SearchResult &r = attempt.search->result;
    text +=
        searchLine(r) +
        llvm::formatv("  chosen      {0}, {1:F3} ms a step by the "
                      "search's model\n",
                      r.best.choice.text(), 1e3 * r.best.prediction.stepSeconds)
            .str();
    if (explain)
      text += explainText(r);
  } else if (!attempt.searchError.empty()) {
    text += "  search      none chosen (" + attempt.searchError +
            "); planned data-parallel\n";
  } else if (explain) {
    text += devices == 1 ? "  search      none: one device, nothing to split\n"
                         : "  search      none: --force pins the mesh\n";
  }
  return text;
}
