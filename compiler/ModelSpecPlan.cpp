//===- ModelSpecPlan.cpp - loomc --model-spec: plan by shape -----*- C++ -*-===//

#include "compiler/ModelSpecPlan.h"
#include "compiler/PlanSearch.h"
#include "frontend/ModelSpecModule.h"
#include "ir/ErrorKind.h"
#include "ir/LoomDialect.h"
#include "passes/Options.h"
#include "passes/planner/JointSearch.h"
#include "passes/planner/ModelSpec.h"
#include "passes/planner/NoFit.h"
#include "runtime/support/AtomicFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::planner;

namespace {

int fail(const llvm::Twine &message) {
  llvm::errs() << "loomc: error: " << message << "\n";
  return 1;
}

double gib(int64_t bytes) { return double(bytes) / (1 << 30); }

void printPlan(llvm::raw_ostream &os, const SearchRequest &r,
               const SearchResult &s, bool explain) {
  const RankedPlan &best = s.best;
  const CandidatePrediction &q = best.prediction;
  const StepBreakdown &t = q.time;
  const DeviceMemory &m = q.memory;
  double usable = r.cluster.usableMemoryBytes() / (1 << 30);
  bool billions = r.model.parameters >= 1000000000;
  os << "loomc: model spec " << r.model.name << "\n"
     << llvm::format("  parameters  %.2f%s (%s)\n",
                     double(r.model.parameters) / (billions ? 1e9 : 1e6),
                     billions ? "B" : "M", r.model.family.c_str())
     << "  cluster     " << r.cluster.spec << " ("
     << r.cluster.numDevices() << " x " << r.cluster.deviceName
     << llvm::format(", %.1f GiB usable)\n", usable)
     << "  plan        " << best.choice.text() << "\n"
     << llvm::format("  predicted   step %.3f s, %.1f TFLOP/s per device, "
                     "MFU %.1f%% (%s)\n",
                     q.stepSeconds, q.modelTflopsPerDevice, 100 * q.mfu,
                     r.cluster.predictionBasis().c_str())
     << llvm::format("  memory      %.2f GiB per device of %.1f GiB usable "
                     "(parameters %.2f, gradients %.2f, optimizer %.2f, "
                     "activations %.2f)\n",
                     gib(m.total()), usable, gib(m.parameters),
                     gib(m.gradients), gib(m.optimizerState),
                     gib(m.activations))
     << llvm::format("  time        compute %.3f s, recomputation %.3f s, "
                     "bubble %.3f s, tp %.3f s, stage transfers %.3f s, dp "
                     "%.3f s, optimizer %.3f s\n",
                     t.compute, t.recompute, t.bubble, t.tensorParallel,
                     t.pipelineTransfers, t.dataParallel, t.optimizer)
     << searchLine(s);
  if (explain)
    os << explainText(s);
}

/// The search of `spec` with `r`'s cluster, setup and pins, `r.model`
/// filled: a GPT shape is the model it describes
/// (frontend/ModelSpecModule.h), its training step read into the table as
/// an ONNX model's is; other shapes (LLaMA) by the closed forms of
/// ModelSpec.h.
llvm::Expected<SearchResult> searchSpec(SearchRequest &r, const GptSpec &spec,
                                        const ModelSpecOptions &o,
                                        mlir::loom::Precision precision,
                                        OptimizerKind optimizer) {
  DialectRegistry registry;
  registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = buildModelSpecModule(
      &ctx, spec, r.setup.globalBatch, /*constantValues=*/false);
  if (!module)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot build '" + spec.text + "'");
  CompilerPipelineOptions phases;
  phases.train.optimizer = optimizer;
  phases.train.momentum = o.momentum;
  phases.train.precision = precision;
  llvm::Expected<SearchedPlan> searched =
      searchTrainingPlan(*module, phases, r, spec.text);
  if (!searched)
    return searched.takeError();
  r.model = std::move(searched->model);
  r.model.family = spec.arch == Arch::Gpt ? "gpt" : "llama";
  return std::move(searched->result);
}

} // namespace

int mlir::loom::planModelSpec(const ModelSpecOptions &o) {
  SearchRequest r;
  llvm::Expected<GptSpec> spec = parseModelSpec(o.spec);
  if (!spec)
    return fail(llvm::toString(spec.takeError()));
  llvm::Expected<Cluster> cluster = parseCluster(o.cluster);
  if (!cluster)
    return fail(llvm::toString(cluster.takeError()));
  r.cluster = *cluster;
  if (o.globalBatch <= 0)
    return fail("--model-spec needs --global-batch: the samples of a step");
  r.setup.globalBatch = o.globalBatch;
  std::optional<mlir::loom::Precision> precision = parsePrecision(o.precision);
  if (!precision)
    return fail("unknown --precision '" + o.precision +
                "'; expected fp32 or bf16");
  r.setup.precision = *precision == mlir::loom::Precision::Bf16
                          ? planner::Precision::Bf16
                          : planner::Precision::Fp32;
  std::optional<OptimizerKind> optimizer = parseOptimizer(o.optimizer);
  if (!optimizer)
    return fail("unknown --optimizer '" + o.optimizer +
                "'; expected adamw or sgd");
  // AdamW keeps two moments a parameter, SGD one with momentum.
  r.setup.optimizerMoments =
      *optimizer == OptimizerKind::AdamW ? 2 : (o.momentum > 0 ? 1 : 0);
  llvm::Expected<ChoicePins> pins = parseChoicePins(o.force);
  if (!pins)
    return fail(llvm::toString(pins.takeError()));
  r.pins = *pins;
  if (!(o.searchSeconds > 0))
    return fail("--search-seconds must be positive");
  r.timeBudgetSeconds = o.searchSeconds;

  llvm::Expected<SearchResult> found = searchSpec(r, *spec, o, *precision,
                                                  *optimizer);
  if (!found) {
    bool noFit = false;
    std::string why = takeMessage(found.takeError(), noFit);
    if (noFit)
      recordErrorKind(ErrorKind::DoesNotFit);
    return fail(why);
  }
  if (!o.quiet)
    printPlan(llvm::outs(), r, *found, o.explain);
  if (o.summaryJson.empty())
    return 0;

  llvm::json::Object plan = rankedPlanJson(found->best);
  // The fields an ONNX model's summary has at the top (docs/loomc.md,
  // "Summary JSON"), from the search's prediction: one schema for both.
  const PlanChoice &c = found->best.choice;
  const CandidatePrediction &q = found->best.prediction;
  llvm::json::Object predicted{
      {"step_time_s", q.stepSeconds},
      {"basis", r.cluster.predictionBasisKey()},
      {"peak_memory_bytes_per_device",
       llvm::json::Array{q.memory.total()}},
      {"model_tflops_per_device", q.modelTflopsPerDevice},
      {"mfu", q.mfu},
      {"memory_breakdown_bytes_per_device",
       llvm::json::Object(
           *plan.getObject("memory_breakdown_bytes_per_device"))}};
  llvm::json::Object summary{
      {"model_spec", r.model.name},
      {"num_parameters", r.model.parameters},
      {"cluster", r.cluster.spec},
      {"world_size", r.cluster.numDevices()},
      {"device_memory_bytes", r.cluster.memoryBytes()},
      {"device_usable_memory_bytes", r.cluster.usableMemoryBytes()},
      {"global_batch", r.setup.globalBatch},
      {"planning_time_s", found->seconds},
      {"precision", o.precision},
      {"mesh", llvm::json::Object{{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}}},
      {"micro_batch", c.microBatchSize},
      {"num_micro_batches", c.microBatches},
      {"schedule",
       c.pp > 1 ? stringifySchedule(c.schedule).str() : std::string("none")},
      {"zero_stage", c.zero},
      {"remat", stringifyRemat(c.remat)},
      {"predicted", std::move(predicted)},
      {"plan", std::move(plan)}};
  addSearchJson(summary, *found);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(summary))) << "\n";
  if (auto s = ::loom::runtime::writeFileAtomically(o.summaryJson, text); !s)
    return fail(s.message());
  return 0;
}
