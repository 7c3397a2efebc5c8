//===- OpView.cpp - An instruction, operands resolved -----------*- C++ -*-===//

#include "runtime/OpView.h"
#include "runtime/PlanFormat.h"
#include "runtime/support/HostTensor.h"

#include <cmath>

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

StatusOr<std::string> OpView::strAttr(const std::string &name,
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

StatusOr<std::vector<int64_t>> OpView::intsAttr(const std::string &name) const {
  auto it = inst.attrs().find(name);
  if (it == inst.attrs().end())
    return makeError("missing attribute '%s'", name.c_str());
  if (it->second.value_case() != plan::Attr::kInts)
    return makeError("attribute '%s' must be a list of integers", name.c_str());
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

StatusOr<bool> flagAttr(const OpView &op, const char *name) {
  LOOM_ASSIGN_OR_RETURN(double v, op.numAttr(name, 0.0));
  if (v != 0 && v != 1)
    return makeError("attribute '%s' must be 0 or 1, got %g", name, v);
  return v == 1;
}

StatusOr<int64_t> intAttr(const OpView &op, const char *name) {
  LOOM_ASSIGN_OR_RETURN(double v, op.numAttr(name));
  if (v != std::floor(v))
    return makeError("attribute '%s' must be an integer, got %g", name, v);
  return static_cast<int64_t>(v);
}

StatusOr<int64_t> axisAttr(const OpView &op, const char *name, int64_t rank) {
  LOOM_ASSIGN_OR_RETURN(int64_t axis, intAttr(op, name));
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return makeError("%s %lld is out of range for rank %lld", name,
                     (long long)axis, (long long)rank);
  return a;
}

StatusOr<std::vector<int64_t>> intsAttrOfSize(const OpView &op,
                                              const char *name, size_t size) {
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> v, op.intsAttr(name));
  if (v.size() != size)
    return makeError("attribute '%s' must have %zu entries, got %zu", name,
                     size, v.size());
  return v;
}

} // namespace loom::runtime
