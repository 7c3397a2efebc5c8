//===- DataFeeder.cpp - Slice data files into INPUT/TARGET buffers -*- C++ -*-===//

#include "runtime/data/DataFeeder.h"

#include "runtime/Plan.h"

#include <cstring>

namespace loom::runtime {

std::set<std::string> dataBindings(const plan::Plan &plan) {
  std::set<std::string> names;
  for (const plan::Program &program : plan.programs())
    for (const plan::Buffer &b : program.buffers())
      if (b.role() == plan::INPUT || b.role() == plan::TARGET)
        names.insert(b.binding());
  return names;
}

int64_t crossEntropyClasses(const plan::Program &program,
                            const plan::Buffer &b) {
  for (const plan::Instruction &inst : program.instructions()) {
    if ((inst.op() != "cross_entropy" && inst.op() != "cross_entropy_grad") ||
        inst.inputs_size() != 2 || inst.inputs(1) != b.id())
      continue;
    for (const plan::Buffer &logits : program.buffers())
      if (logits.id() == inst.inputs(0) && logits.shape_size() > 0)
        return logits.shape(logits.shape_size() - 1);
  }
  return 0;
}

int64_t planClasses(const plan::Plan &plan) {
  // The target may reach the loss through ops of the plan (a sequence-
  // parallel slice): the loss's logits say the classes.
  for (const plan::Program &program : plan.programs())
    for (const plan::Instruction &inst : program.instructions()) {
      if (inst.op() != "cross_entropy" || inst.inputs_size() != 2)
        continue;
      for (const plan::Buffer &logits : program.buffers())
        if (logits.id() == inst.inputs(0) && logits.shape_size() > 0)
          return logits.shape(logits.shape_size() - 1);
    }
  return 0;
}

Status checkBindingData(const plan::Plan &plan, const std::string &binding,
                        const SampleArray &data) {
  bool found = false;
  for (const plan::Program &program : plan.programs()) {
    for (const plan::Buffer &b : program.buffers()) {
      if ((b.role() != plan::INPUT && b.role() != plan::TARGET) ||
          b.binding() != binding)
        continue;
      found = true;
      std::vector<int64_t> want(b.shape().begin() + 1, b.shape().end());
      if (data.shape.empty() || data.shape[0] < 1)
        return makeError("data for '%s' has shape %s; it needs a sample "
                         "dimension with at least one sample",
                         binding.c_str(), shapeToString(data.shape).c_str());
      std::vector<int64_t> have(data.shape.begin() + 1, data.shape.end());
      if (have != want) {
        std::string expect = "[N";
        for (int64_t d : want)
          expect += ", " + std::to_string(d);
        return makeError("data for '%s' has shape %s; the plan expects %s "
                         "(N samples)",
                         binding.c_str(), shapeToString(data.shape).c_str(),
                         (expect + "]").c_str());
      }
      if (b.dtype() != plan::F32 && b.dtype() != plan::I64)
        return makeError("the plan's buffer '%s' for '%s' is %s; data feeds "
                         "f32 and i64 buffers only",
                         b.name().c_str(), binding.c_str(),
                         dtypeName(b.dtype()));
    }
  }
  if (!found)
    return makeError("the plan has no input or target named '%s'",
                     binding.c_str());
  return Status::ok();
}

Status checkPlanData(const plan::Plan &plan,
                     const std::map<std::string, SampleArray> &data,
                     const char *flag) {
  std::set<std::string> names = dataBindings(plan);
  std::string known;
  for (const std::string &n : names)
    known += (known.empty() ? "" : ", ") + n;
  for (const auto &kv : data)
    if (!names.count(kv.first))
      return makeError("%s '%s' is not an input or target of the plan "
                       "(it expects: %s)",
                       flag, kv.first.c_str(), known.c_str());
  for (const std::string &n : names)
    if (!data.count(n))
      return makeError("no data for '%s'; pass %s %s=FILE.npy", n.c_str(),
                       flag, n.c_str());
  for (const auto &kv : data)
    LOOM_RETURN_IF_ERROR(checkBindingData(plan, kv.first, kv.second));
  const auto &[firstName, first] = *data.begin();
  for (const auto &[name, array] : data)
    LOOM_RETURN_IF_ERROR(sameSamples(firstName, first, name, array));
  return Status::ok();
}

Status sameSamples(const std::string &bindingA, const SampleArray &a,
                   const std::string &bindingB, const SampleArray &b) {
  if (a.samples() == b.samples())
    return Status::ok();
  return makeError("%s holds %lld sample(s) for '%s' but %s holds %lld for "
                   "'%s'; every input and the target need the same number, "
                   "sample k of each being one example",
                   a.name.c_str(), (long long)a.samples(), bindingA.c_str(),
                   b.name.c_str(), (long long)b.samples(), bindingB.c_str());
}

int64_t firstSample(const plan::Plan &plan, const plan::Buffer &b, int64_t step,
                    int rank) {
  // A dp rank's share is global_batch / dp samples; a buffer holds all of
  // it, or one micro-batch of it from `sample_offset` on.
  int64_t share = plan.training().global_batch() / meshAxisSize(plan, "dp");
  int64_t first = 0, within = 0;
  if (__builtin_mul_overflow(step, plan.training().global_batch(), &first) ||
      __builtin_mul_overflow(meshCoordinate(plan, rank, "dp"), share,
                             &within) ||
      __builtin_add_overflow(first, within, &first) ||
      __builtin_add_overflow(first, b.sample_offset(), &first))
    return -1;
  return first;
}

std::string sampleRangeText(int64_t first, int64_t count, int64_t length) {
  if (count >= length)
    return length == 1 ? "sample 0"
                       : "samples 0.." + std::to_string(length - 1);
  int64_t start = first % length;
  int64_t end = start + count - 1; // inclusive
  auto range = [](int64_t a, int64_t b) {
    return a == b ? std::to_string(a)
                  : std::to_string(a) + ".." + std::to_string(b);
  };
  if (count == 1)
    return "sample " + std::to_string(start);
  if (end < length)
    return "samples " + range(start, end);
  return "samples " + range(start, length - 1) + ", " + range(0, end - length);
}

Status feedSamples(const plan::Plan &plan, const plan::Buffer &b,
                   const SampleArray &data, const SampleOrder &order,
                   int64_t step, int rank, uint8_t *dst, int64_t limit) {
  int64_t n = data.samples();
  int64_t count = b.shape(0);
  int64_t sampleBytes = data.perSample() * dtypeSize(b.dtype());
  int64_t first = firstSample(plan, b, step, rank);
  if (first < 0 || first > INT64_MAX - count)
    return makeError("%s: the data position of step %lld is beyond 2^63",
                     data.name.c_str(), (long long)step + 1);
  const char *what = data.firstToken >= 0 ? "token" : "class id";
  for (int64_t s = 0; s < count; ++s)
    LOOM_RETURN_IF_ERROR(copySample(data, order.sample(first + s, n), b.dtype(),
                                    dst + s * sampleBytes, limit, what));
  return Status::ok();
}

} // namespace loom::runtime
