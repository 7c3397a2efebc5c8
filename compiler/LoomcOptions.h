//===- LoomcOptions.h - loomc's command line --------------------*- C++ -*-===//
//
// loomc's flags (docs/loomc.md), the choices `--force` pins, and the
// one-line errors the driver prints; shared by the driver's files.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_LOOMCOPTIONS_H
#define LOOM_COMPILER_LOOMCOPTIONS_H

#include "compiler/ModelSpecPlan.h"
#include "frontend/OnnxImporter.h"
#include "passes/Options.h"
#include "passes/Passes.h"
#include "passes/planner/PlanChoice.h"

#include "mlir/Support/LLVM.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mlir::loom::loomc {

namespace cl = llvm::cl;

enum class EmitKind { Plan, Import, Raised, Train, Planned, Lowered };

struct Options {
  cl::OptionCategory cat{"loomc options"};
  cl::opt<std::string> model{
      cl::Positional, cl::desc("<model.onnx | model.onnxtext>"), cl::cat(cat)};
  cl::opt<std::string> modelSpec{
      "model-spec",
      cl::desc("plan a transformer given by its shape instead of a model "
               "file: gpt:l=LAYERS,h=HIDDEN,a=HEADS,s=SEQ,v=VOCAB[,ffn=N,"
               "kv_heads=N,arch=gpt|llama]; the joint search chooses dp, tp, "
               "pp, micro-batches, schedule, ZeRO and recomputation and "
               "prints the plan; with -o, an arch=gpt spec is built as the "
               "GPT-2 export of that shape and its plan written (run it "
               "with loom-run --init random:SEED)"),
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
  cl::opt<std::string> cluster{
      "cluster", cl::init("cpu:1"),
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
  cl::opt<int64_t> globalBatch{
      "global-batch", cl::init(0),
      cl::desc("samples per training step (all ranks)"), cl::cat(cat)};
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
  cl::opt<std::string> force{
      "force", cl::init(""),
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
  cl::opt<std::string> report{"report",
                              cl::desc("HTML report - not available yet"),
                              cl::value_desc("FILE.html"), cl::cat(cat)};
  cl::opt<EmitKind> emit{
      "emit", cl::init(EmitKind::Plan), cl::desc("what to write"),
      cl::values(
          clEnumValN(EmitKind::Plan, "plan", "the plan (default)"),
          clEnumValN(EmitKind::Import, "mlir-import", "imported forward IR"),
          clEnumValN(EmitKind::Raised, "mlir-raised",
                     "forward IR after recognising fused ops"),
          clEnumValN(EmitKind::Train, "mlir-train", "training-step IR"),
          clEnumValN(EmitKind::Planned, "mlir-planned",
                     "IR with the plan annotated"),
          clEnumValN(EmitKind::Lowered, "mlir-lowered", "one rank's IR")),
      cl::cat(cat)};
  cl::opt<bool> dumpPlan{"dump-plan",
                         cl::desc("print the plan as protobuf text to stdout"),
                         cl::cat(cat)};
  cl::opt<bool> planOnly{
      "plan-only", cl::desc("plan and summarise without writing a plan file"),
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
  cl::opt<bool> listOps{"list-ops",
                        cl::desc("list the supported ONNX ops and exit"),
                        cl::cat(cat)};
  cl::opt<bool> quiet{"quiet", cl::desc("do not print the summary"),
                      cl::cat(cat)};
};

/// Forced plan choices from `--force`.
struct Forced {
  int64_t dp = 0, tp = 1, pp = 1, micro = 0, zero = 0, virtualStages = 1;
  bool zeroGiven = false;               // else the lowest stage that fits
  std::string remat, schedule = "1f1b"; // remat "": none, auto when it must
  /// The pins as given; whether they pin the mesh (dp, tp or pp given: the
  /// others default to 1, dp to the rest of the devices).
  planner::ChoicePins pins;
  bool meshGiven = false;
};

/// Whether errors are kept quiet: while loomc tries a plan only to compare
/// it with another.
extern bool probing;

/// Prints `loomc: error: MESSAGE` (unless probing); returns 1, the exit code.
int fail(const llvm::Twine &message);

/// The pins of `--force`; an error names the bad item.
llvm::Expected<Forced> parseForce(llvm::StringRef text);

/// `--input-shape NAME=D0xD1x...` into `options` (an error is printed).
LogicalResult parseInputShapes(const cl::list<std::string> &items,
                               OnnxImportOptions &options);

/// The cluster spec with the calibration file riding on it (`cpu:4@FILE`,
/// passes/planner/Cluster.h), so that every pass that costs the cluster
/// reads it.
std::string clusterSpecOf(const Options &o);

/// The first number option whose value is not a number, as loomc's one-line
/// error (llvm::cl would print "'1e3' value invalid for long argument!").
std::optional<std::string> badNumberOption(int argc, char **argv);

/// What the training options say, once checked.
struct Checked {
  bool training = true, wantsPlan = true;
  Precision precision = Precision::Fp32;
  LossKind loss = LossKind::CrossEntropy;
  std::string lossOutput;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  /// --comm-buckets: 0 auto, -1 off, else the bucket's bytes.
  int64_t bucketBytes = 0;
};

/// Checks the options of a compile (`specModule`: of a model spec built as
/// IR; `reference`: a plan compiled only to compare or check against, where
/// an unset --micro-batch reads 0); prints the first error.
std::optional<Checked> checkOptions(const Options &o, bool specModule,
                                    bool reference);

/// The phases' options the flags set: which phases run (--emit,
/// --no-raise, --forward-only) and the training step's (loss, optimizer,
/// precision).
void setPhaseOptions(CompilerPipelineOptions &pipeline, const Options &o,
                     const Checked &c);

/// --model-spec's options when it only plans (compiler/ModelSpecPlan.h).
ModelSpecOptions modelSpecOptions(const Options &o);

} // namespace mlir::loom::loomc

#endif // LOOM_COMPILER_LOOMCOPTIONS_H
