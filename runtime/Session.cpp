//===- Session.cpp - The in-process training API -----------------*- C++ -*-===//

#include "runtime/Session.h"

#include "runtime/checkpoint/CheckpointLayout.h"

#include "runtime/ShardLayout.h"
#include "runtime/data/DataFeeder.h"
#include "runtime/onnx/OnnxWeights.h"

#include <algorithm>

namespace loom::runtime {

StatusOr<std::unique_ptr<Session>> Session::create(plan::Plan plan,
                                                   Communicator &world,
                                                   const std::string &planPath,
                                                   Device *device,
                                                   const ParameterInit &init) {
  LOOM_RETURN_IF_ERROR(validatePlan(plan, planPath));
  std::unique_ptr<Session> s(new Session());
  s->thePlan = std::make_unique<plan::Plan>(std::move(plan));
  s->planPath = planPath;
  LOOM_ASSIGN_OR_RETURN(
      s->exec, Executor::create(*s->thePlan, world, planPath, device, init));
  return s;
}

Status Session::attachData(const std::string &binding, HostTensor value) {
  return attachData(binding,
                    SampleArray::fromTensor(std::move(value),
                                            "the array for '" + binding + "'"));
}

Status Session::attachData(const std::string &binding, SampleArray value) {
  LOOM_RETURN_IF_ERROR(checkBindingData(*thePlan, binding, value));
  for (const auto &[name, array] : data)
    if (name != binding)
      LOOM_RETURN_IF_ERROR(sameSamples(binding, value, name, array));
  if (order.isShuffled() && value.mapped)
    value.mapped->adviseRandom();
  data[binding] = std::move(value);
  return Status::ok();
}

Status Session::attachValidationData(const std::string &binding,
                                     SampleArray value) {
  LOOM_RETURN_IF_ERROR(checkBindingData(*thePlan, binding, value));
  for (const auto &[name, array] : validation)
    if (name != binding)
      LOOM_RETURN_IF_ERROR(sameSamples(binding, value, name, array));
  validation[binding] = std::move(value);
  return Status::ok();
}

int64_t Session::validationSamples() const {
  return validation.empty() ? 0 : validation.begin()->second.samples();
}

Status Session::feedValidation(int64_t batch) {
  return feedFrom(validation, SampleOrder::sequential(), batch);
}

void Session::saveState() {
  saved.clear();
  for (const plan::Buffer &b : exec->program().buffers())
    if (b.role() == plan::PARAMETER || b.role() == plan::OPTIMIZER_STATE ||
        b.role() == plan::RUNNING_STAT)
      saved.emplace_back(&b, exec->readBuffer(b));
}

Status Session::restoreState() {
  for (const auto &[b, value] : saved)
    LOOM_RETURN_IF_ERROR(exec->writeBuffer(*b, value));
  return Status::ok();
}

void Session::dropSavedState() { saved.clear(); }

void Session::setSampleOrder(const SampleOrder &newOrder) {
  order = newOrder;
  if (order.isShuffled())
    for (const auto &[name, array] : data)
      if (array.mapped)
        array.mapped->adviseRandom();
}

Status Session::setInput(const std::string &binding, const HostTensor &value) {
  std::vector<const plan::Buffer *> buffers =
      exec->findBound(plan::INPUT, binding);
  for (const plan::Buffer *b : exec->findBound(plan::TARGET, binding))
    buffers.push_back(b);
  if (buffers.empty())
    return makeError("rank %d's program has no input or target named '%s'",
                     exec->rank(), binding.c_str());
  for (const plan::Buffer *b : buffers)
    LOOM_RETURN_IF_ERROR(exec->writeBuffer(*b, value));
  data.erase(binding);
  return Status::ok();
}

Status Session::runStep(int64_t step) {
  LOOM_RETURN_IF_ERROR(feed(step));
  return run(step);
}

Status Session::run(int64_t step) { return exec->runStep(step); }

Status Session::feed(int64_t step) { return feedFrom(data, order, step); }

Status Session::feedFrom(const std::map<std::string, SampleArray> &arrays,
                         const SampleOrder &order, int64_t step) {
  dataFault.reset();
  int64_t classes = -1; // found at the first buffer that needs them
  for (const plan::Buffer &b : exec->program().buffers()) {
    if (b.role() != plan::INPUT && b.role() != plan::TARGET)
      continue;
    auto it = arrays.find(b.binding());
    if (it == arrays.end())
      continue;
    const SampleArray &array = it->second;
    // Class ids are checked against the loss's classes; a token stream's
    // input ids against the same vocabulary.
    int64_t limit = 0;
    if (b.role() == plan::TARGET ||
        (array.firstToken >= 0 && b.dtype() == plan::I64))
      limit = classes < 0 ? (classes = planClasses(*thePlan)) : classes;
    uint8_t *dst = exec->bufferData(b);
    LOOM_RETURN_IF_ERROR(feedSamples(*thePlan, b, array, order, step,
                                     exec->rank(), dst, limit));
    if (!checkNumerics || dataFault || b.dtype() != plan::F32)
      continue;
    // The fed copy is scanned (f64 data is rounded to f32 on the way, and a
    // huge value becomes inf there).
    int64_t perSample = numElements(bufferShape(b)) / b.shape(0);
    if (std::optional<NonFinite> hit = findNonFinite(
            reinterpret_cast<const float *>(dst), numElements(bufferShape(b)))) {
      int64_t sample = order.sample(
          firstSample(*thePlan, b, step, exec->rank()) + hit->index / perSample,
          array.samples());
      dataFault = NumericsFault{
          0, "step " + std::to_string(step + 1) + ": the data '" +
                 b.binding() + "' has " + nonFiniteName(*hit) +
                 " in sample " + std::to_string(sample) + " (element " +
                 std::to_string(hit->index % perSample) + " of the sample)"};
    }
  }
  return Status::ok();
}

void Session::setCheckNumerics(bool on) {
  checkNumerics = on;
  dataFault.reset();
  exec->setCheckNumerics(on);
}

const std::optional<NumericsFault> &Session::numericsFault() const {
  return dataFault ? dataFault : exec->numericsFault();
}

std::string Session::stepSamples(int64_t step) const {
  if (data.empty())
    return "";
  // Every attached array holds the same number of samples.
  int64_t batch = thePlan->training().global_batch();
  int64_t first = step * batch;
  int64_t length = data.begin()->second.samples();
  if (!order.isShuffled())
    return sampleRangeText(first, batch, length) + " of the data";
  std::string text = "samples ";
  const int64_t kShown = 8;
  for (int64_t i = 0; i < std::min(batch, kShown); ++i)
    text += (i ? ", " : "") + std::to_string(order.sample(first + i, length));
  if (batch > kShown)
    text += ", ...";
  return text + " (" + std::to_string(batch) + " of epoch " +
         std::to_string(first / length) + " of the order of seed " +
         std::to_string(order.seed()) + ")";
}

StatusOr<float> Session::loss() const { return exec->loss(); }

StatusOr<HostTensor>
Session::readBuffer(const std::string &nameOrBinding) const {
  if (const plan::Buffer *b = exec->findBufferByName(nameOrBinding))
    return exec->readBuffer(*b);
  for (plan::Role role :
       {plan::PARAMETER, plan::RUNNING_STAT, plan::OUTPUT, plan::INPUT,
        plan::TARGET}) {
    auto found = exec->findBound(role, nameOrBinding);
    if (!found.empty())
      return exec->readBuffer(*found.front());
  }
  return makeError("rank %d's program has no buffer named or bound to '%s'",
                   exec->rank(), nameOrBinding.c_str());
}

/// The element type a graph input or output has outside the plan.
static ElemType boundaryType(const plan::Buffer &b) {
  switch (b.io_type()) {
  case plan::IO_BOOL:
    return ElemType::Bool;
  case plan::IO_I8:
    return ElemType::I8;
  case plan::IO_U8:
    return ElemType::U8;
  case plan::IO_I16:
    return ElemType::I16;
  case plan::IO_U16:
    return ElemType::U16;
  case plan::IO_I32:
    return ElemType::I32;
  case plan::IO_U32:
    return ElemType::U32;
  case plan::IO_U64:
    return ElemType::U64;
  case plan::IO_F16:
    return ElemType::F16;
  case plan::IO_BF16:
    return ElemType::BF16;
  case plan::IO_F64:
    return ElemType::F64;
  default:
    return b.dtype() == plan::I64 ? ElemType::I64 : ElemType::F32;
  }
}

std::map<std::string, HostTensor> Session::outputs() const {
  std::map<std::string, HostTensor> out;
  for (const plan::Buffer &b : exec->program().buffers())
    if (b.role() == plan::OUTPUT)
      out[b.binding()] = convertElements(exec->readBuffer(b), boundaryType(b));
  return out;
}

StatusOr<std::map<std::string, HostTensor>> Session::parameters() const {
  std::map<std::string, HostTensor> params;
  std::vector<int64_t> sizes = meshSizes(*thePlan);
  std::vector<int64_t> coords = meshCoordinates(exec->rank(), sizes);
  for (const plan::Buffer &b : exec->program().buffers()) {
    if (b.role() != plan::PARAMETER)
      continue;
    std::string name = exportName(b);
    if (!shardLayout(b, sizes, coords).isWhole())
      return makeError("parameter '%s' is sharded (%s of %s on rank %d); "
                       "gather it from all ranks with parameters(world)",
                       name.c_str(), shapeToString(bufferShape(b)).c_str(),
                       shapeToString(globalShape(b)).c_str(), exec->rank());
    params[name] = exec->readBuffer(b);
  }
  return params;
}

StatusOr<std::map<std::string, HostTensor>>
Session::parameters(Communicator &world) const {
  return gather(world, plan::PARAMETER);
}

StatusOr<std::map<std::string, HostTensor>>
Session::gather(Communicator &world, plan::Role role) const {
  const plan::Plan &plan = *thePlan;
  if (world.size() != plan.world_size() || world.rank() != exec->rank())
    return makeError("%s: cannot gather over rank %d of %d for a plan of %d "
                     "rank(s) run as rank %d",
                     planPath.c_str(), world.rank(), world.size(),
                     plan.world_size(), exec->rank());
  // Every rank reads the same plan, so every rank makes the same choices
  // below and calls the same broadcasts in the same order: one sender per
  // distinct shard, the lowest rank holding it (a replica is skipped; a
  // whole copy alone suffices).
  LOOM_ASSIGN_OR_RETURN(std::vector<HeldTensor> held,
                        heldTensors(plan, planPath));
  bool root = world.rank() == 0;
  std::map<std::string, HostTensor> out;
  std::vector<uint8_t> scratch;
  for (const HeldTensor &tensor : held) {
    if (tensor.key.role != role)
      continue;
    int64_t elemBytes = dtypeSize(tensor.dtype);
    HostTensor value;
    if (root)
      value = HostTensor(tensor.dtype == plan::I64 ? ElemType::I64
                                                   : ElemType::F32,
                         tensor.globalShape);
    for (const std::vector<ShardHolder> &copies : tensor.shards) {
      const ShardHolder &h = copies.front();
      if (h.rank == world.rank()) {
        HostTensor mine = exec->readBuffer(*h.buffer);
        if (root)
          copyShardToGlobal(h.layout, elemBytes, mine.bytes.data(),
                            value.bytes.data());
        else
          LOOM_RETURN_IF_ERROR(world.broadcast(
              mine.bytes.data(), h.buffer->size_bytes(), h.rank));
        continue;
      }
      if (h.rank == 0)
        continue; // only the root needs it, and it has it
      scratch.resize(h.buffer->size_bytes());
      LOOM_RETURN_IF_ERROR(
          world.broadcast(scratch.data(), h.buffer->size_bytes(), h.rank));
      if (root)
        copyShardToGlobal(h.layout, elemBytes, scratch.data(),
                          value.bytes.data());
    }
    if (root)
      out[tensor.key.name] = std::move(value);
  }
  return out;
}

std::map<std::string, HostTensor> Session::runningStats() const {
  std::map<std::string, HostTensor> stats;
  for (const plan::Buffer &b : exec->program().buffers())
    if (b.role() == plan::RUNNING_STAT)
      stats[b.binding()] = exec->readBuffer(b);
  return stats;
}

Status Session::exportOnnx(const std::string &outPath) const {
  if (thePlan->model_path().empty())
    return makeError("%s: the plan names no ONNX model to export",
                     planPath.c_str());
  LOOM_ASSIGN_OR_RETURN(auto params, parameters());
  return writeOnnx(std::move(params), runningStats(), outPath);
}

Status Session::exportOnnx(Communicator &world,
                           const std::string &outPath) const {
  if (thePlan->model_path().empty())
    return makeError("%s: the plan names no ONNX model to export",
                     planPath.c_str());
  LOOM_ASSIGN_OR_RETURN(auto params, gather(world, plan::PARAMETER));
  // Running statistics are the same on every rank unless sharded: the
  // global batch's statistics update them (with --local-batchnorm too).
  LOOM_ASSIGN_OR_RETURN(auto stats, gather(world, plan::RUNNING_STAT));
  if (world.rank() != 0)
    return Status::ok();
  return writeOnnx(std::move(params), std::move(stats), outPath);
}

Status Session::writeOnnx(std::map<std::string, HostTensor> params,
                          std::map<std::string, HostTensor> stats,
                          const std::string &outPath) const {
  // The exporter's copies of a parameter are written from it.
  for (const plan::TiedInitializer &tie : thePlan->tied_initializers()) {
    auto it = params.find(tie.parameter());
    if (it == params.end())
      return makeError("%s: initializer '%s' is tied to '%s', which is not "
                       "a parameter of the plan",
                       planPath.c_str(), tie.name().c_str(),
                       tie.parameter().c_str());
    HostTensor copy = it->second;
    if (tie.transposed()) {
      if (copy.shape.size() != 2 || copy.type != ElemType::F32)
        return makeError("%s: initializer '%s' is the transpose of '%s', "
                         "which is not a 2-D float32 tensor",
                         planPath.c_str(), tie.name().c_str(),
                         tie.parameter().c_str());
      int64_t rows = copy.shape[0], cols = copy.shape[1];
      const float *src = it->second.data<float>();
      float *dst = copy.data<float>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          dst[c * rows + r] = src[r * cols + c];
      copy.shape = {cols, rows};
    }
    params[tie.name()] = std::move(copy);
  }
  for (auto &[name, value] : stats)
    params[name] = std::move(value);
  return exportOnnxWithWeights(thePlan->model_path(), params, outPath);
}

} // namespace loom::runtime
