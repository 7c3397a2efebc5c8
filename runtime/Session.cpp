//===- Session.cpp - The in-process training API -----------------*- C++ -*-===//

#include "runtime/Session.h"

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
  LOOM_RETURN_IF_ERROR(checkBindingData(*thePlan, binding, value));
  data[binding] = std::move(value);
  return Status::ok();
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
  dataFault.reset();
  for (const plan::Buffer &b : exec->program().buffers()) {
    if (b.role() != plan::INPUT && b.role() != plan::TARGET)
      continue;
    auto it = data.find(b.binding());
    if (it == data.end())
      continue;
    uint8_t *dst = exec->bufferData(b);
    feedSamples(*thePlan, b, it->second, step, exec->rank(), dst);
    if (!checkNumerics || dataFault || b.dtype() != plan::F32)
      continue;
    // The fed copy is scanned (f64 data is rounded to f32 on the way, and a
    // huge value becomes inf there).
    int64_t perSample = numElements(bufferShape(b)) / b.shape(0);
    if (std::optional<NonFinite> hit = findNonFinite(
            reinterpret_cast<const float *>(dst), numElements(bufferShape(b)))) {
      int64_t sample = (firstSample(*thePlan, b, step, exec->rank()) +
                        hit->index / perSample) %
                       it->second.shape[0];
      dataFault = NumericsFault{
          0, "step " + std::to_string(step + 1) + ": the data '" +
                 b.binding() + "' has " + nonFiniteName(*hit) +
                 " in sample " + std::to_string(sample) + " (element " +
                 std::to_string(hit->index % perSample) + " of the sample)"};
    }
  }
  return exec->runStep(step);
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
  int64_t batch = thePlan->training().global_batch();
  int64_t first = step * batch;
  int64_t length = data.begin()->second.shape[0];
  bool sameLength = true;
  for (const auto &kv : data)
    sameLength &= kv.second.shape[0] == length;
  if (sameLength)
    return sampleRangeText(first, batch, length) + " of the data";
  std::string text;
  for (const auto &[binding, array] : data)
    text += (text.empty() ? "" : ", ") +
            sampleRangeText(first, batch, array.shape[0]) + " of '" +
            binding + "'";
  return text;
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

std::map<std::string, HostTensor> Session::outputs() const {
  std::map<std::string, HostTensor> out;
  for (const plan::Buffer &b : exec->program().buffers())
    if (b.role() == plan::OUTPUT)
      out[b.binding()] = exec->readBuffer(b);
  return out;
}

StatusOr<std::map<std::string, HostTensor>> Session::parameters() const {
  std::map<std::string, HostTensor> params;
  for (const plan::Buffer &b : exec->program().buffers()) {
    if (b.role() != plan::PARAMETER)
      continue;
    std::string name = !b.binding().empty()          ? b.binding()
                       : !b.onnx_initializer().empty() ? b.onnx_initializer()
                                                       : b.name();
    if (b.global_shape_size() != 0 &&
        !std::equal(b.global_shape().begin(), b.global_shape().end(),
                    b.shape().begin(), b.shape().end()))
      return makeError("parameter '%s' is sharded (%s of %s); gathering "
                       "sharded parameters is not supported yet",
                       name.c_str(), shapeToString(bufferShape(b)).c_str(),
                       shapeToString({b.global_shape().begin(),
                                      b.global_shape().end()})
                           .c_str());
    params[name] = exec->readBuffer(b);
  }
  return params;
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
  // Running statistics are the same on every rank: the global batch's
  // statistics update them (with --local-batchnorm too).
  for (auto &[name, value] : runningStats())
    params[name] = std::move(value);
  return exportOnnxWithWeights(thePlan->model_path(), params, outPath);
}

} // namespace loom::runtime
