//===- LoomcOptions.cpp - loomc's command line ----------------------------===//

#include "compiler/LoomcOptions.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loomc;

bool loomc::probing = false;

int loomc::fail(const llvm::Twine &message) {
  if (!probing)
    llvm::errs() << "loomc: error: " << message << "\n";
  return 1;
}

llvm::Expected<Forced> loomc::parseForce(llvm::StringRef text) {
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

LogicalResult loomc::parseInputShapes(const cl::list<std::string> &items,
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
        fail("bad --input-shape '" + item +
             "': expected NAME=D0xD1x... with "
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

std::string loomc::clusterSpecOf(const Options &o) {
  if (o.calibration.empty())
    return o.cluster;
  return o.cluster + "@" + o.calibration;
}

std::optional<std::string> loomc::badNumberOption(int argc, char **argv) {
  static constexpr std::pair<llvm::StringLiteral, bool> kNumbers[] = {
      {"global-batch", true},
      {"micro-batch", true},
      {"lr", false},
      {"weight-decay", false},
      {"momentum", false}};
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

ModelSpecOptions loomc::modelSpecOptions(const Options &o) {
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
  return spec;
}

std::optional<Checked> loomc::checkOptions(const Options &o, bool specModule,
                                           bool reference) {
  auto refuse = [](const llvm::Twine &message) -> std::optional<Checked> {
    fail(message);
    return std::nullopt;
  };
  if (!(o.searchSeconds > 0))
    return refuse("--search-seconds must be positive");
  if (o.model.empty() && !specModule)
    return refuse("no model given; usage: loomc MODEL.onnx --cluster SPEC "
                  "--global-batch B -o PLAN (see --help)");
  if (specModule && (o.forwardOnly || o.globalBatch <= 0))
    return refuse("--model-spec builds a training step: give --global-batch "
                  "and no --forward-only");
  std::optional<Precision> precision = parsePrecision(o.precision);
  if (!precision)
    return refuse("unknown --precision '" + o.precision +
                  "'; expected fp32 or bf16");
  if (!o.report.empty())
    return refuse("--report is not available yet");
  bool training = !o.forwardOnly;
  bool wantsPlan = o.emit == EmitKind::Plan;
  if (o.sbatchElastic && o.emitSbatch.empty())
    return refuse("--sbatch-elastic shapes the script of --emit-sbatch FILE; "
                  "give both");
  if (!o.emitSbatch.empty() && !o.sbatchElastic &&
      (o.outputFile.empty() || o.planOnly))
    return refuse("--emit-sbatch writes a script that runs the plan: give -o "
                  "PLAN too (or --sbatch-elastic, which plans at run time)");
  if (!o.emitSbatch.empty() && !training)
    return refuse("--emit-sbatch writes a training job; drop --forward-only");
  if (o.sbatchElastic && llvm::StringRef(o.cluster).ends_with(".json"))
    return refuse("--sbatch-elastic runs loom-elastic, which plans for a "
                  "preset (cpu, a100-80g, h100, h200), not a cluster file");
  if (wantsPlan && o.outputFile.empty() && !o.dumpPlan && !o.planOnly &&
      o.summaryJson.empty() && o.emitSbatch.empty())
    return refuse("no output: give -o PLAN, --plan-only, --summary-json FILE "
                  "or --dump-plan");

  std::string lossOutput = o.output;
  std::optional<LossKind> loss;
  if (llvm::StringRef(o.loss).starts_with("output:")) {
    lossOutput = o.loss.substr(7);
    loss = LossKind::Output;
  } else if ((loss = parseLoss(o.loss)) == LossKind::Output) {
    loss.reset(); // the model's output is named: output:NAME
  }
  if (!loss)
    return refuse("unknown --loss '" + o.loss +
                  "'; expected cross_entropy, mse or output:NAME");
  std::optional<OptimizerKind> optimizer = parseOptimizer(o.optimizer);
  if (!optimizer)
    return refuse("unknown --optimizer '" + o.optimizer +
                  "'; expected adamw or sgd");
  if (!(o.lr >= 0) || !std::isfinite(o.lr))
    return refuse("--lr must be a non-negative number, got " +
                  std::to_string(o.lr.getValue()));
  if (o.weightDecay.getNumOccurrences() &&
      (!(o.weightDecay >= 0) || !std::isfinite(o.weightDecay)))
    return refuse("--weight-decay must be a non-negative number, got " +
                  std::to_string(o.weightDecay.getValue()));
  if (!(o.momentum >= 0) || !std::isfinite(o.momentum))
    return refuse("--momentum must be a non-negative number, got " +
                  std::to_string(o.momentum.getValue()));
  if (o.momentum.getNumOccurrences() && *optimizer != OptimizerKind::Sgd)
    return refuse("--momentum applies to --optimizer sgd only");
  // 0 means "not given" (and --verify-plan's one-device reference clears
  // --micro-batch so); given, 0 is refused like any other non-positive.
  bool microGiven = o.microBatch.getNumOccurrences() && !reference;
  if (o.microBatch < 0 || (microGiven && o.microBatch == 0))
    return refuse("--micro-batch must be positive, got " +
                  std::to_string(o.microBatch.getValue()));
  if (o.globalBatch < 0 ||
      (o.globalBatch.getNumOccurrences() && o.globalBatch == 0))
    return refuse("--global-batch must be positive, got " +
                  llvm::Twine(o.globalBatch.getValue()));

  int64_t bucketBytes = 0;
  if (o.commBuckets == "off") {
    bucketBytes = -1;
  } else if (o.commBuckets != "auto") {
    double mib = 0;
    if (llvm::StringRef(o.commBuckets).getAsDouble(mib) || !(mib > 0) ||
        mib > 1024 * 1024)
      return refuse("--comm-buckets=" + o.commBuckets +
                    ": expected auto, off or a bucket size in MiB (e.g. 25)");
    bucketBytes = std::max<int64_t>(1, int64_t(mib * (1 << 20)));
  }
  return Checked{training,   wantsPlan,  *precision, *loss,
                 lossOutput, *optimizer, bucketBytes};
}

void loomc::setPhaseOptions(CompilerPipelineOptions &pipeline, const Options &o,
                            const Checked &c) {
  pipeline.raise = !o.noRaise;
  pipeline.training = c.training;
  pipeline.last = o.emit == EmitKind::Raised    ? Phase::Raise
                  : o.emit == EmitKind::Train   ? Phase::Train
                  : o.emit == EmitKind::Planned ? Phase::Plan
                                                : Phase::Lower;
  pipeline.train.loss = c.loss;
  pipeline.train.outputName = c.lossOutput;
  pipeline.train.optimizer = c.optimizer;
  pipeline.train.lr = o.lr.getValue();
  pipeline.train.weightDecay = o.weightDecay.getValue();
  pipeline.train.momentum = o.momentum.getValue();
  pipeline.train.precision = c.precision;
  pipeline.forward.precision = c.precision;
}
