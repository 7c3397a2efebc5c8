//===- Loomc.cpp - The loomc compiler driver --------------------*- C++ -*-===//
//
// ONNX model + cluster + training options -> plan file and summaries:
// import, build the training step, plan the mesh, partition, emit.
//
//===----------------------------------------------------------------------===//

#include "compiler/Loomc.h"
#include "compiler/ModelSpecPlan.h"
#include "compiler/PlanCost.h"
#include "compiler/PlanSearch.h"
#include "compiler/Sbatch.h"
#include "compiler/Summary.h"
#include "emit/PlanEmitter.h"
#include "frontend/ModelSpecModule.h"
#include "frontend/OnnxImporter.h"
#include "ir/EntryFunction.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "passes/MemoryEstimate.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"
#include "passes/RecomputePlan.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/PipelineSchedule.h"
#include "passes/planner/PlanChoice.h"
#include "runtime/PlanFormat.h"
#include "runtime/Workspace.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Checksum.h"
#include "runtime/driver/Verify.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/text_format.h>

#include <array>
#include <chrono>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::loom;
namespace cl = llvm::cl;

namespace {

enum class EmitKind { Plan, Import, Raised, Train, Planned, Lowered };

struct Options {
  cl::OptionCategory cat{"loomc options"};
  cl::opt<std::string> model{cl::Positional, cl::desc("<model.onnx | model.onnxtext>"),
                             cl::cat(cat)};
  cl::opt<std::string> modelSpec{
      "model-spec",
      cl::desc("plan a transformer given by its shape instead of a model "
               "file: gpt:l=LAYERS,h=HIDDEN,a=HEADS,s=SEQ,v=VOCAB[,ffn=N,"
               "kv_heads=N,arch=gpt|llama]; the joint search chooses dp, tp, "
               "pp, micro-batches, schedule, ZeRO and recomputation and "
               "prints the plan (no plan file)"),
      cl::value_desc("SPEC"), cl::cat(cat)};
  cl::opt<bool> explain{
      "explain",
      cl::desc("also print what binds the searched plan, why each choice "
               "won and the best plan of the next meshes"),
      cl::cat(cat)};
  cl::opt<double> searchSeconds{
      "search-seconds", cl::init(5),
      cl::desc("the time budget of the plan search (default 5); past it the "
               "best plan found so far wins"),
      cl::cat(cat)};
  cl::opt<std::string> cluster{"cluster", cl::init("cpu:1"),
                               cl::desc("cluster: cpu:N, a100-80g:NxG, h100:NxG, "
                                        "h200:NxG or a JSON file"),
                               cl::cat(cat)};
  cl::opt<std::string> calibration{
      "calibration",
      cl::desc("replace the cluster's datasheet figures with what loom-run "
               "--profile measured on this machine (product rate and its "
               "fall-off with size, memory bandwidth, the all-reduce between "
               "a node's ranks)"),
      cl::value_desc("FILE.json"), cl::cat(cat)};
  cl::opt<int64_t> globalBatch{"global-batch", cl::init(0),
                               cl::desc("samples per training step (all ranks)"),
                               cl::cat(cat)};
  cl::opt<int64_t> microBatch{"micro-batch", cl::init(0),
                              cl::desc("samples per rank per micro-batch "
                                       "(default: global batch / dp)"),
                              cl::cat(cat)};
  cl::opt<std::string> loss{"loss", cl::init("cross_entropy"),
                            cl::desc("cross_entropy | mse | output:NAME"),
                            cl::cat(cat)};
  cl::opt<std::string> output{"output", cl::init(""),
                              cl::desc("graph output the loss applies to "
                                       "(default: the first)"),
                              cl::cat(cat)};
  cl::opt<std::string> optimizer{"optimizer", cl::init("adamw"),
                                 cl::desc("adamw | sgd"), cl::cat(cat)};
  cl::opt<double> lr{"lr", cl::init(1e-3), cl::desc("learning rate"),
                     cl::cat(cat)};
  cl::opt<double> weightDecay{"weight-decay", cl::init(-1),
                              cl::desc("weight decay (default 0.01 for adamw, "
                                       "0 for sgd)"),
                              cl::cat(cat)};
  cl::opt<double> momentum{"momentum", cl::init(0), cl::desc("SGD momentum"),
                           cl::cat(cat)};
  cl::opt<std::string> precision{"precision", cl::init("fp32"),
                                 cl::desc("fp32 | bf16 (bf16 activations, f32 "
                                          "master weights and optimizer)"),
                                 cl::cat(cat)};
  cl::opt<std::string> commBuckets{
      "comm-buckets", cl::init("auto"),
      cl::desc("run the step's collectives in buckets, each started as soon "
               "as its tensors are made and overlapped with the ops after it: "
               "the gradients' all-reduces, and ZeRO's and sequence "
               "parallelism's reduce-scatters and all-gathers (ZeRO-3's "
               "parameter gathers prefetched); auto (sized by the cluster's "
               "link; the reduce-scatter and all-gather buckets are left out "
               "when their staging would not fit), off (each collective "
               "waited for at once), or the bucket size in MiB"),
      cl::cat(cat)};
  cl::opt<bool> localBatchNorm{
      "local-batchnorm",
      cl::desc("under data parallelism, normalise each rank's block of the "
               "batch with its own batch-norm statistics (PyTorch DDP without "
               "SyncBatchNorm); by default the statistics are the global "
               "batch's, so N ranks compute what one does"),
      cl::cat(cat)};
  cl::opt<std::string> train{
      "train", cl::init(""),
      cl::desc("train the float initializers whose whole name matches this "
               "regular expression, whatever the defaults say (wins over "
               "--freeze)"),
      cl::value_desc("REGEX"), cl::cat(cat)};
  cl::opt<std::string> freeze{
      "freeze", cl::init(""),
      cl::desc("keep the float initializers whose whole name matches this "
               "regular expression constant (not trained)"),
      cl::value_desc("REGEX"), cl::cat(cat)};
  cl::opt<std::string> force{"force", cl::init(""),
                             cl::desc("force plan choices: dp=N,tp=N,pp=N,micro=N,"
                                      "zero=N,remat=none|selective|full|auto,schedule=gpipe|1f1b|"
                                      "interleaved|zb-h1,virtual=N (tp: the "
                                      "mesh's tensor-parallel degree, "
                                      "loom-auto-shard splits the ops; pp: "
                                      "pipeline stages run by the schedule, "
                                      "with virtual chunks a device for "
                                      "interleaved; micro: "
                                      "micro-batches a step accumulates "
                                      "gradients over (with pp, by default "
                                      "enough to keep the schedule's waits "
                                      "small); zero: the "
                                      "ZeRO stage 0-3, by default the lowest "
                                      "that fits; remat: activation "
                                      "recomputation, by default none unless "
                                      "the plan does not fit, then auto: the "
                                      "least recomputation that fits)"),
                             cl::cat(cat)};
  cl::opt<std::string> outputFile{"o", cl::desc("plan file to write"),
                                  cl::value_desc("PLAN"), cl::cat(cat)};
  cl::opt<std::string> summaryJson{"summary-json",
                                   cl::desc("write the machine summary here"),
                                   cl::value_desc("FILE"), cl::cat(cat)};
  cl::opt<std::string> emitSbatch{
      "emit-sbatch",
      cl::desc("write a Slurm batch script that runs the plan of -o with "
               "srun (nodes, tasks and GPUs per node from --cluster, "
               "--requeue); its arguments are loom-run's (docs/elastic.md)"),
      cl::value_desc("FILE"), cl::cat(cat)};
  cl::opt<bool> sbatchElastic{
      "sbatch-elastic",
      cl::desc("with --emit-sbatch: the script runs loom-elastic on the "
               "allocation instead, which plans for the devices it gets and "
               "re-plans when one is lost"),
      cl::cat(cat)};
  cl::opt<std::string> report{"report", cl::desc("HTML report - not available yet"),
                              cl::value_desc("FILE.html"), cl::cat(cat)};
  cl::opt<EmitKind> emit{
      "emit", cl::init(EmitKind::Plan), cl::desc("what to write"),
      cl::values(clEnumValN(EmitKind::Plan, "plan", "the plan (default)"),
                 clEnumValN(EmitKind::Import, "mlir-import", "imported forward IR"),
                 clEnumValN(EmitKind::Raised, "mlir-raised",
                            "forward IR after recognising fused ops"),
                 clEnumValN(EmitKind::Train, "mlir-train", "training-step IR"),
                 clEnumValN(EmitKind::Planned, "mlir-planned", "IR with the plan annotated"),
                 clEnumValN(EmitKind::Lowered, "mlir-lowered", "one rank's IR")),
      cl::cat(cat)};
  cl::opt<bool> dumpPlan{"dump-plan",
                         cl::desc("print the plan as protobuf text to stdout"),
                         cl::cat(cat)};
  cl::opt<bool> planOnly{"plan-only",
                         cl::desc("plan and summarise without writing a plan file"),
                         cl::cat(cat)};
  cl::opt<bool> forwardOnly{"forward-only",
                            cl::desc("compile the forward pass only (for "
                                     "loom-run --forward)"),
                            cl::cat(cat)};
  cl::list<std::string> inputShapes{"input-shape",
                                    cl::desc("static shape of a graph input: "
                                             "NAME=D0xD1x..."),
                                    cl::cat(cat)};
  cl::opt<bool> verifyPlan{"verify-plan",
                           cl::desc("before writing the plan, check it against "
                                    "the plan format and, for a training plan "
                                    "of several ranks, train 2 steps of it on "
                                    "CPU threads beside the one-device "
                                    "program: the losses must agree (1e-5 "
                                    "relative, 1e-3 in bf16)"),
                           cl::cat(cat)};
  cl::opt<bool> noRaise{"no-raise",
                        cl::desc("keep the imported ops as they are (no fused "
                                 "GELU, norms, linear layers, attention)"),
                        cl::cat(cat)};
  cl::opt<bool> noWeights{
      "no-weights",
      cl::desc("plan without reading parameter values: external data files "
               "of float initializers may be missing; the plan stores no "
               "weights and loom-run fills them with --init random:SEED"),
      cl::cat(cat)};
  cl::opt<bool> listOps{"list-ops", cl::desc("list the supported ONNX ops and exit"),
                        cl::cat(cat)};
  cl::opt<bool> quiet{"quiet", cl::desc("do not print the summary"),
                      cl::cat(cat)};
};

/// Forced plan choices from `--force`.
struct Forced {
  int64_t dp = 0, tp = 1, pp = 1, micro = 0, zero = 0, virtualStages = 1;
  bool zeroGiven = false; // else the lowest stage that fits
  std::string remat, schedule = "1f1b"; // remat "": none, auto when it must
  /// The pins as given; whether they pin the mesh (dp, tp or pp given: the
  /// others default to 1, dp to the rest of the devices).
  planner::ChoicePins pins;
  bool meshGiven = false;
};

/// Whether errors are kept quiet: while loomc tries a plan only to compare
/// it with another.
bool probing = false;

int fail(const llvm::Twine &message) {
  if (!probing)
    llvm::errs() << "loomc: error: " << message << "\n";
  return 1;
}

llvm::Expected<Forced> parseForce(llvm::StringRef text) {
  llvm::Expected<planner::ChoicePins> pins = planner::parseChoicePins(text);
  if (!pins)
    return pins.takeError();
  Forced f;
  f.pins = *pins;
  f.meshGiven = pins->dp || pins->tp || pins->pp;
  f.dp = pins->dp.value_or(0);
  f.tp = pins->tp.value_or(1);
  f.pp = pins->pp.value_or(1);
  f.micro = pins->micro.value_or(0);
  f.virtualStages = pins->chunks.value_or(1);
  f.zeroGiven = pins->zero.has_value();
  f.zero = pins->zero.value_or(0);
  f.remat = pins->remat.value_or("");
  if (pins->schedule)
    f.schedule = planner::stringifySchedule(*pins->schedule).str();
  // A schedule orders pipeline stages: without them there is none.
  if (f.pp == 1 && (f.schedule != "1f1b" || f.virtualStages != 1))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "bad --force: schedule and virtual order pipeline stages; give pp=N "
        "(N > 1) with them");
  return f;
}

LogicalResult parseInputShapes(const cl::list<std::string> &items,
                               OnnxImportOptions &options) {
  for (const std::string &item : items) {
    auto [name, dims] = llvm::StringRef(item).split('=');
    llvm::SmallVector<llvm::StringRef> parts;
    dims.split(parts, 'x', -1, false);
    SmallVector<int64_t> shape;
    // `NAME=` (no dimensions) is a scalar.
    for (llvm::StringRef p : parts) {
      int64_t d;
      if (p.getAsInteger(10, d) || d < 0) {
        fail("bad --input-shape '" + item + "': expected NAME=D0xD1x... with "
             "non-negative dimensions");
        return failure();
      }
      shape.push_back(d);
    }
    if (name.empty() || !llvm::StringRef(item).contains('=')) {
      fail("bad --input-shape '" + item + "': expected NAME=D0xD1x...");
      return failure();
    }
    options.inputShapes[name] = shape;
  }
  return success();
}

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

/// Counts the forward's norms, and those split along the tokens over tp
/// (sequence parallelism), as the plan annotates them just before
/// partition makes the step local (the summary reports it).
class SequenceParallelProbe : public PassInstrumentation {
public:
  SequenceParallelProbe(int64_t &norms, int64_t &split)
      : norms(norms), split(split) {}

  void runBeforePass(Pass *pass, Operation *op) override {
    auto func = dyn_cast<func::FuncOp>(op);
    if (pass->getArgument() != "shard-partition" || !func ||
        func.getNumResults() == 0 || !func.getResultAttr(0, "loom.loss"))
      return;
    Operation *loss =
        func.getBody().front().getTerminator()->getOperand(0).getDefiningOp();
    func.walk([&](Operation *norm) {
      int64_t axis;
      if (auto ln = dyn_cast<LayerNormOp>(norm))
        axis = ln.getAxis();
      else if (auto rms = dyn_cast<RmsNormOp>(norm))
        axis = rms.getAxis();
      else
        return;
      if (!loss || !norm->isBeforeInBlock(loss))
        return;
      ++norms;
      FailureOr<std::pair<bool, shard::Sharding>> s =
          shard::getSharding(norm->getOpOperand(0));
      if (failed(s) || !s->second)
        return;
      for (auto [d, axes] : llvm::enumerate(s->second.getSplitAxes()))
        if (static_cast<int64_t>(d) < axis &&
            llvm::is_contained(axes.asArrayRef(), kTensorAxis)) {
          ++split;
          return;
        }
    });
  }

private:
  int64_t &norms, &split;
};

/// Estimates the planned step's memory (MemoryEstimate.h) just before the
/// lowering starts, once.
class MemoryEstimateProbe : public PassInstrumentation {
public:
  MemoryEstimateProbe(MemoryEstimateOptions options,
                      std::optional<MemoryEstimate> &out)
      : options(std::move(options)), out(out) {}

  void runBeforePass(Pass *pass, Operation *op) override {
    if (out || pass->getArgument() != "loom-verify-sharding")
      return;
    auto module = op->getParentOfType<ModuleOp>();
    llvm::Expected<MemoryEstimate> e = estimateMemory(module, options);
    if (!e) {
      llvm::consumeError(e.takeError());
      return;
    }
    out = std::move(*e);
  }

private:
  MemoryEstimateOptions options;
  std::optional<MemoryEstimate> &out;
};

int64_t batchOf(ModuleOp module) {
  auto func = lookupEntryFunction(module);
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), "loom.input"))
      if (auto t = dyn_cast<RankedTensorType>(arg.getType()))
        if (t.getRank() > 0)
          return t.getDimSize(0);
  return 0;
}

/// The choices one compile of the model tries where --force does not pin
/// them: a plan that does not fit the device is compiled again with the
/// next ZeRO stage, then with twice the micro-batches while that keeps
/// shrinking the plan, then with the recomputation that fits.
struct Attempt {
  int64_t zero = 0, micro = 1;
  /// The bytes the plan with half as many micro-batches needed.
  int64_t lastRequired = 0;
  /// loom-choose-recompute's mode and budget (0: the device's memory).
  std::string remat = "none";
  double rematBudgetGib = 0;
  int rematTries = 0;
  /// Micro-batches and recomputation were weighed already: keep to the
  /// order.
  bool weighed = false;
  /// Whether ZeRO's and sequence parallelism's reduce-scatters and gathers
  /// go in overlapped buckets (whose staging holds memory) under
  /// `--comm-buckets=auto`.
  bool blockBuckets = true;
  /// Where a plan compiled into `planOut` leaves its predicted step time.
  double *stepSeconds = nullptr;
  /// Whether the plan search ran (or is not to run: a pinned mesh, the
  /// one-device reference), and what it chose: the mesh and schedule it
  /// pins; its micro-batches, ZeRO stage and recomputation start the
  /// attempts.
  bool searched = false;
  std::shared_ptr<const SearchedPlan> search;
  /// Why the search chose nothing, when it did not.
  std::string searchError;
};

/// The predicted step time of the plan `attempt` compiles, when it fits
/// (infinity otherwise); nothing is written or printed.
double probe(Options &o, Attempt attempt);

int run(Options &o, Attempt attempt = {}, plan::Plan *planOut = nullptr);

double probe(Options &o, Attempt attempt) {
  double seconds = std::numeric_limits<double>::infinity();
  attempt.stepSeconds = &seconds;
  plan::Plan plan;
  bool wasProbing = probing;
  probing = true;
  int rc = run(o, attempt, &plan);
  probing = wasProbing;
  return rc == 0 ? seconds : std::numeric_limits<double>::infinity();
}

/// The cluster spec with the calibration file riding on it (`cpu:4@FILE`,
/// passes/planner/Cluster.h), so that every pass that costs the cluster
/// reads it.
std::string clusterSpecOf(const Options &o) {
  if (o.calibration.empty())
    return o.cluster;
  return o.cluster + "@" + o.calibration;
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

/// `name` next to loomc (the build's bin/ or the install's), absolute.
std::string besideLoomc(llvm::StringRef name) {
  static int anchor;
  llvm::SmallString<256> path(
      llvm::sys::fs::getMainExecutable("loomc", &anchor));
  llvm::sys::path::remove_filename(path);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

/// --verify-plan's run: `plan` and its one-device `reference` train 2 steps
/// side by side in `loom-run PLAN --verify-against REF` (loomc links no
/// kernels; loom-run is found next to loomc, or in $LOOM_RUN).
int runBeside(const Options &o, const plan::Plan &plan,
              const plan::Plan &reference) {
  std::string loomRun;
  if (const char *env = std::getenv("LOOM_RUN")) {
    loomRun = env;
  } else {
    loomRun = besideLoomc("loom-run");
  }
  if (!llvm::sys::fs::can_execute(loomRun))
    return fail("--verify-plan runs the plan with loom-run, which is not at '" +
                loomRun + "'; build it or set LOOM_RUN=/path/to/loom-run");
  llvm::SmallString<128> planPath, refPath, outPath, errPath;
  for (auto [path, suffix] :
       {std::pair{&planPath, "loomplan"}, {&refPath, "loomplan"},
        {&outPath, "txt"}, {&errPath, "txt"}})
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("loomc-verify", suffix, *path))
      return fail("--verify-plan: cannot create a temporary file: " +
                  ec.message());
  llvm::scope_exit cleanup([&] {
    for (auto *path : {&planPath, &refPath, &outPath, &errPath})
      llvm::sys::fs::remove(*path);
  });
  for (auto [p, path] : {std::pair{&plan, &planPath}, {&reference, &refPath}}) {
    std::error_code ec;
    llvm::raw_fd_ostream os(*path, ec, llvm::sys::fs::OF_None);
    auto bytes = ::loom::runtime::serializePlan(*p);
    if (ec || !bytes)
      return fail("--verify-plan: cannot write '" + path->str() + "'");
    os << *bytes;
  }
  llvm::SmallVector<llvm::StringRef> args = {
      loomRun, planPath, "--verify-against", refPath, "--steps", "2"};
  if (o.noWeights || !o.modelSpec.empty()) // weights from their init rules
    args.append({"--init", "random:1"});
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, outPath.str(),
                                                errPath.str()};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(loomRun, args, std::nullopt, redirects,
                                     0, 0, &error);
  auto text = [](llvm::StringRef path) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    return buffer ? (*buffer)->getBuffer().trim().str() : std::string();
  };
  if (rc == ::loom::runtime::kExitIllPosed) { // the plan is written
    llvm::outs() << "verify-plan: " << text(outPath) << "\n";
    return 0;
  }
  if (rc != 0) {
    std::string why = text(errPath);
    llvm::StringRef line = llvm::StringRef(why).split('\n').first;
    line.consume_front("loom-run: error: ");
    return fail("--verify-plan: " +
                (line.empty() ? "loom-run failed: " + error : line.str()) +
                "; the plan is not written");
  }
  if (!o.quiet)
    llvm::outs() << "verify-plan: " << text(outPath) << "\n";
  return 0;
}

std::string absolute(llvm::StringRef path) {
  llvm::SmallString<256> abs(path);
  llvm::sys::fs::make_absolute(abs);
  llvm::sys::path::remove_dots(abs, true);
  return abs.str().str();
}

/// --emit-sbatch: the batch script for the plan of -o, or for loom-elastic
/// with the training flags loomc was given.
int writeSbatch(const Options &o, const Cluster &cluster) {
  SbatchJob job;
  llvm::StringRef stem = llvm::sys::path::stem(o.model);
  job.jobName = "loom-" + (stem.empty() ? std::string("job") : stem.str());
  for (char &c : job.jobName)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      c = '_';
  job.nodes = cluster.nodes;
  job.tasksPerNode = cluster.devicesPerNode;
  job.gpus = cluster.deviceName != "cpu";
  job.loomRun = besideLoomc("loom-run");
  job.elastic = o.sbatchElastic;
  if (!job.elastic) {
    job.plan = absolute(o.outputFile);
  } else {
    job.loomElastic = besideLoomc("loom-elastic");
    std::vector<std::string> &a = job.elasticArgs;
    a = {"--model", absolute(o.model), "--cluster",
         llvm::StringRef(o.cluster).split(':').first.str()};
    if (job.gpus)
      a.push_back("--devices-per-node=" + std::to_string(job.tasksPerNode));
    // The training flags as given; loom-elastic hands them to loomc.
    auto given = [&](const cl::Option &opt, const std::string &value) {
      if (opt.getNumOccurrences() > 0)
        a.push_back("--" + opt.ArgStr.str() + "=" + value);
    };
    auto number = [](double v) { // the shortest text that reads back as v
      char text[32];
      for (int digits = 1; digits <= 17; ++digits) {
        std::snprintf(text, sizeof(text), "%.*g", digits, v);
        if (std::strtod(text, nullptr) == v)
          break;
      }
      return std::string(text);
    };
    given(o.globalBatch, std::to_string(o.globalBatch));
    given(o.microBatch, std::to_string(o.microBatch));
    given(o.loss, o.loss);
    given(o.output, o.output);
    given(o.optimizer, o.optimizer);
    given(o.lr, number(o.lr));
    given(o.weightDecay, number(o.weightDecay));
    given(o.momentum, number(o.momentum));
    given(o.precision, o.precision);
    given(o.commBuckets, o.commBuckets);
    given(o.train, o.train);
    given(o.freeze, o.freeze);
    given(o.force, o.force);
    for (const std::string &shape : o.inputShapes)
      a.push_back("--input-shape=" + shape);
    for (const cl::opt<bool> *flag : {&o.localBatchNorm, &o.noRaise,
                                      &o.noWeights})
      if (*flag)
        a.push_back("--" + flag->ArgStr.str());
    if (job.gpus)
      a.push_back("--device=cuda");
  }
  std::string text = sbatchScript(job);
  if (auto s = ::loom::runtime::writeFileAtomically(o.emitSbatch, text); !s)
    return fail(s.message());
  llvm::sys::fs::setPermissions(o.emitSbatch, llvm::sys::fs::all_read |
                                                  llvm::sys::fs::owner_all |
                                                  llvm::sys::fs::all_exe);
  return 0;
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
  // without weights; planning alone runs the search on its closed forms.
  bool specModule = !o.modelSpec.empty() &&
                    ((!o.outputFile.empty() && !o.planOnly) || o.dumpPlan ||
                     o.emit != EmitKind::Plan || !o.emitSbatch.empty());
  if (!o.modelSpec.empty() && !specModule) {
    ModelSpecOptions spec;
    spec.spec = o.modelSpec;
    spec.cluster = clusterSpecOf(o);
    spec.precision = o.precision;
    spec.optimizer = o.optimizer;
    spec.force = o.force;
    spec.summaryJson = o.summaryJson;
    spec.globalBatch = o.globalBatch;
    spec.momentum = o.momentum;
    spec.searchSeconds = o.searchSeconds;
    spec.explain = o.explain;
    spec.quiet = o.quiet;
    return planModelSpec(spec);
  }
  if (!(o.searchSeconds > 0))
    return fail("--search-seconds must be positive");
  if (o.model.empty() && !specModule)
    return fail("no model given; usage: loomc MODEL.onnx --cluster SPEC "
                "--global-batch B -o PLAN (see --help)");
  if (specModule && (o.forwardOnly || o.globalBatch <= 0))
    return fail("--model-spec builds a training step: give --global-batch "
                "and no --forward-only");
  std::optional<Precision> precision = parsePrecision(o.precision);
  if (!precision)
    return fail("unknown --precision '" + o.precision +
                "'; expected fp32 or bf16");
  if (!o.report.empty())
    return fail("--report is not available yet");
  bool training = !o.forwardOnly;
  bool wantsPlan = o.emit == EmitKind::Plan;
  if (o.sbatchElastic && o.emitSbatch.empty())
    return fail("--sbatch-elastic shapes the script of --emit-sbatch FILE; "
                "give both");
  if (!o.emitSbatch.empty() && !o.sbatchElastic &&
      (o.outputFile.empty() || o.planOnly))
    return fail("--emit-sbatch writes a script that runs the plan: give -o "
                "PLAN too (or --sbatch-elastic, which plans at run time)");
  if (!o.emitSbatch.empty() && !training)
    return fail("--emit-sbatch writes a training job; drop --forward-only");
  if (o.sbatchElastic && llvm::StringRef(o.cluster).ends_with(".json"))
    return fail("--sbatch-elastic runs loom-elastic, which plans for a "
                "preset (cpu, a100-80g, h100, h200), not a cluster file");
  if (wantsPlan && o.outputFile.empty() && !o.dumpPlan && !o.planOnly &&
      o.summaryJson.empty() && o.emitSbatch.empty())
    return fail("no output: give -o PLAN, --plan-only, --summary-json FILE "
                "or --dump-plan");

  std::string clusterSpec = clusterSpecOf(o);
  llvm::Expected<Cluster> cluster = parseCluster(clusterSpec);
  if (!cluster)
    return fail(llvm::toString(cluster.takeError()));
  llvm::Expected<Forced> forced = parseForce(o.force);
  if (!forced)
    return fail(llvm::toString(forced.takeError()));
  if (forced->zeroGiven)
    zero = forced->zero;

  std::string lossOutput = o.output;
  std::optional<LossKind> loss;
  if (llvm::StringRef(o.loss).starts_with("output:")) {
    lossOutput = o.loss.substr(7);
    loss = LossKind::Output;
  } else if ((loss = parseLoss(o.loss)) == LossKind::Output) {
    loss.reset(); // the model's output is named: output:NAME
  }
  if (!loss)
    return fail("unknown --loss '" + o.loss +
                "'; expected cross_entropy, mse or output:NAME");
  std::optional<OptimizerKind> optimizer = parseOptimizer(o.optimizer);
  if (!optimizer)
    return fail("unknown --optimizer '" + o.optimizer +
                "'; expected adamw or sgd");
  if (!(o.lr >= 0) || !std::isfinite(o.lr))
    return fail("--lr must be a non-negative number, got " +
                std::to_string(o.lr.getValue()));
  if (o.weightDecay.getNumOccurrences() &&
      (!(o.weightDecay >= 0) || !std::isfinite(o.weightDecay)))
    return fail("--weight-decay must be a non-negative number, got " +
                std::to_string(o.weightDecay.getValue()));
  if (!(o.momentum >= 0) || !std::isfinite(o.momentum))
    return fail("--momentum must be a non-negative number, got " +
                std::to_string(o.momentum.getValue()));
  if (o.momentum.getNumOccurrences() && *optimizer != OptimizerKind::Sgd)
    return fail("--momentum applies to --optimizer sgd only");
  // 0 means "not given" (and --verify-plan's one-device reference clears
  // --micro-batch so); given, 0 is refused like any other non-positive.
  bool microGiven = o.microBatch.getNumOccurrences() && !planOut;
  if (o.microBatch < 0 || (microGiven && o.microBatch == 0))
    return fail("--micro-batch must be positive, got " +
                std::to_string(o.microBatch.getValue()));
  if (o.globalBatch < 0 ||
      (o.globalBatch.getNumOccurrences() && o.globalBatch == 0))
    return fail("--global-batch must be positive, got " +
                llvm::Twine(o.globalBatch.getValue()));

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
  pipeline.raise = !o.noRaise;
  pipeline.training = training;
  pipeline.last = o.emit == EmitKind::Raised    ? Phase::Raise
                  : o.emit == EmitKind::Train   ? Phase::Train
                  : o.emit == EmitKind::Planned ? Phase::Plan
                                                : Phase::Lower;
  pipeline.train.loss = *loss;
  pipeline.train.outputName = lossOutput;
  pipeline.train.optimizer = *optimizer;
  pipeline.train.lr = o.lr;
  pipeline.train.weightDecay = o.weightDecay;
  pipeline.train.momentum = o.momentum;
  pipeline.train.precision = *precision;
  pipeline.forward.precision = *precision;
  // The default plan: search every choice --force leaves free on the
  // training step, once; the attempts below start from its choice.
  if (!attempt.searched && training && !forced->meshGiven &&
      cluster->numDevices() > 1 && o.emit != EmitKind::Raised &&
      o.emit != EmitKind::Train) {
    attempt.searched = true;
    planner::SearchRequest request;
    request.cluster = *cluster;
    request.setup.globalBatch = globalBatch;
    request.setup.precision = *precision == Precision::Bf16
                                  ? planner::Precision::Bf16
                                  : planner::Precision::Fp32;
    request.setup.optimizerMoments =
        *optimizer == OptimizerKind::AdamW ? 2 : (o.momentum > 0 ? 1 : 0);
    request.pins = forced->pins;
    if (o.microBatch > 0)
      request.pins.microBatchSize = o.microBatch.getValue();
    request.timeBudgetSeconds = o.searchSeconds;
    llvm::Expected<SearchedPlan> found =
        searchTrainingPlan(*module, pipeline, request,
                           specModule ? o.modelSpec : o.model);
    // Without a plan from the search (no valid choice or none that fits
    // by its estimate), the data-parallel plan and its attempts below
    // give the compiler's own verdict.
    if (found) {
      attempt.search = std::make_shared<SearchedPlan>(std::move(*found));
      const planner::PlanChoice &c = attempt.search->result.best.choice;
      attempt.micro = micro = c.microBatches;
      attempt.zero = zero = c.zero;
      attempt.remat = planner::stringifyRemat(c.remat).str();
    } else {
      attempt.searchError = llvm::toString(found.takeError());
    }
  }
  if (attempt.search) {
    const planner::PlanChoice &c = attempt.search->result.best.choice;
    pipeline.plan.stageBudgetGib = -1; // the search weighed the stages
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
  if (o.commBuckets == "off") {
    pipeline.plan.bucketBytes = -1;
  } else if (o.commBuckets != "auto") {
    double mib = 0;
    if (llvm::StringRef(o.commBuckets).getAsDouble(mib) || !(mib > 0) ||
        mib > 1024 * 1024)
      return fail("--comm-buckets=" + o.commBuckets +
                  ": expected auto, off or a bucket size in MiB (e.g. 25)");
    pipeline.plan.bucketBytes = std::max<int64_t>(1, int64_t(mib * (1 << 20)));
  }
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
  plan::Training &t = emitOptions.training;
  if (training) {
    t.set_loss(o.loss);
    t.set_optimizer(stringifyOptimizer(*optimizer).str());
    // The optimizer's settings as the step applies them (with
    // loom-append-optimizer's defaults), read from its first update.
    t.set_lr(o.lr);
    module->walk([&](Operation *op) {
      if (auto adamw = dyn_cast<AdamwOp>(op)) {
        t.set_lr(adamw.getLrAttr().getValueAsDouble());
        t.set_beta1(adamw.getBeta1Attr().getValueAsDouble());
        t.set_beta2(adamw.getBeta2Attr().getValueAsDouble());
        t.set_eps(adamw.getEpsAttr().getValueAsDouble());
        t.set_weight_decay(adamw.getWeightDecayAttr().getValueAsDouble());
      } else if (auto sgd = dyn_cast<SgdOp>(op)) {
        t.set_lr(sgd.getLrAttr().getValueAsDouble());
        t.set_momentum(sgd.getMomentumAttr().getValueAsDouble());
        t.set_weight_decay(sgd.getWeightDecayAttr().getValueAsDouble());
      } else {
        return WalkResult::advance();
      }
      return WalkResult::interrupt();
    });
    t.set_global_batch(globalBatch);
    t.set_micro_batch(globalBatch / (dp * numMicroBatches));
    t.set_num_micro_batches(numMicroBatches);
  } else {
    t.set_global_batch(batchOf(*module));
    t.set_micro_batch(t.global_batch());
    t.set_num_micro_batches(1);
  }
  t.set_tokens_per_sample(1);
  t.set_precision(stringifyPrecision(*precision).str());
  t.set_zero_stage(zero);

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
    if (!valid)
      return fail("internal error: the emitted plan fails the runtime's "
                  "validation (" + valid.message() + "); please report it");
  }
  // On GPUs the kernels add workspace of their own (attention scores above
  // all); the CPU kernels' is small and not counted.
  if (cluster->deviceName != "cpu")
    for (const plan::Program &prog : plan->programs())
      memory.workspace =
          std::max(memory.workspace,
                   ::loom::runtime::estimateCudaWorkspaceBytes(prog));
  // The step and memory figures come from the planner's models: each
  // program's step (one a pipeline device), the busiest one's stretched by
  // the schedule's waits.
  planner::Precision costPrecision = *precision == Precision::Bf16
                                         ? planner::Precision::Bf16
                                         : planner::Precision::Fp32;
  planner::MeshTopology topology = meshTopologyOf(*module, *cluster);
  planner::StepRequest request;
  planner::StepEstimate step;
  std::vector<double> deviceSeconds;
  for (func::FuncOp f : programFunctions(*module)) {
    planner::StepRequest r =
        stepRequestOf(f, costPrecision, cluster->hostKernels());
    r.workingSetBytes = double(memory.liveBytes);
    planner::StepEstimate e = planner::estimateStep(r, *cluster, topology);
    deviceSeconds.push_back(e.stepSeconds);
    if (deviceSeconds.size() == 1 || e.stepSeconds > step.stepSeconds) {
      request = std::move(r);
      step = std::move(e);
    }
  }
  PipelineStages stages = pipelineStagesOf(*module);
  if (stages.stretch > 1) {
    step.stepSeconds *= stages.stretch;
    step.modelTflops /= stages.stretch;
    step.mfu /= stages.stretch;
  }
  PlanFigures figures = planFigures(*plan, memory, request, std::move(step));
  setPipelineFigures(figures, *plan, stages, deviceSeconds);
  figures.norms = norms;
  figures.sequenceParallelNorms = sequenceParallelNorms;
  figures.remat = rematFiguresOf(*module);
  figures.liveBytes = memory.liveBytes;
  if (estimate)
    figures.estimatedBytes = estimate->peakBytes();
  std::string summary = summaryText(*plan, *cluster, figures);
  if (attempt.search) {
    const planner::SearchResult &r = attempt.search->result;
    summary += searchLine(r) +
               llvm::formatv("  chosen      {0}, {1:F3} ms a step by the "
                             "search's model\n",
                             r.best.choice.text(),
                             1e3 * r.best.prediction.stepSeconds)
                   .str();
    if (o.explain)
      summary += explainText(r);
  } else if (!attempt.searchError.empty()) {
    summary += "  search      none chosen (" + attempt.searchError +
               "); planned data-parallel\n";
  } else if (o.explain) {
    summary += cluster->numDevices() == 1
                   ? "  search      none: one device, nothing to split\n"
                   : "  search      none: --force pins the mesh\n";
  }
  plan->set_summary(summary);

  planner::MemoryFit fit = planner::checkMemoryFit(
      figures.memory, static_cast<int64_t>(cluster->usableMemoryBytes()));
  if (!fit.fits) {
    bool rematAttempt = attempt.remat != "none";
    // Recomputation's budget: what the kernels' workspace leaves.
    double rematBudget = fit.capacityBytes - figures.memory.workspace;
    // First without the staging of overlapped reduce-scatters and gathers
    // (their collectives then wait where they are made).
    bool blockBuckets = llvm::any_of(
        figures.collectives, [](const planner::CollectiveRecord &c) {
          return c.bucket && c.kind != planner::CollectiveKind::AllReduce;
        });
    if (blockBuckets && attempt.blockBuckets && o.commBuckets == "auto") {
      Attempt next = attempt;
      next.blockBuckets = false;
      return run(o, next, planOut);
    }
    // The lowest ZeRO stage that fits, unless --force pins one.
    if (training && !rematAttempt && !forced->zeroGiven && dp > 1 &&
        zero < 3) {
      Attempt next = attempt;
      next.zero = zero + 1;
      next.blockBuckets = true;
      return run(o, next, planOut);
    }
    // Then micro-batches, unless given: one micro-batch's activations at a
    // time (docs/auto-shard.md, "Micro-batches"), while doubling them takes
    // a tenth off the plan (the data and the state do not shrink).
    bool microFree = forced->micro == 0 && o.microBatch == 0 && !hasBatchNorm;
    int64_t share = dp > 0 ? globalBatch / dp : globalBatch;
    if (training && !rematAttempt && microFree &&
        share % (2 * numMicroBatches) == 0 &&
        (attempt.lastRequired == 0 ||
         fit.requiredBytes < 0.9 * attempt.lastRequired)) {
      Attempt next = attempt;
      next.zero = forced->zeroGiven ? forced->zero : 0;
      next.micro = 2 * numMicroBatches;
      next.blockBuckets = true;
      next.lastRequired = fit.requiredBytes;
      next.weighed = true;
      // Unless --force pins recomputation: the faster (by the predicted
      // step) of more micro-batches and the recomputation that fits now.
      if (forced->remat.empty() && !attempt.weighed && rematBudget > 0) {
        Attempt remat = attempt;
        remat.remat = "auto";
        remat.rematBudgetGib = rematBudget / (1024.0 * 1024 * 1024);
        remat.rematTries = 1;
        remat.weighed = true;
        if (probe(o, remat) < probe(o, next))
          return run(o, remat, planOut);
      }
      return run(o, next, planOut);
    }
    // Then recomputation, unless --force pins it: the cheapest that fits
    // what the kernels' workspace leaves, and again with less by what
    // the arena's placement took beyond the live bytes it planned for.
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    if (training && forced->remat.empty() && attempt.rematTries < 3) {
      Attempt next = attempt;
      next.remat = "auto";
      double budget = rematAttempt ? attempt.rematBudgetGib * kGiB -
                                         double(fit.shortfallBytes)
                                   : rematBudget;
      if (budget > 0) {
        next.rematBudgetGib = budget / kGiB;
        ++next.rematTries;
        return run(o, next, planOut);
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
    return fail("the plan needs " + size(fit.requiredBytes) + " per device" +
                withZero + " but " + cluster->deviceName + " has " +
                size(fit.capacityBytes) +
                (cluster->reserveGiB > 0 ? " usable" : "") + " (" +
                size(fit.shortfallBytes) +
                " short; the most is " + largest.second + ", " +
                size(largest.first) +
                "); use more devices or a smaller batch");
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

  // Written whole or not at all (a temporary renamed over the target).
  if (!o.summaryJson.empty()) {
    llvm::json::Object json = summaryJson(*plan, *cluster, figures, seconds);
    if (attempt.search)
      addSearchJson(json, attempt.search->result);
    std::string text =
        llvm::formatv("{0:2}\n", llvm::json::Value(std::move(json)));
    if (auto s = ::loom::runtime::writeFileAtomically(o.summaryJson, text); !s)
      return fail(s.message());
  }
  if (o.dumpPlan) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(*plan, &text);
    llvm::outs() << text;
  }
  if (!o.outputFile.empty() && !o.planOnly) {
    if (auto s = ::loom::runtime::savePlan(*plan, o.outputFile); !s)
      return fail(s.message());
  }
  if (!o.emitSbatch.empty())
    if (int rc = writeSbatch(o, *cluster))
      return rc;
  if (!o.quiet && !o.dumpPlan && training)
    llvm::outs() << summary;
  return 0;
}

} // namespace

namespace {

/// The first number option whose value is not a number, as loomc's one-line
/// error (llvm::cl would print "'1e3' value invalid for long argument!").
std::optional<std::string> badNumberOption(int argc, char **argv) {
  static constexpr std::pair<llvm::StringLiteral, bool> kNumbers[] = {
      {"global-batch", true}, {"micro-batch", true}, {"lr", false},
      {"weight-decay", false}, {"momentum", false}};
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--")
      break;
    if (!arg.consume_front("--") && !arg.consume_front("-"))
      continue;
    auto [name, inlineValue] = arg.split('=');
    for (auto [option, whole] : kNumbers) {
      if (name != option)
        continue;
      bool hasInline = arg.contains('=');
      if (!hasInline && i + 1 >= argc)
        break; // llvm::cl reports the missing value
      llvm::StringRef value = hasInline ? inlineValue : argv[i + 1];
      int64_t integer;
      double real;
      if (whole ? value.getAsInteger(10, integer) : value.getAsDouble(real))
        return ("--" + name + " expects " +
                (whole ? "a whole number" : "a number") + ", got '" + value +
                "'")
            .str();
    }
  }
  return std::nullopt;
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
      "See docs/loomc.md.\n");
  return run(options);
}
