//===- Beside.cpp - What loomc runs and writes beside the plan ------------===//

#include "compiler/Beside.h"
#include "compiler/PlanSearch.h"
#include "compiler/Sbatch.h"
#include "compiler/Summary.h"
#include "runtime/driver/Verify.h"
#include "runtime/support/AtomicFile.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/text_format.h>

#include <cstdlib>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loomc;

/// `name` next to loomc (the build's bin/ or the install's), absolute.
std::string loomc::besideLoomc(llvm::StringRef name) {
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
int loomc::runBeside(const Options &o, const plan::Plan &plan,
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
  for (auto [path, suffix] : {std::pair{&planPath, "loomplan"},
                              {&refPath, "loomplan"},
                              {&outPath, "txt"},
                              {&errPath, "txt"}})
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
  int rc = llvm::sys::ExecuteAndWait(loomRun, args, std::nullopt, redirects, 0,
                                     0, &error);
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

std::string loomc::absolute(llvm::StringRef path) {
  llvm::SmallString<256> abs(path);
  llvm::sys::fs::make_absolute(abs);
  llvm::sys::path::remove_dots(abs, true);
  return abs.str().str();
}

/// --emit-sbatch: the batch script for the plan of -o, or for loom-elastic
/// with the training flags loomc was given.
int loomc::writeSbatch(const Options &o, const Cluster &cluster) {
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
    for (const cl::opt<bool> *flag :
         {&o.localBatchNorm, &o.noRaise, &o.noWeights})
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

int loomc::writeOutputs(const Options &o, const plan::Plan &plan,
                        const Cluster &cluster, const PlanFigures &figures,
                        const planner::SearchResult *search, double seconds,
                        const std::string &summary, bool training) {
  // Written whole or not at all (a temporary renamed over the target).
  if (!o.summaryJson.empty()) {
    llvm::json::Object json = summaryJson(plan, cluster, figures, seconds);
    if (search)
      addSearchJson(json, *search);
    std::string text =
        llvm::formatv("{0:2}\n", llvm::json::Value(std::move(json)));
    if (auto s = ::loom::runtime::writeFileAtomically(o.summaryJson, text); !s)
      return fail(s.message());
  }
  if (o.dumpPlan) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(plan, &text);
    llvm::outs() << text;
  }
  if (!o.outputFile.empty() && !o.planOnly) {
    if (auto s = ::loom::runtime::savePlan(plan, o.outputFile); !s)
      return fail(s.message());
  }
  if (!o.emitSbatch.empty())
    if (int rc = writeSbatch(o, cluster))
      return rc;
  if (!o.quiet && !o.dumpPlan && training)
    llvm::outs() << summary;
  return 0;
}
