//===- AllReduce.cpp - all_reduce over mesh axes -----------------*- C++ -*-===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/InFlightBuckets.h"
#include "runtime/kernels/cpu/Collective.h"
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

namespace {

/// A bucket instruction's checks: one f32 buffer reduced in place, and its
/// bucket id.
StatusOr<int64_t> verifyBucket(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  if (op.inputs[0]->id() != op.outputs[0]->id())
    return makeError("a bucket is reduced in place: input buffer %d and "
                     "output buffer %d must be one",
                     op.inputs[0]->id(), op.outputs[0]->id());
  LOOM_ASSIGN_OR_RETURN(int64_t bucket, intAttr(op, "bucket"));
  if (bucket < 0)
    return makeError("bucket must be non-negative, got %lld",
                     (long long)bucket);
  return bucket;
}

} // namespace

Status verifyAllReduceStart(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifyBucket(op).status());
  LOOM_RETURN_IF_ERROR(sortedAxes(op).status());
  LOOM_ASSIGN_OR_RETURN(std::string reduction, op.strAttr("reduction", "sum"));
  if (reduction != "sum")
    return makeError("reduction '%s' is not supported (only 'sum')",
                     reduction.c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindAllReduceStart(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(int64_t bucket, verifyBucket(op));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, sortedAxes(op));
  Communicator *comm = ctx.commForAxes(axes);
  if (!comm)
    return makeError("no communicator for the requested mesh axes");
  LOOM_ASSIGN_OR_RETURN(InFlightBuckets * buckets, inFlightBucketsOf(ctx));
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  return KernelFn([=](const StepContext &) -> Status {
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> pending,
                          comm->startAllReduceSum(y, n));
    return buckets->put(bucket, std::move(pending));
  });
}

Status verifyAllReduceWait(const OpView &op) {
  return verifyBucket(op).status();
}

StatusOr<KernelFn> bindAllReduceWait(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(int64_t bucket, verifyBucket(op));
  LOOM_ASSIGN_OR_RETURN(InFlightBuckets * buckets, inFlightBucketsOf(ctx));
  return KernelFn(
      [=](const StepContext &) { return buckets->wait(bucket); });
}

} // namespace loom::runtime::cpu
