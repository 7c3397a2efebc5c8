//===- OpView.cpp - Operand and attribute access for kernels -----*- C++ -*-===//

#include "runtime/Plan.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/support/HostTensor.h"

namespace loom::runtime {

std::vector<int64_t> OpView::inShape(size_t i) const {
  return bufferShape(*inputs[i]);
}
std::vector<int64_t> OpView::outShape(size_t i) const {
  return bufferShape(*outputs[i]);
}
int64_t OpView::inNumel(size_t i) const { return numElements(inShape(i)); }
int64_t OpView::outNumel(size_t i) const { return numElements(outShape(i)); }

StatusOr<double> OpView::numAttr(const std::string &name,
                                 std::optional<double> dflt) const {
  auto it = inst.attrs().find(name);
  if (it == inst.attrs().end()) {
    if (dflt)
      return *dflt;
    return makeError("missing attribute '%s'", name.c_str());
  }
  if (it->second.value_case() == plan::Attr::kF)
    return it->second.f();
  if (it->second.value_case() == plan::Attr::kI)
    return static_cast<double>(it->second.i());
  return makeError("attribute '%s' must be a number", name.c_str());
}

StatusOr<std::string>
OpView::strAttr(const std::string &name,
                std::optional<std::string> dflt) const {
  auto it = inst.attrs().find(name);
  if (it == inst.attrs().end()) {
    if (dflt)
      return *dflt;
    return makeError("missing attribute '%s'", name.c_str());
  }
  if (it->second.value_case() != plan::Attr::kS)
    return makeError("attribute '%s' must be a string", name.c_str());
  return it->second.s();
}

StatusOr<std::vector<int64_t>>
OpView::intsAttr(const std::string &name) const {
  auto it = inst.attrs().find(name);
  if (it == inst.attrs().end())
    return makeError("missing attribute '%s'", name.c_str());
  if (it->second.value_case() != plan::Attr::kInts)
    return makeError("attribute '%s' must be a list of integers",
                     name.c_str());
  const auto &values = it->second.ints().values();
  return std::vector<int64_t>(values.begin(), values.end());
}

Status OpView::expectAllDType(plan::DType dtype) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->dtype() != dtype)
      return makeError("input %zu (buffer %d '%s') is %s, expected %s", i,
                       inputs[i]->id(), inputs[i]->name().c_str(),
                       dtypeName(inputs[i]->dtype()), dtypeName(dtype));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i]->dtype() != dtype)
      return makeError("output %zu (buffer %d '%s') is %s, expected %s", i,
                       outputs[i]->id(), outputs[i]->name().c_str(),
                       dtypeName(outputs[i]->dtype()), dtypeName(dtype));
  return Status::ok();
}

Status OpView::expectNotInPlace() const {
  for (const plan::Buffer *out : outputs)
    for (const plan::Buffer *in : inputs)
      if (out->id() == in->id())
        return makeError("output buffer %d '%s' is also an input; this op "
                         "cannot run in place",
                         out->id(), out->name().c_str());
  return Status::ok();
}

} // namespace loom::runtime
