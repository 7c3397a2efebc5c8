//===- Driver.cpp - loom-run's training mode ---------------------*- C++ -*-===//
//
// Every rank validates everything (options, plan, world size, data) before
// the first step, and the ranks agree on failure with a collective after
// each phase and each step (runtime/driver/Agreement.h), so one bad input
// never leaves a rank waiting in a collective. A step whose loss is not
// finite ends the run (exit status 3) before any later step or export.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/Driver.h"

#include "runtime/Metrics.h"
#include "runtime/Numerics.h"
#include "runtime/Session.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/data/DataFeeder.h"
#include "runtime/data/Npy.h"
#include "runtime/data/TokenStream.h"
#include "runtime/driver/Agreement.h"
#include "runtime/driver/Collectives.h"
#include "runtime/driver/Profile.h"
#include "runtime/driver/Verify.h"
#include "runtime/support/Checksum.h"
#include "runtime/support/MemoryLedger.h"
#include "runtime/support/Threads.h"

#if LOOM_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace loom::runtime {

void printError(const std::string &message) {
  std::fprintf(stderr, "loom-run: error: %s\n", message.c_str());
  std::fflush(stderr);
}

namespace {

std::string humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

struct Loaded {
  plan::Plan plan;
  std::map<std::string, SampleArray> data, valid;
  std::unique_ptr<MetricsWriter> metrics;
};

/// The device `opts.device` names (left null for the cpu).
Status createDevice(const RunOptions &opts, std::unique_ptr<Device> &device) {
  if (opts.device == "cpu")
    return Status::ok();
#if LOOM_HAVE_CUDA
  LOOM_ASSIGN_OR_RETURN(device, cuda::createCudaDevice());
  return Status::ok();
#else
  return makeError("this loom-run was built without CUDA (--device %s); "
                   "rebuild with nvcc available or -DLOOM_ENABLE_CUDA=ON",
                   opts.device.c_str());
#endif
}

/// What the choice of a device's collectives depends on.
struct DeviceFacts {
  int distinctDevices = 1;    // GPUs the ranks use (fewer than ranks: shared)
  bool ncclAvailable = false; // on this rank
};

/// Collective over `world`, reached by every rank (then agreed on).
Status findDeviceFacts(Communicator &world, Device *device,
                       DeviceFacts &facts) {
  if (!device)
    return Status::ok();
#if LOOM_HAVE_CUDA
  LOOM_ASSIGN_OR_RETURN(facts.distinctDevices,
                        cuda::countDistinctDevices(world, *device));
  facts.ncclAvailable = cuda::ncclAvailable();
#endif
  return Status::ok();
}

/// The communicator a device's kernels reduce with, NCCL or host staging
/// as `--collectives` and `facts` decide (runtime/driver/Collectives.h),
/// and `what` for the start-up line (collective over `world`; every rank
/// has its facts by now).
Status createDeviceWorld(const RunOptions &opts, Communicator &world,
                         Device *device, const DeviceFacts &facts,
                         std::unique_ptr<Communicator> &deviceWorld,
                         std::string &what) {
  if (!device)
    return Status::ok();
#if LOOM_HAVE_CUDA
  // Every rank takes NCCL only if every rank has it, so all decide alike.
  LOOM_ASSIGN_OR_RETURN(int nccl,
                        world.allReduceMin(facts.ncclAvailable ? 1 : 0));
  LOOM_ASSIGN_OR_RETURN(CollectivesChoice choice,
                        chooseCollectives(opts.collectives, world.size(),
                                          facts.distinctDevices, nccl == 1));
  what = (choice.hostStaged ? "host-staged collectives (" : "NCCL (") +
         choice.reason + ")";
  if (choice.hostStaged) {
    LOOM_ASSIGN_OR_RETURN(deviceWorld,
                          cuda::createHostStagedWorld(world, *device));
  } else {
    LOOM_ASSIGN_OR_RETURN(deviceWorld, cuda::createNcclWorld(world, *device));
  }
#endif
  return Status::ok();
}

/// Whether the run reads the plan's ONNX model: for stored values (buffers
/// initialised from its initializers, unless --init random fills them) or
/// for --export-onnx.
bool readsModel(const RunOptions &opts, const plan::Plan &plan) {
  if (!opts.exportOnnxPath.empty())
    return true;
  for (const plan::Program &program : plan.programs())
    for (const plan::Buffer &b : program.buffers())
      if (b.init_case() == plan::Buffer::kOnnxInitializer &&
          !((b.role() == plan::PARAMETER ||
             b.role() == plan::RUNNING_STAT) &&
            opts.init.random))
        return true;
  return false;
}

/// Points the plan at its ONNX model where it is now: --model, else the path
/// loomc recorded (a relative one taken from the plan's folder), else the
/// file of that name next to the plan (plans travel with their model to
/// machines with other paths). With `checkSum` (rank 0: one read of the
/// file suffices), a model found that way must be the one loomc read.
Status locateModel(const RunOptions &opts, plan::Plan &plan, bool checkSum) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!opts.modelPath.empty()) {
    if (!fs::is_regular_file(opts.modelPath, ec))
      return makeError("--model '%s': no such file", opts.modelPath.c_str());
    plan.set_model_path(opts.modelPath);
    return Status::ok();
  }
  const std::string recorded = plan.model_path();
  if (recorded.empty())
    return Status::ok();
  // The file found in the recorded model's place must be the model loomc
  // compiled; one passed with --model is the user's choice (weights of the
  // same model trained elsewhere), checked by shape only.
  auto found = [&](const fs::path &where) -> Status {
    plan.set_model_path(where.string());
    if (!checkSum || plan.model_checksum().empty() || !readsModel(opts, plan))
      return Status::ok();
    LOOM_ASSIGN_OR_RETURN(std::string sum, fileChecksum(where.string()));
    if (sum != plan.model_checksum())
      return makeError("%s: its model '%s' changed after loomc compiled the "
                       "plan (checksum %s, was %s); recompile the plan, or "
                       "pass --model to take this file's weights anyway",
                       opts.planPath.c_str(), where.c_str(), sum.c_str(),
                       plan.model_checksum().c_str());
    return Status::ok();
  };
  // loomc records an absolute path; a relative one (a hand-written plan)
  // is relative to the plan, not to where loom-run happens to run.
  fs::path planDir = fs::path(opts.planPath).parent_path();
  fs::path where = fs::path(recorded).is_absolute()
                       ? fs::path(recorded)
                       : planDir / fs::path(recorded);
  if (fs::exists(where, ec))
    return found(where);
  fs::path beside = planDir / fs::path(recorded).filename();
  if (fs::exists(beside, ec))
    return found(beside);
  if (!readsModel(opts, plan))
    return Status::ok();
  return makeError("%s: its ONNX model '%s' is missing, and no '%s' is next "
                   "to the plan; pass --model MODEL.onnx",
                   opts.planPath.c_str(), recorded.c_str(),
                   fs::path(recorded).filename().c_str());
}

/// Maps each `NAME=FILE.npy` of `files` into `into`; shape errors name
/// the file (the user fixes the file).
Status mapNpyFiles(const std::vector<std::pair<std::string, std::string>> &files,
                   const plan::Plan &plan,
                   std::map<std::string, SampleArray> &into) {
  std::set<std::string> bindings = dataBindings(plan);
  for (const auto &[name, file] : files) {
    LOOM_ASSIGN_OR_RETURN(SampleArray t, mapNpy(file));
    if (bindings.count(name))
      if (Status s = checkBindingData(plan, name, t); !s)
        return makeError("%s: %s", file.c_str(), s.message().c_str());
    into[name] = std::move(t);
  }
  return Status::ok();
}

/// `--tokens FILE` (`flag`, `path`): the windows of the stream as the plan's
/// one sequence input not in `into` and its target, added to `into`.
Status loadTokens(const RunOptions &opts, const char *flag,
                  const std::string &path, const plan::Plan &plan,
                  std::map<std::string, SampleArray> &into) {
  std::set<std::string> inputs;
  const plan::Buffer *input = nullptr;
  bool target = false;
  for (const plan::Program &p : plan.programs())
    for (const plan::Buffer &b : p.buffers()) {
      if (b.role() == plan::TARGET)
        target = true;
      if (b.role() != plan::INPUT || into.count(b.binding()))
        continue;
      inputs.insert(b.binding());
      input = &b;
    }
  if (inputs.size() != 1 || !target || input->dtype() != plan::I64 ||
      input->shape_size() != 2 || planClasses(plan) == 0) {
    std::string names;
    for (const std::string &n : inputs)
      names += (names.empty() ? "'" : ", '") + n + "'";
    return makeError("%s %s: a token stream feeds a plan's one int64 "
                     "input of shape [b, s] and its cross_entropy target; "
                     "this plan's inputs without --data are %s%s",
                     flag, path.c_str(), names.empty() ? "none" : names.c_str(),
                     planClasses(plan) ? "" : ", and it has no "
                                                  "cross_entropy target");
  }
  LOOM_ASSIGN_OR_RETURN(
      TokenStream stream,
      openTokenStream(path,
                      opts.tokensDtype == "uint32" ? DataType::U32
                                                   : DataType::U16,
                      input->shape(1)));
  for (const plan::Program &p : plan.programs())
    for (const plan::Buffer &b : p.buffers())
      if (b.role() == plan::TARGET && b.shape_size() != 2)
        return makeError("%s %s: the plan's target has shape %s; a "
                         "token stream's target is [b, s] like its input",
                         flag, path.c_str(),
                         shapeToString(bufferShape(b)).c_str());
  into[input->binding()] = std::move(stream.inputs);
  into["target"] = std::move(stream.targets);
  return Status::ok();
}

/// Phase A: everything a rank can check on its own.
Status loadInputs(const RunOptions &opts, Communicator &world, Loaded &out) {
  LOOM_ASSIGN_OR_RETURN(out.plan, loadPlan(opts.planPath));
  if (!out.plan.is_training())
    return makeError("%s is a forward plan; train with a plan compiled "
                     "without --forward-only",
                     opts.planPath.c_str());
  LOOM_RETURN_IF_ERROR(locateModel(opts, out.plan, world.rank() == 0));
  if (out.plan.world_size() != world.size())
    return makeError("plan is for %d rank(s) but %d were launched; run with "
                     "mpirun -np %d",
                     out.plan.world_size(), world.size(),
                     out.plan.world_size());
  LOOM_RETURN_IF_ERROR(mapNpyFiles(opts.data, out.plan, out.data));
  if (!opts.tokens.empty())
    LOOM_RETURN_IF_ERROR(
        loadTokens(opts, "--tokens", opts.tokens, out.plan, out.data));
  LOOM_RETURN_IF_ERROR(checkPlanData(out.plan, out.data));
  LOOM_RETURN_IF_ERROR(mapNpyFiles(opts.validData, out.plan, out.valid));
  if (!opts.validTokens.empty())
    LOOM_RETURN_IF_ERROR(loadTokens(opts, "--valid-tokens", opts.validTokens,
                                    out.plan, out.valid));
  if (!out.valid.empty()) {
    if (Status s = checkPlanData(out.plan, out.valid, "--valid-data"); !s)
      return s.withContext("validation data");
    int64_t batch = out.plan.training().global_batch();
    int64_t samples = out.valid.begin()->second.samples();
    if (samples < batch)
      return makeError("the validation data holds %lld sample(s), fewer than "
                       "one global batch of %lld",
                       (long long)samples, (long long)batch);
    if (samples / batch < opts.evalBatches)
      return makeError("the validation data holds %lld sample(s): %lld "
                       "whole batch(es) of %lld, and --eval-batches asks for "
                       "%lld",
                       (long long)samples, (long long)(samples / batch),
                       (long long)batch, (long long)opts.evalBatches);
  }
  return Status::ok();
}

/// Where the run stands after `step` steps, as a checkpoint records it.
TrainingPosition positionAt(const RunOptions &opts, const plan::Plan &plan,
                            int64_t dataSamples, int64_t step) {
  TrainingPosition p;
  p.step = step;
  p.globalBatch = plan.training().global_batch();
  p.shuffled = opts.shuffle;
  p.seed = static_cast<uint64_t>(opts.seed);
  p.dataSamples = dataSamples;
  return p;
}

/// `--resume`: loads the newest checkpoint that loads into the session
/// (collective) and returns its step, 0 when --checkpoint-dir holds none.
StatusOr<int64_t> resume(const RunOptions &opts, Communicator &world,
                         Session &session, int64_t dataSamples) {
  bool root = world.rank() == 0;
  LOOM_ASSIGN_OR_RETURN(
      std::optional<TrainingPosition> loaded,
      resumeFromCheckpoints(
          session, world, opts.checkpointDir,
          positionAt(opts, session.plan(), dataSamples, 0),
          [](const std::string &why) {
            std::fprintf(stderr,
                         "loom-run: warning: %s; trying the checkpoint "
                         "before it\n",
                         why.c_str());
            std::fflush(stderr);
          }));
  if (!loaded) {
    if (root && !opts.quiet)
      std::printf("loom-run: --resume: no checkpoint in '%s'; starting at "
                  "step 1\n",
                  opts.checkpointDir.c_str());
    return int64_t(0);
  }
  if (loaded->step > opts.steps)
    return makeError("--resume: the newest checkpoint in '%s' is of step "
                     "%lld, past --steps %lld (the total number of steps)",
                     opts.checkpointDir.c_str(), (long long)loaded->step,
                     (long long)opts.steps);
  if (root && !opts.quiet)
    std::printf("loom-run: resumed from %s (step %lld of %lld)\n",
                checkpointPath(opts.checkpointDir, loaded->step).c_str(),
                (long long)loaded->step, (long long)opts.steps);
  return loaded->step;
}

/// The error of a step whose loss is `loss` (NaN or infinite).
Status nonFiniteLoss(const Session &session, float loss, int64_t step) {
  std::string samples = session.stepSamples(step);
  return makeError("the loss is %s at step %lld%s; rerun with "
                   "--check-numerics to find the first instruction that "
                   "produced it",
                   std::isnan(loss) ? "nan"
                   : loss > 0       ? "inf"
                                    : "-inf",
                   (long long)step + 1,
                   samples.empty() ? "" : (" (" + samples + ")").c_str());
}

std::string formatLoss(double loss) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6f", loss);
  return text;
}

/// `--eval-every`: the mean loss of validation batches 0..batches-1, each
/// run by the training program on the parameters after `step`, whose update
/// is then undone. Collective; false (every rank) after an error, printed.
bool validate(Communicator &world, Session &session, int64_t step,
              int64_t batches, double &mean) {
  session.saveState();
  double sum = 0;
  for (int64_t j = 0; j < batches; ++j) {
    if (!agree(world, session.feedValidation(j)))
      return false;
    Status s = session.run(step);
    float loss = NAN;
    if (s.isOk()) {
      StatusOr<float> l = session.loss();
      if (l.isOk())
        loss = *l;
      else
        s = l.status();
    }
    Status restored = session.restoreState();
    if (s.isOk())
      s = restored;
    if (!agree(world, s.withContext("validation batch " + std::to_string(j))))
      return false;
    sum += loss;
  }
  session.dropSavedState();
  mean = sum / static_cast<double>(batches);
  return true;
}

int train(const RunOptions &opts, Communicator &world) {
  bool root = world.rank() == 0;
  Loaded in;
  if (!agree(world, loadInputs(opts, world, in)))
    return 1;

  int64_t maxArena = 0;
  for (const plan::Program &p : in.plan.programs())
    maxArena = std::max(maxArena, p.arena_bytes());
  const plan::Training &training = in.plan.training();

  // Phase B: the device, then the executor (collective communicator splits,
  // weights). The device and its communicator outlive the session.
  std::unique_ptr<Device> device;
  std::unique_ptr<Communicator> deviceWorld;
  std::string collectives;
  DeviceFacts facts;
  if (!agree(world, createDevice(opts, device)))
    return 1;
  if (!agree(world, findDeviceFacts(world, device.get(), facts)))
    return 1;
  if (!agree(world, createDeviceWorld(opts, world, device.get(), facts,
                                      deviceWorld, collectives)))
    return 1;
  std::unique_ptr<Session> session;
  // Every array holds the same number of samples (checkPlanData).
  int64_t dataSamples = in.data.empty() ? 0 : in.data.begin()->second.samples();
  {
    Status s = Status::ok();
    StatusOr<std::unique_ptr<Session>> created =
        Session::create(in.plan, deviceWorld ? *deviceWorld : world,
                        opts.planPath, device.get(), opts.init);
    if (created.isOk()) {
      session = std::move(created).value();
      session->setSampleOrder(
          opts.shuffle ? SampleOrder::shuffled(static_cast<uint64_t>(opts.seed))
                       : SampleOrder::sequential());
      for (auto &[name, value] : in.data) {
        s = session->attachData(name, std::move(value));
        if (!s.isOk())
          break;
      }
      for (auto &[name, value] : in.valid) {
        if (!s.isOk())
          break;
        s = session->attachValidationData(name, std::move(value));
      }
    } else {
      s = created.status();
    }
    if (!agree(world, s))
      return 1;
  }
  in.data.clear();
  session->setCheckNumerics(opts.checkNumerics);
  int64_t firstStep = 0;
  if (opts.resume) {
    StatusOr<int64_t> resumed = resume(opts, world, *session, dataSamples);
    if (!agree(world, resumed.status()))
      return 1;
    firstStep = *resumed;
  }
  {
    Status opened = Status::ok();
    if (root && !opts.metricsPath.empty()) {
      auto metrics = MetricsWriter::open(opts.metricsPath,
                                         opts.resume ? firstStep : -1);
      if (metrics.isOk())
        in.metrics = std::move(metrics).value();
      else
        opened = metrics.status();
    }
    if (!agree(world, opened))
      return 1;
  }
  // The rank's tensor bytes as its ledger counts them: the device's on a
  // GPU, the host's on CPU ranks; what the kernels took at bind besides
  // the arena is their workspace (on a GPU, loomc's memory proof counts
  // the large parts).
  MemoryLedger &ledger = device ? MemoryLedger::device() : MemoryLedger::host();
  int64_t ownArena = session->executor().arenaBytes();
  int64_t workspace = ledger.current() - ownArena;
  // The steps' high-water mark: binding's growing buffers are start-up.
  ledger.resetPeak();

  if (root && !opts.quiet) {
    std::string extra;
    if (opts.init.random)
      extra += ", random init (seed " + std::to_string(opts.init.seed) + ")";
    if (device)
      extra += ", on " + device->name() + " (+" + humanBytes(workspace) +
               " kernel workspace)" +
               (world.size() > 1 ? ", " + collectives : std::string());
    std::printf("loom-run: %s: world size %d, mesh %s, arena %s (%lld bytes) "
                "per rank, global batch %lld, %s%s\n",
                opts.planPath.c_str(), in.plan.world_size(),
                meshToString(in.plan).c_str(), humanBytes(maxArena).c_str(),
                (long long)maxArena, (long long)training.global_batch(),
                training.optimizer().empty() ? "no optimizer"
                                             : training.optimizer().c_str(),
                extra.c_str());
    std::fflush(stdout);
  }

  int64_t tokensPerSample =
      training.tokens_per_sample() > 0 ? training.tokens_per_sample() : 1;
  double total = 0;
  float lastLoss = NAN;
  for (int64_t step = firstStep; step < opts.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    // A rank's samples can hold a value it refuses (an id outside the
    // vocabulary): the ranks agree on the feed before the step's
    // collectives.
    if (!agree(world, session->feed(step)))
      return 1;
    Status s = session->run(step);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (s.isOk()) {
      StatusOr<float> loss = session->loss();
      if (loss.isOk())
        lastLoss = *loss;
      else
        s = loss.status();
    }
    // Pipeline plans: every rank's micro-batches in flight and waits, for
    // the root's metrics (a collective every rank reaches; every rank has
    // the same options, so all or none gather).
    std::vector<StageMetrics> stages;
    if (in.plan.programs_size() > 1 && !opts.metricsPath.empty()) {
      const Executor &exec = session->executor();
      double mine[3] = {static_cast<double>(exec.microBatchesInFlight()),
                        exec.pipelineWaitSeconds(), seconds};
      std::vector<double> all(3 * static_cast<size_t>(world.size()));
      Status gathered = world.allGather(mine, all.data(), sizeof(mine));
      if (s.isOk())
        s = gathered;
      if (gathered.isOk())
        for (const plan::Program &p : in.plan.programs()) {
          if (p.ranks_size() == 0)
            continue;
          const double *r = &all[3 * static_cast<size_t>(p.ranks(0))];
          stages.push_back({static_cast<int64_t>(r[0]), r[1],
                            r[2] > 0 ? r[1] / r[2] : 0});
        }
    }
    // Every rank's loss is the same (the plan all-reduces it), but the ranks
    // agree anyway: the agreement is the collective the step ends with.
    Status lossFinite = Status::ok();
    if (s.isOk() && !std::isfinite(lastLoss))
      lossFinite = nonFiniteLoss(*session, lastLoss, step);
    Status faultFound = Status::ok();
    if (const std::optional<NumericsFault> &fault = session->numericsFault())
      faultFound = Status::error(fault->message);
    const Status &nonFinite = faultFound.isOk() ? lossFinite : faultFound;
    // The validation loss, after a step every rank finished: the ranks
    // agree first (the pass runs collectives), then evaluate unless the
    // step's values are not finite.
    std::optional<double> evalLoss;
    if (session->validationSamples() > 0 &&
        ((step + 1) % opts.evalEvery == 0 || step + 1 == opts.steps)) {
      StepOutcome before = agreeOnStep(world, s, nonFinite, false);
      if (before == StepOutcome::Failed)
        return 1;
      if (before == StepOutcome::Ok) {
        int64_t batches =
            opts.evalBatches > 0
                ? opts.evalBatches
                : session->validationSamples() / training.global_batch();
        double mean = 0;
        if (!validate(world, *session, step, batches, mean))
          return 1;
        evalLoss = mean;
      }
    }
    if (s.isOk() && in.metrics) {
      StepMetrics m;
      m.evalLoss = evalLoss;
      m.stages = std::move(stages);
      m.step = step + 1;
      m.loss = lastLoss;
      m.stepTimeS = seconds;
      m.samplesPerS = seconds > 0 ? training.global_batch() / seconds : 0;
      m.tokensPerS = m.samplesPerS * tokensPerSample;
      m.peakMemoryBytes = ledger.peak();
      m.arenaBytes = ownArena;
      m.workspaceBytes = workspace;
      if (device)
        m.deviceMemoryUsedBytes = device->usedMemoryBytes();
      m.commExposedS = session->executor().exposedCommSeconds();
      s = in.metrics->write(m);
    }
    StepOutcome outcome =
        agreeOnStep(world, s, nonFinite, !opts.checkNumerics);
    if (outcome == StepOutcome::Failed)
      return 1;
    total += seconds;
    bool logged = (step + 1) % opts.logEvery == 0 || step + 1 == opts.steps ||
                  outcome == StepOutcome::NonFinite;
    if (root && !opts.quiet && logged) {
      std::printf("step %lld/%lld  loss %.6f%s  %.2f ms\n",
                  (long long)step + 1, (long long)opts.steps, lastLoss,
                  evalLoss ? ("  eval loss " + formatLoss(*evalLoss)).c_str()
                           : "",
                  seconds * 1e3);
      std::fflush(stdout);
    }
    if (outcome == StepOutcome::NonFinite) {
      if (opts.checkNumerics)
        reportFirstFault(world, session->numericsFault(),
                         lossFinite.isOk() ? "" : lossFinite.message());
      return kExitNonFinite;
    }
    if (!opts.checkpointDir.empty() &&
        (step + 1 == opts.steps ||
         (opts.checkpointEvery > 0 && (step + 1) % opts.checkpointEvery == 0))) {
      Status saved = saveCheckpoint(
          *session, world, opts.checkpointDir,
          positionAt(opts, in.plan, dataSamples, step + 1), opts.keep);
      if (!agree(world, saved))
        return 1;
      if (root && !opts.quiet && logged) {
        std::printf("checkpoint %s\n",
                    checkpointPath(opts.checkpointDir, step + 1).c_str());
        std::fflush(stdout);
      }
    }
  }

  // Every rank takes part (sharded parameters are gathered on rank 0 over
  // the host world); rank 0 writes the file.
  Status exported = Status::ok();
  if (!opts.exportOnnxPath.empty())
    exported = session->exportOnnx(world, opts.exportOnnxPath);
  if (!agree(world, exported))
    return 1;
  int64_t ran = opts.steps - firstStep;
  if (root && !opts.quiet && ran == 0)
    std::printf("done: no steps to run after step %lld%s\n",
                (long long)firstStep,
                opts.exportOnnxPath.empty()
                    ? ""
                    : (", exported " + opts.exportOnnxPath).c_str());
  else if (root && !opts.quiet) {
    std::printf("done: %lld steps in %.3f s (%.3f ms/step), final loss %.6f%s\n",
                (long long)ran, total, total / ran * 1e3, lastLoss,
                opts.exportOnnxPath.empty()
                    ? ""
                    : (", exported " + opts.exportOnnxPath).c_str());
    std::fflush(stdout);
  }
  return 0;
}

} // namespace

int runMain(int argc, char **argv) {
  StatusOr<RunOptions> opts = parseOptions(argc, argv);
  bool useMpi = launchedUnderMpi() &&
                !(opts.isOk() && (opts->forward || !opts->verifyAgainst.empty()));

  if (!useMpi) {
    if (!opts.isOk()) {
      printError(opts.status().message());
      return 1;
    }
    if (opts->help) {
      std::fputs(helpText(), stdout);
      return 0;
    }
    configureThreads();
    if (opts->forward)
      return runForward(*opts);
    if (!opts->verifyAgainst.empty())
      return runVerify(*opts);
    LocalCommunicator world;
    if (!opts->profilePath.empty())
      return runProfile(opts->profilePath, opts->quiet, world);
    return train(*opts, world);
  }

  Status init = initializeMpi(&argc, &argv);
  if (!init.isOk()) {
    printError(init.message());
    return 1;
  }
  int code = 0;
  {
    std::unique_ptr<Communicator> world = createMpiWorld();
    configureThreads();
    if (!opts.isOk()) {
      if (world->rank() == 0)
        printError(opts.status().message());
      code = 1;
    } else if (opts->help) {
      if (world->rank() == 0)
        std::fputs(helpText(), stdout);
    } else if (!opts->profilePath.empty()) {
      code = runProfile(opts->profilePath, opts->quiet, *world);
    } else {
      code = train(*opts, *world);
    }
  }
  finalizeMpi();
  return code;
}

} // namespace loom::runtime
