//===- Executor.cpp - Run one rank's program ---------------------*- C++ -*-===//

#include "runtime/Executor.h"

#include "runtime/ShardLayout.h"
#include "runtime/onnx/OnnxWeights.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace loom::runtime {

namespace {

/// Whether instructions of `op` talk to other ranks (the executor times
/// them: what the step waits on them is its exposed communication).
bool isCommunication(const std::string &op) {
  return op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" ||
         op == "all_to_all" || op == "all_reduce_start" ||
         op == "all_reduce_wait" || op == "reduce_scatter_start" ||
         op == "reduce_scatter_wait" || op == "all_gather_start" ||
         op == "all_gather_wait" || op == "send" || op == "recv";
}

} // namespace

class Executor::Binder final : public BindContext {
public:
  explicit Binder(Executor &exec) : exec(exec) {}
  uint8_t *arena() override {
    return exec.deviceArena ? exec.deviceArena : exec.arena.data();
  }
  Device *device() override { return exec.theDevice; }
  Communicator *commForAxes(const std::vector<int64_t> &axes) override {
    auto it = exec.axisComms.find(axes);
    return it == exec.axisComms.end() ? nullptr : it->second.get();
  }
  InFlightBuckets *inFlightBuckets() override { return &exec.inFlight; }
  std::shared_ptr<CountedVector<uint8_t>> sharedScratch(int slot,
                                                        int64_t bytes) override {
    std::shared_ptr<CountedVector<uint8_t>> &s = exec.scratch[slot & 1];
    if (!s)
      s = std::make_shared<CountedVector<uint8_t>>();
    if (static_cast<int64_t>(s->size()) < bytes)
      s->resize(static_cast<size_t>(bytes));
    return s;
  }

private:
  Executor &exec;
};

Executor::Executor(const plan::Plan &plan, int rank, std::string planPath)
    : thePlan(plan), myRank(rank), planPath(std::move(planPath)) {}
Executor::~Executor() {
  if (profile)
    printProfile();
  // Prepared calls may hold device resources (library descriptors): release
  // them before the memory they point into.
  calls.clear();
  if (deviceArena)
    theDevice->freeArena(deviceArena);
}

std::string Executor::where(int index) const {
  const plan::Instruction &inst = theProgram->instructions(index);
  return planPath + ": rank " + std::to_string(myRank) + ": instruction " +
         std::to_string(index) + " '" + inst.op() + "'" +
         (inst.loc().empty() ? "" : " at '" + inst.loc() + "'");
}

StatusOr<std::unique_ptr<Executor>>
Executor::create(const plan::Plan &plan, Communicator &world,
                 const std::string &planPath, Device *device,
                 const ParameterInit &init) {
  if (world.size() != plan.world_size())
    return makeError("%s: plan is for %d rank(s) but %d were launched; run "
                     "with mpirun -np %d",
                     planPath.c_str(), plan.world_size(), world.size(),
                     plan.world_size());
  std::unique_ptr<Executor> exec(new Executor(plan, world.rank(), planPath));
  int index = findProgramIndex(plan, world.rank());
  if (index < 0)
    return makeError("%s: rank %d is in no program", planPath.c_str(),
                     world.rank());
  exec->theProgram = &plan.programs(index);

  // Every rank creates the same communicators in the same order (the set
  // comes from all programs), so the collective splits match up.
  std::set<std::vector<int64_t>> axisSets;
  for (const plan::Program &program : plan.programs())
    for (const plan::Instruction &inst : program.instructions()) {
      if (!isCommunication(inst.op()) && inst.op() != "all_slice")
        continue;
      // Sends and receives go along the pp axis.
      if (inst.op() == "send" || inst.op() == "recv") {
        for (int i = 0; i < plan.mesh_size(); ++i)
          if (plan.mesh(i).name() == "pp")
            axisSets.insert({i});
        continue;
      }
      auto it = inst.attrs().find("axes");
      if (it == inst.attrs().end())
        continue;
      std::vector<int64_t> axes(it->second.ints().values().begin(),
                                it->second.ints().values().end());
      std::sort(axes.begin(), axes.end());
      axisSets.insert(axes);
    }
  std::vector<int64_t> sizes = meshSizes(plan);
  for (const std::vector<int64_t> &axes : axisSets) {
    LOOM_ASSIGN_OR_RETURN(auto comm,
                          createAxesCommunicator(world, sizes, axes));
    exec->axisComms[axes] = std::move(comm);
  }
  // The directions that pipeline transfers take, (sending stage, receiving
  // stage), from every program: the same list on every rank.
  std::set<std::pair<int, int>> directions;
  int ppAxis = -1;
  for (int i = 0; i < plan.mesh_size(); ++i)
    if (plan.mesh(i).name() == "pp")
      ppAxis = i;
  for (const plan::Program &program : plan.programs()) {
    if (ppAxis < 0 || program.ranks_size() == 0)
      continue;
    int stage = static_cast<int>(
        meshCoordinates(program.ranks(0), sizes)[ppAxis]);
    for (const plan::Instruction &inst : program.instructions())
      if (inst.op() == "send")
        if (auto it = inst.attrs().find("peer_stage"); it != inst.attrs().end())
          directions.insert({stage, static_cast<int>(it->second.i())});
  }
  if (!directions.empty())
    if (auto it = exec->axisComms.find({ppAxis}); it != exec->axisComms.end())
      LOOM_RETURN_IF_ERROR(it->second->preparePointToPoint(
          std::vector<std::pair<int, int>>(directions.begin(),
                                           directions.end())));

  LOOM_ASSIGN_OR_RETURN(exec->arena,
                        Arena::allocate(exec->theProgram->arena_bytes()));
  LOOM_RETURN_IF_ERROR(exec->initializeBuffers(init));
  if (device) {
    // Initial values are built on the host and uploaded once.
    exec->theDevice = device;
    LOOM_ASSIGN_OR_RETURN(exec->deviceArena,
                          device->allocateArena(exec->theProgram->arena_bytes()));
    LOOM_RETURN_IF_ERROR(
        device->upload(exec->deviceArena, exec->arena.data(),
                       exec->theProgram->arena_bytes()));
    for (const plan::Buffer &b : exec->theProgram->buffers())
      if (b.role() == plan::INPUT || b.role() == plan::TARGET)
        exec->stepInputs.push_back(&b);
  }

  std::map<int32_t, const plan::Buffer *> byId;
  for (const plan::Buffer &b : exec->theProgram->buffers())
    byId[b.id()] = &b;
  Binder binder(*exec);
  auto viewOf = [&](const plan::Instruction &inst) {
    OpView view{plan, inst, {}, {}};
    for (int32_t id : inst.inputs())
      view.inputs.push_back(byId.at(id));
    for (int32_t id : inst.outputs())
      view.outputs.push_back(byId.at(id));
    return view;
  };
  // Host kernels on BF16 buffers share one fp32 scratch block: size it for
  // the largest instruction before any kernel binds a pointer into it.
  if (!device)
    for (const plan::Instruction &inst : exec->theProgram->instructions())
      exec->bf16Scratch.reserve(cpu::Bf16Scratch::floatsFor(viewOf(inst)));
  for (int i = 0; i < exec->theProgram->instructions_size(); ++i) {
    const plan::Instruction &inst = exec->theProgram->instructions(i);
    const KernelDef *kernel =
        device ? device->findKernel(inst.op()) : findKernel(inst.op());
    if (!kernel)
      return device ? makeError("%s: op '%s' has no kernel on %s yet",
                                exec->where(i).c_str(), inst.op().c_str(),
                                device->name().c_str())
                    : makeError("%s: unknown op", exec->where(i).c_str());
    OpView view = viewOf(inst);
    // A device's kernels take BF16 buffers themselves (or refuse the
    // combination at bind); the host widens them around fp32 kernels.
    StatusOr<KernelFn> fn =
        device ? kernel->bind(view, binder)
               : cpu::bindOnCpu(*kernel, view, binder, exec->bf16Scratch);
    if (!fn.isOk())
      return fn.status().withContext(exec->where(i));
    exec->calls.push_back({std::move(fn).value(), i,
                           isCommunication(inst.op()), inst.op() == "recv"});
  }
  // Each micro-batch is in flight from its first forward instruction to its
  // last backward one.
  std::map<int32_t, size_t> firstForward, lastBackward;
  for (size_t c = 0; c < exec->calls.size(); ++c) {
    const plan::Instruction &inst =
        exec->theProgram->instructions(exec->calls[c].index);
    if (inst.micro_batch() <= 0)
      continue;
    if (inst.backward())
      lastBackward[inst.micro_batch()] = c;
    else
      firstForward.try_emplace(inst.micro_batch(), c);
  }
  for (auto [micro, c] : firstForward)
    if (auto it = lastBackward.find(micro); it != lastBackward.end() &&
                                            it->second > c) {
      ++exec->calls[c].inFlightDelta;
      --exec->calls[it->second].inFlightDelta;
    }
  const char *prof = std::getenv("LOOM_PROFILE");
  if (prof && *prof && std::strcmp(prof, "0") != 0) {
    exec->profile = std::make_unique<Profile>();
    exec->profile->allInstructions = std::strcmp(prof, "2") == 0;
    exec->profile->seconds.assign(exec->calls.size(), 0.0);
    exec->profile->firstStep.assign(exec->calls.size(), 0.0);
  }
  return exec;
}

Status Executor::initializeBuffers(const ParameterInit &init) {
  std::unique_ptr<OnnxWeights> weights;
  // A sharded buffer's place in its global tensor follows from this rank's
  // mesh coordinate (docs/plan-format.md, "Sharded buffers").
  std::vector<int64_t> sizes = meshSizes(thePlan);
  std::vector<int64_t> coords = meshCoordinates(myRank, sizes);
  for (const plan::Buffer &b : theProgram->buffers()) {
    uint8_t *dst = bufferData(b);
    std::string what = planPath + ": buffer " + std::to_string(b.id()) +
                       " '" + b.name() + "'";
    // A running statistic starts as torch's fresh module's (mean 0,
    // variance 1) when the parameters are random or it has no stored value.
    bool byRule = (b.role() == plan::PARAMETER ||
                   b.role() == plan::RUNNING_STAT) &&
                  (init.random || b.init_case() == plan::Buffer::INIT_NOT_SET);
    if (byRule) {
      const std::string &name = b.binding().empty() ? b.name() : b.binding();
      if (!init.random && b.role() == plan::PARAMETER)
        return makeError("%s: parameter '%s' has no stored value (planned "
                         "with loomc --no-weights); pass --init random:SEED",
                         planPath.c_str(), name.c_str());
      if (b.dtype() != plan::F32)
        return makeError("%s: --init random fills float32 parameters only, "
                         "not %s",
                         what.c_str(), dtypeName(b.dtype()));
      // Values come from global indices: a shard holds exactly its
      // elements of the unsharded fill, whatever the mesh.
      fillByInitRule(b.init_rule(), init.seed, name,
                     shardLayout(b, sizes, coords),
                     reinterpret_cast<float *>(dst));
      continue;
    }
    switch (b.init_case()) {
    case plan::Buffer::kZeros:
      break; // the arena starts zeroed (Arena::allocate)
    case plan::Buffer::kData:
      std::memcpy(dst, b.data().data(), b.size_bytes());
      break;
    case plan::Buffer::kOnnxInitializer: {
      if (!weights) {
        auto loaded = OnnxWeights::load(thePlan.model_path());
        if (!loaded.isOk())
          return loaded.status().withContext(what);
        weights = std::move(loaded).value();
      }
      ElemType type = b.dtype() == plan::I64 ? ElemType::I64 : ElemType::F32;
      StatusOr<HostTensor> value = weights->get(b.onnx_initializer(), type);
      if (!value.isOk())
        return value.status().withContext(what);
      ShardLayout layout = shardLayout(b, sizes, coords);
      if (value->numel() != numElements(layout.global))
        return makeError("%s: initializer '%s' has shape %s, expected %s%s",
                         what.c_str(), b.onnx_initializer().c_str(),
                         shapeToString(value->shape).c_str(),
                         b.global_shape_size() != 0 ? "the global shape " : "",
                         shapeToString(layout.global).c_str());
      copyGlobalToShard(layout, dtypeSize(b.dtype()), value->bytes.data(), dst);
      break;
    }
    default:
      break;
    }
  }
  return Status::ok();
}

Status Executor::runCall(const Call &call, const StepContext &ctx) {
  Status s = Status::ok();
  if (call.communicates) {
    auto t0 = std::chrono::steady_clock::now();
    s = call.fn(ctx);
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
    stepCommSeconds += seconds;
    if (call.receives)
      stepRecvSeconds += seconds;
  } else {
    s = call.fn(ctx);
  }
  if (call.inFlightDelta) {
    inFlightNow += call.inFlightDelta;
    stepPeakInFlight = std::max(stepPeakInFlight, inFlightNow);
  }
  // Non-blocking collectives advance between instructions.
  if (s.isOk() && !inFlight.empty())
    s = inFlight.progress();
  return s.isOk() ? s : s.withContext(where(call.index));
}

Status Executor::runStep(int64_t step) {
  StepContext ctx;
  ctx.step = step;
  stepCommSeconds = stepRecvSeconds = 0;
  inFlightNow = stepPeakInFlight = 0;
  if (theDevice) {
    for (const plan::Buffer *b : stepInputs)
      LOOM_RETURN_IF_ERROR(theDevice->upload(deviceArena + b->offset(),
                                             bufferData(*b), b->size_bytes()));
    Status ran = runCalls(ctx);
    ranAStep = true;
    LOOM_RETURN_IF_ERROR(ran);
    LOOM_RETURN_IF_ERROR(
        inFlight.finishStep().withContext(planPath + ": rank " +
                                           std::to_string(myRank)));
    // Waiting here makes step times honest and surfaces the kernels'
    // device-side data checks before the loss is read.
    LOOM_RETURN_IF_ERROR(
        theDevice->synchronize().withContext(planPath + ": rank " +
                                             std::to_string(myRank)));
    const plan::Buffer *loss = findBuffer(theProgram->loss_buffer());
    if (theProgram->loss_buffer() >= 0 && loss)
      LOOM_RETURN_IF_ERROR(theDevice->download(bufferData(*loss),
                                               deviceArena + loss->offset(),
                                               loss->size_bytes()));
    return Status::ok();
  }
  Status ran = runCalls(ctx);
  ranAStep = true;
  LOOM_RETURN_IF_ERROR(ran);
  return inFlight.finishStep().withContext(planPath + ": rank " +
                                            std::to_string(myRank));
}

Status Executor::runCalls(const StepContext &ctx) {
  if (checkNumerics)
    return runCallsChecked(ctx);
  if (profile) {
    using Clock = std::chrono::steady_clock;
    std::vector<double> &acc =
        profile->steps == 0 ? profile->firstStep : profile->seconds;
    ++profile->steps;
    for (size_t i = 0; i < calls.size(); ++i) {
      Clock::time_point t0 = Clock::now();
      Status s = runCall(calls[i], ctx);
      // Device kernels are asynchronous: wait so the time is the kernel's.
      if (s.isOk() && theDevice)
        s = theDevice->synchronize().withContext(where(calls[i].index));
      acc[i] += std::chrono::duration<double>(Clock::now() - t0).count();
      LOOM_RETURN_IF_ERROR(s);
    }
    return Status::ok();
  }
  for (const Call &call : calls)
    LOOM_RETURN_IF_ERROR(runCall(call, ctx));
  return Status::ok();
}

void Executor::setCheckNumerics(bool on) {
  checkNumerics = on;
  fault.reset();
  floatOperands.clear();
  constantInf.reset();
  scanCopy.clear();
  if (!on)
    return;
  int64_t largest = 0;
  std::map<int32_t, int> position;
  for (int i = 0; i < theProgram->buffers_size(); ++i) {
    const plan::Buffer &b = theProgram->buffers(i);
    if (b.dtype() == plan::F32 || b.dtype() == plan::BF16) {
      position[b.id()] = i;
      largest = std::max(largest, b.size_bytes());
    }
  }
  auto floats = [&](const auto &ids) {
    std::vector<int> out;
    for (int32_t id : ids)
      if (auto it = position.find(id); it != position.end())
        out.push_back(it->second);
    return out;
  };
  for (const Call &call : calls) {
    const plan::Instruction &inst = theProgram->instructions(call.index);
    // A bucket's buffer is in flight, and its gaps between tensors hold
    // whatever was there: its tensors are checked where they are made and
    // where their sums are read.
    if (inst.op() == "all_reduce_start" || inst.op() == "all_reduce_wait") {
      floatOperands.push_back({});
      continue;
    }
    // A reduce-scatter or gather bucket's staging is in flight from its
    // start to its wait: the start's tensors are checked as it reads them,
    // the wait's as it writes them.
    if (inst.op() == "reduce_scatter_start" ||
        inst.op() == "all_gather_start") {
      floatOperands.push_back({floats(inst.inputs()), {}});
      continue;
    }
    if (inst.op() == "reduce_scatter_wait" || inst.op() == "all_gather_wait") {
      floatOperands.push_back({{}, floats(inst.outputs())});
      continue;
    }
    floatOperands.push_back({floats(inst.inputs()), floats(inst.outputs())});
  }
  if (theDevice)
    scanCopy.resize((largest + sizeof(float) - 1) / sizeof(float));
}

StatusOr<std::optional<NonFinite>> Executor::scanBuffer(const plan::Buffer &b,
                                                        bool nanOnly) {
  const void *bytes = bufferData(b);
  if (theDevice) {
    LOOM_RETURN_IF_ERROR(
        theDevice->download(reinterpret_cast<uint8_t *>(scanCopy.data()),
                            deviceArena + b.offset(), b.size_bytes()));
    bytes = scanCopy.data();
  }
  int64_t n = numElements(bufferShape(b));
  if (b.dtype() == plan::BF16) {
    const auto *bits = static_cast<const uint16_t *>(bytes);
    return nanOnly ? findNanBf16(bits, n) : findNonFiniteBf16(bits, n);
  }
  const auto *values = static_cast<const float *>(bytes);
  return nanOnly ? findNan(values, n) : findNonFinite(values, n);
}

namespace {

/// `instruction 41 'softmax' (ONNX node '/h.0/attn/Softmax')`; instructions
/// loomc added (losses, optimizer updates) carry an MLIR location instead
/// of a node name, shown as it is.
std::string describeInstruction(int index, const plan::Instruction &inst) {
  std::string text =
      "instruction " + std::to_string(index) + " '" + inst.op() + "'";
  if (inst.loc().empty())
    return text;
  if (inst.loc().rfind("loc(", 0) == 0)
    return text + " (at " + inst.loc() + ")";
  return text + " (ONNX node '" + inst.loc() + "')";
}

std::string stepPrefix(int64_t step) {
  return "step " + std::to_string(step + 1) + ": ";
}

const char *roleName(plan::Role role) {
  switch (role) {
  case plan::PARAMETER:
    return "parameter";
  case plan::OPTIMIZER_STATE:
    return "optimizer state";
  case plan::RUNNING_STAT:
    return "running statistic";
  default:
    return "constant";
  }
}

} // namespace

Status Executor::checkStoredValues(int64_t step) {
  auto stored = [&](const plan::Buffer &b, const NonFinite &hit) {
    return NumericsFault{0, stepPrefix(step) + roleName(b.role()) +
                                " buffer '" + b.name() + "' holds " +
                                nonFiniteName(hit) + " at element " +
                                std::to_string(hit.index) +
                                " before the first instruction (its initial "
                                "value)"};
  };
  // Constants never change: which of them hold infinities (masks) is found
  // once; a NaN in one is a fault.
  if (!constantInf) {
    std::vector<char> inf(theProgram->buffers_size(), 0);
    for (int i = 0; i < theProgram->buffers_size(); ++i) {
      const plan::Buffer &b = theProgram->buffers(i);
      if (b.role() != plan::CONSTANT ||
          (b.dtype() != plan::F32 && b.dtype() != plan::BF16))
        continue;
      LOOM_ASSIGN_OR_RETURN(std::optional<NonFinite> nan, scanBuffer(b, true));
      if (nan) {
        fault = stored(b, *nan);
        return Status::ok();
      }
      LOOM_ASSIGN_OR_RETURN(std::optional<NonFinite> hit, scanBuffer(b));
      inf[i] = hit.has_value();
    }
    constantInf = std::move(inf);
  }
  // Later steps only see values that checked instructions wrote.
  if (ranAStep)
    return Status::ok();
  for (const plan::Buffer &b : theProgram->buffers()) {
    if ((b.role() != plan::PARAMETER && b.role() != plan::OPTIMIZER_STATE &&
         b.role() != plan::RUNNING_STAT) ||
        (b.dtype() != plan::F32 && b.dtype() != plan::BF16))
      continue;
    LOOM_ASSIGN_OR_RETURN(std::optional<NonFinite> hit, scanBuffer(b));
    if (hit) {
      fault = stored(b, *hit);
      break;
    }
  }
  return Status::ok();
}

Status Executor::runCallsChecked(const StepContext &ctx) {
  fault.reset();
  LOOM_RETURN_IF_ERROR(checkStoredValues(ctx.step));
  // Outputs are marked as they are written; the constants keep theirs.
  if (constantInf)
    stepInf = *constantInf;
  else
    stepInf.assign(theProgram->buffers_size(), 0);
  for (size_t c = 0; c < calls.size(); ++c) {
    const Call &call = calls[c];
    LOOM_RETURN_IF_ERROR(runCall(call, ctx));
    // A device reports its kernels' data checks here, before their outputs
    // are read as numbers.
    if (theDevice)
      LOOM_RETURN_IF_ERROR(
          theDevice->synchronize().withContext(where(call.index)));
    if (fault)
      continue;
    const FloatOperands &operands = floatOperands[c];
    bool readsInf = false;
    for (int i : operands.inputs)
      readsInf |= stepInf[i] != 0;
    for (int o : operands.outputs) {
      const plan::Buffer &b = theProgram->buffers(o);
      StatusOr<std::optional<NonFinite>> hit = scanBuffer(b);
      // An infinity that flows from a mask is the mask's; NaN is not.
      bool maskInf = false;
      if (hit.isOk() && *hit && !(*hit)->nan && readsInf) {
        hit = scanBuffer(b, true);
        maskInf = hit.isOk() && !*hit;
      }
      if (!hit.isOk())
        return hit.status().withContext(where(call.index));
      stepInf[o] = maskInf;
      if (!*hit)
        continue;
      fault = NumericsFault{
          call.index + 1,
          stepPrefix(ctx.step) +
              describeInstruction(call.index,
                                  theProgram->instructions(call.index)) +
              " wrote " + nonFiniteName(**hit) + " to buffer '" + b.name() +
              "' at element " + std::to_string((*hit)->index)};
      break;
    }
  }
  return Status::ok();
}

void Executor::printProfile() const {
  if (profile->steps == 0)
    return;
  bool skipFirst = profile->steps > 1;
  const std::vector<double> &secs =
      skipFirst ? profile->seconds : profile->firstStep;
  double steps = static_cast<double>(skipFirst ? profile->steps - 1 : 1);
  struct Row {
    std::string name;
    int count = 0;
    double seconds = 0;
  };
  std::map<std::string, Row> byOp;
  double total = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const plan::Instruction &inst = theProgram->instructions(calls[i].index);
    Row &row = byOp[inst.op()];
    row.name = inst.op();
    ++row.count;
    row.seconds += secs[i];
    total += secs[i];
  }
  std::vector<Row> rows;
  for (auto &kv : byOp)
    rows.push_back(kv.second);
  std::sort(rows.begin(), rows.end(),
            [](const Row &a, const Row &b) { return a.seconds > b.seconds; });
  std::fprintf(stderr,
               "loom profile: rank %d, %.0f step(s)%s, %.3f ms/step in "
               "kernels\n  %-22s %6s %10s %10s %6s\n",
               myRank, steps, skipFirst ? " after the first" : "",
               total / steps * 1e3, "op", "calls", "ms/step", "us/call",
               "%");
  for (const Row &r : rows)
    std::fprintf(stderr, "  %-22s %6d %10.3f %10.1f %5.1f%%\n", r.name.c_str(),
                 r.count, r.seconds / steps * 1e3,
                 r.seconds / steps / r.count * 1e6,
                 total > 0 ? 100 * r.seconds / total : 0.0);
  // The most expensive single instructions, with their output shapes.
  std::vector<size_t> order(calls.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return secs[a] > secs[b]; });
  std::map<int32_t, const plan::Buffer *> byId;
  for (const plan::Buffer &b : theProgram->buffers())
    byId[b.id()] = &b;
  size_t shown = profile->allInstructions ? order.size()
                                          : std::min<size_t>(order.size(), 15);
  std::fprintf(stderr, "  %s instructions:\n",
               profile->allInstructions ? "all" : "top");
  for (size_t j = 0; j < shown; ++j) {
    size_t i = order[j];
    const plan::Instruction &inst = theProgram->instructions(calls[i].index);
    std::string shapes;
    for (int32_t id : inst.inputs()) {
      auto it = byId.find(id);
      if (it != byId.end())
        shapes += (shapes.empty() ? "" : ",") + shapeToString(bufferShape(*it->second));
    }
    std::fprintf(stderr, "  %10.3f ms  #%-4d %-18s %-30s %s\n",
                 secs[i] / steps * 1e3, calls[i].index, inst.op().c_str(),
                 inst.loc().c_str(), shapes.c_str());
  }
}

const plan::Buffer *Executor::findBuffer(int32_t id) const {
  for (const plan::Buffer &b : theProgram->buffers())
    if (b.id() == id)
      return &b;
  return nullptr;
}

const plan::Buffer *
Executor::findBufferByName(const std::string &name) const {
  for (const plan::Buffer &b : theProgram->buffers())
    if (b.name() == name)
      return &b;
  return nullptr;
}

std::vector<const plan::Buffer *>
Executor::findBound(plan::Role role, const std::string &binding) const {
  std::vector<const plan::Buffer *> found;
  for (const plan::Buffer &b : theProgram->buffers())
    if (b.role() == role && b.binding() == binding)
      found.push_back(&b);
  return found;
}

HostTensor Executor::readBuffer(const plan::Buffer &b) const {
  HostTensor t(b.dtype() == plan::I64 ? ElemType::I64 : ElemType::F32,
               bufferShape(b));
  if (theDevice) {
    // A failed copy leaves NaNs rather than stale host bytes; the next
    // synchronize reports the device error.
    Status s = theDevice->download(t.bytes.data(), deviceArena + b.offset(),
                                   b.size_bytes());
    if (!s.isOk() && t.type == ElemType::F32)
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<float>()[i] = NAN;
    return t;
  }
  if (b.size_bytes() > 0) // a buffer of no bytes has no address
    std::memcpy(t.bytes.data(), bufferData(b), b.size_bytes());
  return t;
}

Status Executor::writeBuffer(const plan::Buffer &b, const HostTensor &value) {
  int64_t n = numElements(bufferShape(b));
  if (value.numel() != n)
    return makeError("buffer '%s' has shape %s but the value has shape %s",
                     b.name().c_str(), shapeToString(bufferShape(b)).c_str(),
                     shapeToString(value.shape).c_str());
  uint8_t *dst = bufferData(b);
  // Any float, integer or bool value fills an f32 buffer (bools as 0/1);
  // only integers and bools fill an i64 one.
  ElemType type = b.dtype() == plan::F32 ? ElemType::F32 : ElemType::I64;
  if (type == ElemType::I64 && isFloatType(value.type))
    return makeError("buffer '%s' is i64 but the value is %s",
                     b.name().c_str(), elemTypeName(value.type));
  if (value.type == type) {
    if (n > 0)
      std::memcpy(dst, value.bytes.data(), n * elemSize(type));
  } else {
    HostTensor converted = convertElements(value, type);
    if (n > 0)
      std::memcpy(dst, converted.bytes.data(), n * elemSize(type));
  }
  return uploadBuffer(b);
}

Status Executor::uploadBuffer(const plan::Buffer &b) {
  if (!theDevice)
    return Status::ok();
  return theDevice->upload(deviceArena + b.offset(), bufferData(b),
                           b.size_bytes());
}

StatusOr<float> Executor::loss() const {
  const plan::Buffer *b = findBuffer(theProgram->loss_buffer());
  if (theProgram->loss_buffer() < 0 || !b || b->role() != plan::LOSS)
    return makeError("%s: rank %d's program has no loss buffer",
                     planPath.c_str(), myRank);
  float value;
  std::memcpy(&value, bufferData(*b), sizeof(float));
  return value;
}

} // namespace loom::runtime
