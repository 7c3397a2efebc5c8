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

Status checkBindingData(const plan::Plan &plan, const std::string &binding,
                        const HostTensor &data) {
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
      bool ok = b.dtype() == plan::F32
                    ? (data.type == ElemType::F32 || data.type == ElemType::F64)
                    : (data.type == ElemType::I64 || data.type == ElemType::I32);
      if (!ok)
        return makeError("data for '%s' is %s but the plan's buffer '%s' is "
                         "%s; save it as %s",
                         binding.c_str(), elemTypeName(data.type),
                         b.name().c_str(), dtypeName(b.dtype()),
                         b.dtype() == plan::F32 ? "float32" : "int64 (or "
                                                              "int32)");
      int64_t classes = crossEntropyClasses(program, b);
      if (classes > 0) {
        for (int64_t i = 0, n = data.numel(); i < n; ++i) {
          int64_t v = data.type == ElemType::I64 ? data.data<int64_t>()[i]
                                                 : data.data<int32_t>()[i];
          if (v < 0 || v >= classes)
            return makeError("data for '%s' holds class id %lld at element "
                             "%lld, outside [0, %lld)",
                             binding.c_str(), (long long)v, (long long)i,
                             (long long)classes);
        }
      }
    }
  }
  if (!found)
    return makeError("the plan has no input or target named '%s'",
                     binding.c_str());
  return Status::ok();
}

Status checkPlanData(const plan::Plan &plan,
                     const std::map<std::string, HostTensor> &data) {
  std::set<std::string> names = dataBindings(plan);
  std::string known;
  for (const std::string &n : names)
    known += (known.empty() ? "" : ", ") + n;
  for (const auto &kv : data)
    if (!names.count(kv.first))
      return makeError("--data '%s' is not an input or target of the plan "
                       "(it expects: %s)",
                       kv.first.c_str(), known.c_str());
  for (const std::string &n : names)
    if (!data.count(n))
      return makeError("no data for '%s'; pass --data %s=FILE.npy",
                       n.c_str(), n.c_str());
  for (const auto &kv : data)
    LOOM_RETURN_IF_ERROR(checkBindingData(plan, kv.first, kv.second));
  return Status::ok();
}

int64_t firstSample(const plan::Plan &plan, const plan::Buffer &b,
                    int64_t step, int rank) {
  // A dp rank's share is global_batch / dp samples; a buffer holds all of
  // it, or one micro-batch of it from `sample_offset` on.
  int64_t share = plan.training().global_batch() / meshAxisSize(plan, "dp");
  return step * plan.training().global_batch() +
         meshCoordinate(plan, rank, "dp") * share + b.sample_offset();
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

void feedSamples(const plan::Plan &plan, const plan::Buffer &b,
                 const HostTensor &data, int64_t step, int rank,
                 uint8_t *dst) {
  int64_t len = data.shape[0];
  int64_t perSample = data.numel() / len;
  int64_t count = b.shape(0);
  int64_t start = firstSample(plan, b, step, rank) % len;
  int64_t srcElem = elemSize(data.type);
  for (int64_t s = 0; s < count; ++s) {
    int64_t src = (start + s) % len;
    const uint8_t *from = data.bytes.data() + src * perSample * srcElem;
    if (b.dtype() == plan::F32) {
      float *to = reinterpret_cast<float *>(dst) + s * perSample;
      if (data.type == ElemType::F32)
        std::memcpy(to, from, perSample * sizeof(float));
      else
        for (int64_t i = 0; i < perSample; ++i)
          to[i] = static_cast<float>(reinterpret_cast<const double *>(from)[i]);
    } else {
      int64_t *to = reinterpret_cast<int64_t *>(dst) + s * perSample;
      if (data.type == ElemType::I64)
        std::memcpy(to, from, perSample * sizeof(int64_t));
      else
        for (int64_t i = 0; i < perSample; ++i)
          to[i] = reinterpret_cast<const int32_t *>(from)[i];
    }
  }
}

} // namespace loom::runtime
