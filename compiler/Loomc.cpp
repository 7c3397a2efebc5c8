//===- Loomc.cpp - The loomc compiler driver --------------------*- C++ -*-===//
//
// ONNX model + cluster + training options -> plan file and summaries:
// import, build the training step, plan the mesh, partition, emit.
//
//===----------------------------------------------------------------------===//

#include "compiler/Loomc.h"
#include "compiler/Beside.h"
#include "compiler/CompilePlan.h"
#include "compiler/LoomcOptions.h"
#include "compiler/ModelSpecPlan.h"
#include "compiler/PlanAttempts.h"
#include "frontend/OnnxImporter.h"
#include "ir/ErrorKind.h"
#include "ir/LoomDialect.h"
#include "passes/planner/Cluster.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <limits>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loomc;

namespace {

/// Imports the model once, plans it (the search, then the attempts that
/// make the compiled plan fit), checks it (--verify-plan) and writes it.
int run(Options &o) {
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
  std::optional<Checked> checked = checkOptions(o, specModule, false);
  if (!checked)
    return 1;
  bool training = checked->training;

  Target target;
  target.clusterSpec = clusterSpecOf(o);
  llvm::Expected<Cluster> cluster = parseCluster(target.clusterSpec);
  if (!cluster)
    return fail(llvm::toString(cluster.takeError()));
  target.cluster = *cluster;
  llvm::Expected<Forced> forced = parseForce(o.force);
  if (!forced)
    return fail(llvm::toString(forced.takeError()));
  target.forced = *forced;
  target.microBatch = o.microBatch;

  DialectRegistry registry;
  registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // Diagnostics name the op; printing whole functions helps nobody.
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &ctx);

  std::optional<Model> model = importModel(&ctx, o, *checked, specModule);
  if (!model)
    return 1;
  if (o.emit == EmitKind::Import)
    return failed(printModule(*model->module, o.outputFile)) ? 1 : 0;
  if (o.emit != EmitKind::Raised) {
    if (training && model->globalBatch <= 0)
      return fail("the model has no batch dimension to train over; give "
                  "--global-batch");
    if (cluster->numDevices() > std::numeric_limits<int32_t>::max())
      return fail("the cluster has " + std::to_string(cluster->numDevices()) +
                  " devices; at most 2147483647 are supported");
    if (!training && cluster->numDevices() != 1)
      return fail(
          "--forward-only plans run on one device; use --cluster cpu:1");
  }

  // The default plan: search every choice --force leaves free on the
  // training step, once; the attempts below start from its choice.
  Attempt attempt;
  if (training && !forced->meshGiven && cluster->numDevices() > 1 &&
      o.emit != EmitKind::Raised && o.emit != EmitKind::Train) {
    CompilerPipelineOptions phases;
    setPhaseOptions(phases, o, *checked);
    searchDefaultPlan(o, *model->module, phases, *cluster, *forced,
                      model->globalBatch, specModule ? o.modelSpec : o.model,
                      attempt);
  }
  // Compiled once with the chosen plan; one that does not fit the device
  // is compiled again with less memory (compiler/PlanAttempts.h).
  Compiled compiled;
  while (true) {
    compiled = Compiled();
    if (int rc = compileOnce(o, *checked, *model, target, attempt,
                             /*quiet=*/false, compiled))
      return rc;
    if (compiled.printed)
      return 0;
    if (compiled.fit.fits)
      break;
    FitState state{training,          model->hasBatchNorm,
                   compiled.dp,       compiled.zero,
                   compiled.numMicroBatches, model->globalBatch,
                   compiled.fit,      compiled.figures,
                   *cluster};
    std::variant<Attempt, std::string> next = nextAttempt(
        o, *forced, attempt, state, [&](const Attempt &a) {
          Compiled probe;
          int rc = compileOnce(o, *checked, *model, target, a,
                               /*quiet=*/true, probe);
          takeErrorKind(); // a probe's failure only rules its choice out
          return rc == 0 && probe.fit.fits
                     ? probe.figures.step.stepSeconds
                     : std::numeric_limits<double>::infinity();
        });
    if (auto *retry = std::get_if<Attempt>(&next)) {
      attempt = *retry;
      continue;
    }
    recordErrorKind(ErrorKind::DoesNotFit);
    return fail(std::get<std::string>(next));
  }

  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  int numRanks = 0;
  for (const plan::Program &prog : compiled.plan.programs())
    numRanks += prog.ranks_size();
  // loom-run reads binary ONNX only: a plan of a .onnxtext model (the lit
  // tests') is checked against the format alone. The reference is the same
  // imported model compiled for one device, unsplit.
  if (o.verifyPlan && training && numRanks > 1 &&
      !llvm::StringRef(o.model).ends_with(".onnxtext")) {
    std::optional<Checked> oneDevice = checkOptions(o, specModule, true);
    if (!oneDevice)
      return 1;
    Target single;
    single.clusterSpec = "cpu:1";
    single.cluster = cantFail(parseCluster(single.clusterSpec));
    single.reference = true;
    Attempt unsplit;
    unsplit.searched = true; // nothing to split
    Compiled reference;
    if (int rc = compileOnce(o, *oneDevice, *model, single, unsplit,
                             /*quiet=*/false, reference))
      return rc;
    if (int rc = runBeside(o, compiled.plan, reference.plan))
      return rc;
  }

  return writeOutputs(o, compiled.plan, *cluster, compiled.figures,
                      attempt.search ? &attempt.search->result : nullptr,
                      seconds, compiled.summary, training);
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
