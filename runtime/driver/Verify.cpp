//===- Verify.cpp - Run a plan beside its one-device program --------------===//

#include "runtime/driver/Verify.h"

#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/comm/ThreadCommunicator.h"
#include "runtime/data/DataFeeder.h"
#include "runtime/driver/Driver.h"
#include "runtime/support/Threads.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <random>

namespace loom::runtime {
namespace {

using Data = std::map<std::string, HostTensor>;

const plan::Buffer *bufferById(const plan::Program &program, int32_t id) {
  for (const plan::Buffer &b : program.buffers())
    if (b.id() == id)
      return &b;
  return nullptr;
}

/// The values an integer buffer `b` may hold: below the rows of every table
/// a gather indexes with it and the classes of a cross-entropy it is the
/// target of (the one-device program sees every table whole); 2 when
/// nothing bounds it.
int64_t integerBound(const plan::Program &program, const plan::Buffer &b) {
  int64_t bound = crossEntropyClasses(program, b);
  if (bound == 0)
    bound = std::numeric_limits<int64_t>::max();
  for (const plan::Instruction &inst : program.instructions()) {
    if (inst.op() != "gather" || inst.inputs_size() != 2 ||
        inst.inputs(1) != b.id())
      continue;
    const plan::Buffer *table = bufferById(program, inst.inputs(0));
    auto axis = inst.attrs().find("axis");
    int64_t dim = axis == inst.attrs().end() ? 0 : axis->second.i();
    if (table && dim >= 0 && dim < table->shape_size())
      bound = std::min(bound, table->shape(dim));
  }
  return bound == std::numeric_limits<int64_t>::max() ? 2 : bound;
}

/// A global batch of every data binding of the one-device `reference`.
Data synthesize(const plan::Plan &reference) {
  Data data;
  std::mt19937_64 rng(20261201);
  const plan::Program &program = reference.programs(0);
  for (const plan::Buffer &b : program.buffers()) {
    if ((b.role() != plan::INPUT && b.role() != plan::TARGET) ||
        data.count(b.binding()))
      continue;
    // A whole global batch, also where the buffer holds one micro-batch.
    std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
    if (reference.is_training() && !shape.empty() &&
        reference.training().global_batch() > 0)
      shape[0] = reference.training().global_batch();
    if (b.dtype() == plan::I64) {
      HostTensor t(ElemType::I64, shape);
      std::uniform_int_distribution<int64_t> pick(
          0, std::max<int64_t>(integerBound(program, b), 1) - 1);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<int64_t>()[i] = pick(rng);
      data[b.binding()] = std::move(t);
    } else {
      HostTensor t(ElemType::F32, shape);
      std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<float>()[i] = pick(rng);
      data[b.binding()] = std::move(t);
    }
  }
  return data;
}

/// Multiplies each float of `t` by its own 1 + 1e-7 u, u uniform in
/// [-1, 1) (one factor for all would keep every comparison, so a max-pool's
/// or a ReLU's choices would never move).
void perturb(HostTensor &t, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  if (t.type == ElemType::F32)
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] *= static_cast<float>(1.0 + 1e-7 * u(rng));
}

/// Perturbs every float parameter of the session's first program (the
/// one-device reference has one).
Status perturbParameters(Session &session) {
  std::mt19937_64 rng(7);
  Executor &exec = session.executor();
  for (const plan::Buffer &b : session.plan().programs(0).buffers()) {
    if (b.role() != plan::PARAMETER || b.dtype() != plan::F32)
      continue;
    HostTensor t = exec.readBuffer(b);
    perturb(t, rng);
    LOOM_RETURN_IF_ERROR(exec.writeBuffer(b, t));
  }
  return Status::ok();
}

int numRanks(const plan::Plan &plan) {
  int ranks = 0;
  for (const plan::Program &p : plan.programs())
    ranks += p.ranks_size();
  return ranks;
}

/// Each step's loss of `plan` trained on `data`, its ranks as threads of
/// `threads` OpenMP threads each. With `perturbed`, the initial parameters
/// are perturbed by 1e-7 too.
StatusOr<std::vector<float>> train(const plan::Plan &plan, const Data &data,
                                   const VerifyRunOptions &options,
                                   int threads, bool perturbed = false) {
  std::vector<float> losses;
  std::mutex mutex;
  std::vector<std::string> failures =
      runRanks(numRanks(plan), [&](Communicator &world) -> Status {
        setThreadsOfThisThread(threads);
        LOOM_ASSIGN_OR_RETURN(
            std::unique_ptr<Session> session,
            Session::create(plan, world, "plan", nullptr, options.init));
        for (const auto &[binding, array] : data)
          LOOM_RETURN_IF_ERROR(session->attachData(binding, array));
        if (perturbed)
          LOOM_RETURN_IF_ERROR(perturbParameters(*session));
        for (int64_t step = 0; step < options.steps; ++step) {
          LOOM_RETURN_IF_ERROR(session->runStep(step));
          LOOM_ASSIGN_OR_RETURN(float loss, session->loss());
          if (world.rank() == 0) {
            std::lock_guard<std::mutex> lock(mutex);
            losses.push_back(loss);
          }
        }
        return Status::ok();
      });
  for (size_t rank = 0; rank < failures.size(); ++rank)
    if (!failures[rank].empty())
      return makeError("rank %zu: %s", rank, failures[rank].c_str());
  return losses;
}

double relativeDifference(float a, float b) {
  double scale = std::max(std::fabs(double(b)), 1e-30);
  return std::fabs(double(a) - double(b)) / scale;
}

} // namespace

double verifyTolerance(const plan::Plan &plan) {
  return plan.training().precision() == "bf16" ? 1e-3 : 1e-5;
}

StatusOr<VerifyResult> verifyPlans(const plan::Plan &plan,
                                   const plan::Plan &reference,
                                   const VerifyRunOptions &options) {
  if (numRanks(reference) != 1)
    return makeError("the reference plan has %d ranks; it must have one",
                     numRanks(reference));
  Data data = synthesize(reference);
  StatusOr<std::vector<float>> expected =
      train(reference, data, options, options.threads);
  if (!expected.isOk())
    return makeError("the one-device program: %s",
                     expected.status().message().c_str());
  // The reference's sensitivity: its initial parameters and float data
  // perturbed by 1e-7 (each element by its own factor), and its sums taken
  // in another order (one more OpenMP thread splits its GEMMs otherwise).
  Data perturbed = data;
  std::mt19937_64 rng(5);
  for (auto &[name, t] : perturbed)
    perturb(t, rng);
  LOOM_ASSIGN_OR_RETURN(
      std::vector<float> moved,
      train(reference, perturbed, options, options.threads, true));
  LOOM_ASSIGN_OR_RETURN(
      std::vector<float> reordered,
      train(reference, data, options, options.threads + 1));
  double sensitivity = 0;
  size_t sensitiveStep = 1;
  for (size_t i = 0; i < expected->size(); ++i)
    for (const std::vector<float> *other : {&moved, &reordered})
      if (double d = relativeDifference((*other)[i], (*expected)[i]);
          !(d <= sensitivity)) {
        sensitivity = d;
        sensitiveStep = i + 1;
      }
  // The tolerance is ten times the sensitivity, at least the precision's;
  // a reference that moves by more than ten times that floor cannot judge.
  double rtol = std::max(options.rtol, 10 * sensitivity);
  VerifyResult result;
  char line[320];
  if (!(sensitivity <= 10 * options.rtol)) {
    result.verdict = VerifyResult::IllPosed;
    std::snprintf(line, sizeof line,
                  "not checked: a 1e-7 perturbation or another summation "
                  "order moves the one-device loss of step %zu by %.2e "
                  "relative, over 10 times the tolerance %.1e: these steps "
                  "cannot tell a wrong plan from rounding",
                  sensitiveStep, sensitivity, options.rtol);
    result.message = line;
    return result;
  }
  StatusOr<std::vector<float>> got =
      train(plan, data, options, options.threads);
  if (!got.isOk())
    return makeError("the plan: %s", got.status().message().c_str());
  double worst = 0;
  size_t worstStep = 1;
  for (size_t i = 0; i < got->size() && i < expected->size(); ++i) {
    double d = relativeDifference((*got)[i], (*expected)[i]);
    if (!(d <= rtol)) { // NaN fails too
      result.verdict = VerifyResult::Differs;
      std::snprintf(line, sizeof line,
                    "step %zu's loss is %.9g under the plan but %.9g on one "
                    "device (relative difference %.2e > %.1e)",
                    i + 1, (*got)[i], (*expected)[i], d, rtol);
      result.message = line;
      return result;
    }
    if (d > worst) {
      worst = d;
      worstStep = i + 1;
    }
  }
  result.verdict = VerifyResult::Matches;
  std::snprintf(line, sizeof line,
                "%lld steps on %d CPU ranks match the one-device program "
                "within %.1e (worst relative difference %.2e, step %zu)",
                (long long)options.steps, numRanks(plan), rtol, worst,
                worstStep);
  result.message = line;
  return result;
}

/// The bytes the host has available (MemAvailable), or 0 when unknown.
static int64_t availableHostBytes() {
  std::FILE *f = std::fopen("/proc/meminfo", "r");
  if (!f)
    return 0;
  char line[256];
  long long kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
      break;
  std::fclose(f);
  return static_cast<int64_t>(kib) * 1024;
}

/// The arenas of every rank of `plan` (each rank runs its program's).
static int64_t arenaBytesOfAllRanks(const plan::Plan &plan) {
  int64_t bytes = 0;
  for (const plan::Program &p : plan.programs())
    bytes += p.arena_bytes() * p.ranks_size();
  return bytes;
}

int runVerify(const RunOptions &opts) {
  StatusOr<plan::Plan> plan = loadPlan(opts.planPath);
  if (!plan.isOk()) {
    printError(plan.status().message());
    return 1;
  }
  StatusOr<plan::Plan> reference = loadPlan(opts.verifyAgainst);
  if (!reference.isOk()) {
    printError(reference.status().message());
    return 1;
  }
  // Every rank's arena and the reference's live in this process at once:
  // a plan too big for the host is not run (the plan may well be right).
  int64_t need = arenaBytesOfAllRanks(*plan) + arenaBytesOfAllRanks(*reference);
  int64_t have = availableHostBytes();
  if (have > 0 && need > have / 2) {
    std::printf("not checked: the plan's %d ranks and the one-device program "
                "need %.2f GiB of arenas in one process, over half of this "
                "host's %.2f GiB available\n",
                numRanks(*plan), need / 1073741824.0, have / 1073741824.0);
    return kExitIllPosed;
  }
  VerifyRunOptions options;
  options.steps = opts.steps;
  options.rtol = verifyTolerance(*plan);
  options.init = opts.init;
  options.threads = requestedThreads();
  StatusOr<VerifyResult> result = verifyPlans(*plan, *reference, options);
  if (!result.isOk()) {
    printError(result.status().message());
    return 1;
  }
  switch (result->verdict) {
  case VerifyResult::Matches:
    if (!opts.quiet)
      std::printf("%s\n", result->message.c_str());
    return 0;
  case VerifyResult::IllPosed:
    std::printf("%s\n", result->message.c_str());
    return kExitIllPosed;
  case VerifyResult::Differs:
    break;
  }
  printError(result->message);
  return 1;
}

} // namespace loom::runtime
