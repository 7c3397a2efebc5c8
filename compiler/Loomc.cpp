//===- Loomc.cpp - The loomc compiler driver --------------------*- C++ -*-===//
//
// ONNX model + cluster + training options -> plan file and summaries:
// import, build the training step, plan the mesh, partition, emit.
//
//===----------------------------------------------------------------------===//

#include "compiler/Loomc.h"
#include "compiler/Beside.h"
#include "compiler/LoomcOptions.h"
#include "compiler/ModelSpecPlan.h"
#include "compiler/PlanOutputs.h"
#include "compiler/PlanAttempts.h"
#include "compiler/PlanSearch.h"
#include "compiler/StepProbes.h"
#include "compiler/Summary.h"
#include "emit/PlanEmitter.h"
#include "frontend/ModelSpecModule.h"
#include "frontend/OnnxImporter.h"
#include "ir/ErrorKind.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "passes/MemoryEstimate.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/PipelineSchedule.h"
#include "passes/planner/PlanChoice.h"
#include "runtime/PlanFormat.h"
#include "runtime/support/Checksum.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loomc;

namespace {

LogicalResult printModule(ModuleOp module, const std::string &path) {
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

int run(Options &o, Attempt attempt = {}, plan::Plan *planOut = nullptr);

/// The predicted step time of the plan `attempt` compiles, when it fits
/// (infinity otherwise); nothing is written or printed.
double probe(Options &o, Attempt attempt) {
  double seconds = std::numeric_limits<double>::infinity();
  attempt.stepSeconds = &seconds;
  plan::Plan plan;
  bool wasProbing = probing;
  probing = true;
  int rc = run(o, attempt, &plan);
  probing = wasProbing;
  takeErrorKind(); // a probe's failure only rules its choice out
  return rc == 0 ? seconds : std::numeric_limits<double>::infinity();
}

/// The one-device plan of the model `o` compiles (for --verify-plan).
int compileReference(Options &o, plan::Plan &reference) {
  std::string cluster = o.cluster, force = o.force,
              calibration = o.calibration;
  int64_t microBatch = o.microBatch;
  o.cluster = "cpu:1";
  o.calibration = "";
  o.force = "";
  o.microBatch = 0;
  o.verifyPlan = false;
  Attempt oneDevice;
  oneDevice.searched = true; // nothing to split
  int rc = run(o, oneDevice, &reference);
  o.cluster = cluster;
  o.calibration = calibration;
  o.force = force;
  o.microBatch = microBatch;
  o.verifyPlan = true;
  return rc;
}

/// Compiles the model once with `attempt`'s choices (a plan that does not
/// fit retries the next). With `planOut` the plan goes there and nothing is
/// written or printed.
int run(Options &o, Attempt attempt, plan::Plan *planOut) {
  int64_t zero = attempt.zero, micro = attempt.micro;
  auto start = std::chrono::steady_clock::now();
  if (o.listOps) {
    llvm::outs() << listSupportedOnnxOps();
    return 0;
  }
  if (!o.modelSpec.empty() && !o.model.empty())
    return fail("give a model file or --model-spec, not both");
  if (!o.modelSpec.empty() && o.sbatchElastic)
    return fail("--sbatch-elastic runs loom-elastic, which plans a model "
                "file; give -o PLAN for a --model-spec job");
  // A model spec asked for a plan or IR is built as the model it describes
  // (frontend/ModelSpecModule.h) and compiled below like an ONNX model
  // without weights; planning alone prints the search's plan
  // (compiler/ModelSpecPlan.h).
  bool specModule = !o.modelSpec.empty() &&
                    ((!o.outputFile.empty() && !o.planOnly) || o.dumpPlan ||
                     o.emit != EmitKind::Plan || !o.emitSbatch.empty());
  if (!o.modelSpec.empty() && !specModule)
    return planModelSpec(modelSpecOptions(o));
  std::optional<Checked> checked = checkOptions(o, specModule, planOut != nullptr);
  if (!checked)
    return 1;
  bool training = checked->training, wantsPlan = checked->wantsPlan;
  std::optional<Precision> precision = checked->precision;
  std::optional<OptimizerKind> optimizer = checked->optimizer;

  std::string clusterSpec = clusterSpecOf(o);
  llvm::Expected<Cluster> cluster = parseCluster(clusterSpec);
  if (!cluster)
    return fail(llvm::toString(cluster.takeError()));
  llvm::Expected<Forced> forced = parseForce(o.force);
  if (!forced)
    return fail(llvm::toString(forced.takeError()));
  if (forced->zeroGiven)
    zero = forced->zero;

  DialectRegistry registry;
  registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // Diagnostics name the op; printing whole functions helps nobody.
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  // A probe's errors only rule its choice out: they are not printed.
  std::optional<SourceMgrDiagnosticHandler> diagHandler;
  std::optional<ScopedDiagnosticHandler> quietHandler;
  if (probing)
    quietHandler.emplace(&ctx, [](Diagnostic &) { return success(); });
  else
    diagHandler.emplace(sourceMgr, &ctx);

  OnnxImportOptions importOptions;
  if (training && o.globalBatch > 0)
    importOptions.batchSize = o.globalBatch.getValue();
  if (failed(parseInputShapes(o.inputShapes, importOptions)))
    return 1;
  importOptions.allowMissingWeights = o.noWeights;
  importOptions.trainPattern = o.train;
  importOptions.freezePattern = o.freeze;
  OwningOpRef<ModuleOp> module;
  if (specModule) {
    llvm::Expected<planner::GptSpec> spec =
        planner::parseModelSpec(o.modelSpec);
    if (!spec)
      return fail(llvm::toString(spec.takeError()));
    module = buildModelSpecModule(&ctx, *spec, o.globalBatch);
  } else {
    module = importOnnxFile(&ctx, o.model, importOptions);
  }
  if (!module)
    return 1;
  // Batch norms take the whole batch's statistics: no micro-batches.
  bool hasBatchNorm =
      module->walk([](BatchNormOp) { return WalkResult::interrupt(); })
          .wasInterrupted();
  if (o.emit == EmitKind::Import)
    return failed(printModule(*module, o.outputFile)) ? 1 : 0;

  // Without --global-batch, the model's own static batch is the global one.
  int64_t globalBatch = o.globalBatch > 0 ? o.globalBatch : batchOf(*module);
  if (o.emit != EmitKind::Raised) {
    if (training && globalBatch <= 0)
      return fail("the model has no batch dimension to train over; give "
                  "--global-batch");
    if (cluster->numDevices() > std::numeric_limits<int32_t>::max())
      return fail("the cluster has " + std::to_string(cluster->numDevices()) +
                  " devices; at most 2147483647 are supported");
    if (!training && cluster->numDevices() != 1)
      return fail(
          "--forward-only plans run on one device; use --cluster cpu:1");
  }

  // One pipeline: raise (GELU, norms, linear layers, attention), train,
  // plan, lower, up to the phase --emit asks for.
  CompilerPipelineOptions pipeline;
  setPhaseOptions(pipeline, o, *checked);
  // The default plan: search every choice --force leaves free on the
  // training step, once; the attempts below start from its choice.
  if (!attempt.searched && training && !forced->meshGiven &&
      cluster->numDevices() > 1 && o.emit != EmitKind::Raised &&
      o.emit != EmitKind::Train) {
    searchDefaultPlan(o, *module, pipeline, *cluster, *forced, globalBatch,
                      specModule ? o.modelSpec : o.model, attempt);
    micro = attempt.micro;
    zero = attempt.zero;
  }
  if (attempt.search) {
    const planner::PlanChoice &c = attempt.search->result.best.choice;
    pipeline.plan.searched = true; // the search weighed the memory
    forced->dp = c.dp;
    forced->tp = c.tp;
    forced->pp = c.pp;
    forced->virtualStages = c.chunks;
    forced->schedule = planner::stringifySchedule(c.schedule).str();
  }
  pipeline.plan.devices = cluster->numDevices();
  pipeline.plan.dp = forced->dp;
  pipeline.plan.tp = forced->tp;
  pipeline.plan.pp = forced->pp;
  // Pipeline stages without a micro-batch count: enough micro-batches to
  // keep the schedule's waits small (docs/loomc.md).
  if (training && forced->pp > 1 && forced->micro == 0 &&
      o.microBatch == 0 && micro == 1 && !hasBatchNorm && !attempt.search) {
    int64_t dp = forced->dp > 0
                     ? forced->dp
                     : cluster->numDevices() / (forced->tp * forced->pp);
    if (std::optional<planner::ScheduleKind> kind =
            planner::parseSchedule(forced->schedule);
        kind && dp > 0 && globalBatch % dp == 0)
      micro = planner::defaultMicroBatches(*kind, forced->pp,
                                           globalBatch / dp,
                                           forced->virtualStages);
  }
  pipeline.plan.micro = forced->micro > 0 ? forced->micro : micro;
  pipeline.plan.schedule = forced->schedule;
  pipeline.plan.virtualStages = forced->virtualStages;
  pipeline.plan.microBatch = training ? o.microBatch.getValue() : 0;
  pipeline.plan.cluster = clusterSpec;
  pipeline.plan.zero = zero;
  pipeline.plan.localBatchNorm = o.localBatchNorm;
  pipeline.plan.remat = forced->remat.empty() ? attempt.remat : forced->remat;
  pipeline.plan.memoryBudgetGib = attempt.rematBudgetGib;
  pipeline.plan.bucketBytes = checked->bucketBytes;
  pipeline.plan.blockBucketBytes =
      attempt.blockBuckets ? pipeline.plan.bucketBytes.getValue() : -1;
  PassManager pm(&ctx);
  int64_t norms = 0, sequenceParallelNorms = 0;
  pm.addInstrumentation(
      std::make_unique<SequenceParallelProbe>(norms, sequenceParallelNorms));
  std::optional<MemoryEstimate> estimate;
  // Not for a plan compiled only to be compared or checked against
  // (`planOut`), which prints no summary.
  if (!planOut) {
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
    if (attempt.search && !probing)
      llvm::errs() << "loomc: note: while compiling the searched plan, "
                   << attempt.search->result.best.choice.text()
                   << " (pin another with --force)\n";
    return 1;
  }
  if (o.emit == EmitKind::Raised || o.emit == EmitKind::Train ||
      o.emit == EmitKind::Planned)
    return failed(printModule(*module, o.outputFile)) ? 1 : 0;

  // The decisions as the plan phase made them.
  int64_t dp = 1, numMicroBatches = 1;
  if (shard::GridOp grid = lookupMesh(*module)) {
    dp = grid.getShape()[kDataAxis];
    if (auto m = grid->getAttrOfType<IntegerAttr>(
            LoomDialect::NumMicroBatchesAttrHelper::getNameStr()))
      numMicroBatches = m.getInt();
  }
  if (o.emit == EmitKind::Lowered)
    return failed(printModule(*module, o.outputFile)) ? 1 : 0;

  EmitOptions emitOptions;
  if (auto path = (*module)->getAttrOfType<StringAttr>("loom.model_path"))
    emitOptions.modelPath = path.str();
  emitOptions.producer = "loomc 0.1";
  emitOptions.storedWeights = !o.noWeights && !specModule;
  setTrainingSettings(emitOptions.training, *module, o, *checked,
                      globalBatch, dp, numMicroBatches, zero);

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
  if (o.verifyPlan) {
    ::loom::runtime::Status valid = ::loom::runtime::validatePlanFormat(
        *plan, o.outputFile.empty() ? std::string("plan") : o.outputFile.getValue());
    if (!valid) {
      recordErrorKind(ErrorKind::Internal);
      return fail("internal error: the emitted plan fails the runtime's "
                  "validation (" + valid.message() + "); please report it");
    }
  }
  PlanFigures figures = stepFigures(*module, *plan, memory, *cluster,
                                    *precision);
  figures.norms = norms;
  figures.sequenceParallelNorms = sequenceParallelNorms;
  figures.remat = rematFiguresOf(*module);
  if (estimate)
    figures.estimatedBytes = estimate->peakBytes();
  std::string summary = summaryText(*plan, *cluster, figures);
  summary += searchSummary(attempt, o.explain, cluster->numDevices());
  plan->set_summary(summary);

  planner::MemoryFit fit = planner::checkMemoryFit(
      figures.memory, static_cast<int64_t>(cluster->usableMemoryBytes()));
  if (!fit.fits) {
    FitState state{training, hasBatchNorm, dp, zero, numMicroBatches,
                   globalBatch, fit, figures, *cluster};
    std::variant<Attempt, std::string> next = nextAttempt(
        o, *forced, attempt, state,
        [&](const Attempt &a) { return probe(o, a); });
    if (auto *retry = std::get_if<Attempt>(&next))
      return run(o, *retry, planOut);
    recordErrorKind(ErrorKind::DoesNotFit);
    return fail(std::get<std::string>(next));
  }

  if (planOut) {
    if (attempt.stepSeconds)
      *attempt.stepSeconds = figures.step.stepSeconds;
    *planOut = std::move(*plan);
    return 0;
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  int numRanks = 0;
  for (const plan::Program &prog : plan->programs())
    numRanks += prog.ranks_size();
  // loom-run reads binary ONNX only: a plan of a .onnxtext model (the lit
  // tests') is checked against the format alone.
  if (o.verifyPlan && training && numRanks > 1 &&
      !llvm::StringRef(o.model).ends_with(".onnxtext")) {
    plan::Plan reference;
    if (int rc = compileReference(o, reference))
      return rc;
    if (int rc = runBeside(o, *plan, reference))
      return rc;
  }

  return writeOutputs(o, *plan, *cluster, figures,
                      attempt.search ? &attempt.search->result : nullptr,
                      seconds, summary, training);
}

} // namespace

int mlir::loom::loomcMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (std::optional<std::string> bad = badNumberOption(argc, argv))
    return fail(*bad);
  Options options;
  cl::HideUnrelatedOptions(options.cat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "loomc - compile an ONNX model into a distributed training plan\n\n"
      "  loomc MODEL.onnx --cluster cpu:4 --global-batch 64 --loss "
      "cross_entropy --optimizer adamw --lr 1e-3 -o model.loomplan\n\n"
      "See docs/loomc.md.\n\n"
      "Exit codes: 0 success, 1 bad input (a file, option, shape or value),\n"
      "2 a model Loom does not support yet, 3 no plan fits the memory, 4 an\n"
      "internal error.\n");
  // The exit code says what kind of failure it was (docs/loomc.md).
  return run(options) == 0 ? 0 : static_cast<int>(takeErrorKind());
}
