//===- CompilePlan.cpp - One compile of the imported model ----------------===//

#include "compiler/CompilePlan.h"
#include "compiler/PlanOutputs.h"
#include "compiler/StepProbes.h"
#include "emit/PlanEmitter.h"
#include "frontend/ModelSpecModule.h"
#include "frontend/OnnxImporter.h"
#include "ir/ErrorKind.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "passes/MemoryEstimate.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"
#include "passes/planner/PipelineSchedule.h"
#include "passes/planner/PlanChoice.h"
#include "runtime/support/Checksum.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loomc;

LogicalResult loomc::printModule(ModuleOp module, const std::string &path) {
  std::string error;
  auto out = openOutputFile(path.empty() ? "-" : path, &error);
  if (!out) {
    fail(error);
    return failure();
  }
  module.print(out->os());
  out->os() << "\n";
  out->keep();
  return success();
}

int loomc::compileOnce(const Options &o, const Checked &checked, const Model &model,
                const Target &target, const Attempt &attempt, bool quiet,
                Compiled &out) {
  OwningOpRef<ModuleOp> module = model.module.get().clone();
  MLIRContext *ctx = module->getContext();
  std::optional<ScopedDiagnosticHandler> silence;
  bool wasProbing = probing;
  if (quiet) {
    silence.emplace(ctx, [](Diagnostic &) { return success(); });
    probing = true;
  }
  llvm::scope_exit restore([&] { probing = wasProbing; });
  bool training = checked.training;
  int64_t zero = target.forced.zeroGiven ? target.forced.zero : attempt.zero;
  int64_t micro = attempt.micro;
  Forced forced = target.forced;
  CompilerPipelineOptions pipeline;
  setPhaseOptions(pipeline, o, checked);
  if (attempt.search) {
    const planner::PlanChoice &c = attempt.search->result.best.choice;
    pipeline.plan.searched = true; // the search weighed the memory
    forced.dp = c.dp;
    forced.tp = c.tp;
    forced.pp = c.pp;
    forced.virtualStages = c.chunks;
    forced.schedule = planner::stringifySchedule(c.schedule).str();
  }
  const Cluster &cluster = target.cluster;
  pipeline.plan.devices = cluster.numDevices();
  pipeline.plan.dp = forced.dp;
  pipeline.plan.tp = forced.tp;
  pipeline.plan.pp = forced.pp;
  // Pipeline stages without a micro-batch count: enough micro-batches to
  // keep the schedule's waits small (docs/loomc.md).
  if (training && forced.pp > 1 && forced.micro == 0 &&
      target.microBatch == 0 && micro == 1 && !model.hasBatchNorm &&
      !attempt.search) {
    int64_t dp = forced.dp > 0 ? forced.dp
                               : cluster.numDevices() / (forced.tp * forced.pp);
    if (std::optional<planner::ScheduleKind> kind =
            planner::parseSchedule(forced.schedule);
        kind && dp > 0 && model.globalBatch % dp == 0)
      micro = planner::defaultMicroBatches(*kind, forced.pp,
                                           model.globalBatch / dp,
                                           forced.virtualStages);
  }
  pipeline.plan.micro = forced.micro > 0 ? forced.micro : micro;
  pipeline.plan.schedule = forced.schedule;
  pipeline.plan.virtualStages = forced.virtualStages;
  pipeline.plan.microBatch = training ? target.microBatch : 0;
  pipeline.plan.cluster = target.clusterSpec;
  pipeline.plan.zero = zero;
  pipeline.plan.localBatchNorm = o.localBatchNorm.getValue();
  pipeline.plan.remat = forced.remat.empty() ? attempt.remat : forced.remat;
  pipeline.plan.memoryBudgetGib = attempt.rematBudgetGib;
  pipeline.plan.bucketBytes = checked.bucketBytes;
  pipeline.plan.blockBucketBytes =
      attempt.blockBuckets ? pipeline.plan.bucketBytes.getValue() : -1;
  PassManager pm(ctx);
  int64_t norms = 0, sequenceParallelNorms = 0;
  pm.addInstrumentation(
      std::make_unique<SequenceParallelProbe>(norms, sequenceParallelNorms));
  std::optional<MemoryEstimate> estimate;
  bool summarized = !quiet && !target.reference;
  if (summarized) {
    MemoryEstimateOptions e;
    e.remat = pipeline.plan.remat.getValue();
    e.cluster = pipeline.plan.cluster.getValue();
    e.memoryBudgetGib = pipeline.plan.memoryBudgetGib.getValue();
    e.bucketBytes = pipeline.plan.bucketBytes.getValue();
    e.blockBucketBytes = pipeline.plan.blockBucketBytes.getValue();
    pm.addInstrumentation(
        std::make_unique<MemoryEstimateProbe>(std::move(e), estimate));
  }
  buildLoomCompilerPipeline(pm, pipeline);
  if (failed(pm.run(*module))) {
    if (attempt.search && !quiet)
      llvm::errs() << "loomc: note: while compiling the searched plan, "
                   << attempt.search->result.best.choice.text()
                   << " (pin another with --force)\n";
    return 1;
  }
  if (o.emit == EmitKind::Raised || o.emit == EmitKind::Train ||
      o.emit == EmitKind::Planned || o.emit == EmitKind::Lowered) {
    out.printed = true;
    return failed(printModule(*module, o.outputFile)) ? 1 : 0;
  }

  // The decisions as the plan phase made them.
  if (shard::GridOp grid = lookupMesh(*module)) {
    out.dp = grid.getShape()[kDataAxis];
    if (auto m = grid->getAttrOfType<IntegerAttr>(
            LoomDialect::NumMicroBatchesAttrHelper::getNameStr()))
      out.numMicroBatches = m.getInt();
  }
  out.zero = zero;
  EmitOptions emitOptions;
  if (auto path = (*module)->getAttrOfType<StringAttr>("loom.model_path"))
    emitOptions.modelPath = path.str();
  emitOptions.producer = "loomc 0.1";
  emitOptions.storedWeights = !o.noWeights && !model.specModule;
  setTrainingSettings(emitOptions.training, *module, o, checked,
                      model.globalBatch, out.dp, out.numMicroBatches, zero);
  MemoryBreakdown memory;
  FailureOr<plan::Plan> plan = emitPlan(*module, emitOptions, &memory);
  if (failed(plan))
    return 1;
  if (!plan->model_path().empty()) {
    auto sum = ::loom::runtime::fileChecksum(plan->model_path());
    if (!sum)
      return fail(sum.status().message());
    plan->set_model_checksum(*sum);
  }
  if (o.verifyPlan && !target.reference) {
    ::loom::runtime::Status valid = ::loom::runtime::validatePlanFormat(
        *plan, o.outputFile.empty() ? std::string("plan") : o.outputFile.getValue());
    if (!valid) {
      recordErrorKind(ErrorKind::Internal);
      return fail("internal error: the emitted plan fails the runtime's "
                  "validation (" + valid.message() + "); please report it");
    }
  }
  out.figures = stepFigures(*module, *plan, memory, cluster, checked.precision);
  out.figures.norms = norms;
  out.figures.sequenceParallelNorms = sequenceParallelNorms;
  out.figures.remat = rematFiguresOf(*module);
  if (estimate)
    out.figures.estimatedBytes = estimate->peakBytes();
  if (summarized) {
    out.summary = summaryText(*plan, cluster, out.figures);
    out.summary += searchSummary(attempt, o.explain, cluster.numDevices());
    plan->set_summary(out.summary);
  }
  out.fit = planner::checkMemoryFit(
      out.figures.memory, static_cast<int64_t>(cluster.usableMemoryBytes()));
  out.plan = std::move(*plan);
  return 0;
}

std::optional<Model> loomc::importModel(MLIRContext *ctx, const Options &o,
                                 const Checked &checked, bool specModule) {
  Model model;
  model.specModule = specModule;
  OnnxImportOptions importOptions;
  if (checked.training && o.globalBatch > 0)
    importOptions.batchSize = o.globalBatch.getValue();
  if (failed(parseInputShapes(o.inputShapes, importOptions)))
    return std::nullopt;
  importOptions.allowMissingWeights = o.noWeights;
  importOptions.trainPattern = o.train;
  importOptions.freezePattern = o.freeze;
  if (specModule) {
    llvm::Expected<planner::GptSpec> spec =
        planner::parseModelSpec(o.modelSpec);
    if (!spec) {
      fail(llvm::toString(spec.takeError()));
      return std::nullopt;
    }
    model.module = buildModelSpecModule(ctx, *spec, o.globalBatch);
  } else {
    model.module = importOnnxFile(ctx, o.model, importOptions);
  }
  if (!model.module)
    return std::nullopt;
  model.hasBatchNorm =
      model.module->walk([](BatchNormOp) { return WalkResult::interrupt(); })
          .wasInterrupted();
  // Without --global-batch, the model's own static batch is the global one.
  model.globalBatch =
      o.globalBatch > 0 ? o.globalBatch : batchOf(*model.module);
  return model;
}

