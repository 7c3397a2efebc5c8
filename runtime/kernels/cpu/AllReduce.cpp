//===- AllReduce.cpp - all_reduce over mesh axes -----------------*- C++ -*-===//

#include "runtime/comm/Communicator.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <cstring>

namespace loom::runtime::cpu {

namespace {

StatusOr<std::vector<int64_t>> sortedAxes(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  int64_t rank = std::max(op.plan.mesh_size(), 1);
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return makeError("mesh axis %lld does not exist (the mesh has %lld "
                       "axes)",
                       (long long)axes[i], (long long)rank);
    if (i && axes[i] == axes[i - 1])
      return makeError("mesh axis %lld is listed twice", (long long)axes[i]);
  }
  return axes;
}

} // namespace

Status verifyAllReduce(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(sortedAxes(op).status());
  LOOM_ASSIGN_OR_RETURN(std::string reduction, op.strAttr("reduction", "sum"));
  if (reduction != "sum")
    return makeError("reduction '%s' is not supported (only 'sum')",
                     reduction.c_str());
  if (op.inShape(0) != op.outShape(0))
    return makeError("input %s and output %s differ in shape",
                     shapeToString(op.inShape(0)).c_str(),
                     shapeToString(op.outShape(0)).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindAllReduce(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, sortedAxes(op));
  Communicator *comm = ctx.commForAxes(axes);
  if (!comm)
    return makeError("no communicator for the requested mesh axes");
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  return KernelFn([=](const StepContext &) {
    if (x != y)
      std::memmove(y, x, n * sizeof(float));
    return comm->allReduceSum(y, n);
  });
}

} // namespace loom::runtime::cpu
