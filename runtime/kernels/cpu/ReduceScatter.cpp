//===- ReduceScatter.cpp - reduce_scatter: a block of the sum ---*- C++ -*-===//
//
// `y` is block `k` along `axis` of the sum over the group of mesh axes
// `axes` of `x`, `k` this rank's index in the group (upstream
// `shard.reduce_scatter`, `reduction` sum); f32 (bf16 buffers run widened,
// runtime/kernels/cpu/Bf16.h). Along a dim other than the first, `x` is
// packed into its blocks first (Collective.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/PlanFormat.h"
#include "runtime/kernels/cpu/Collective.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/support/HostTensor.h"

namespace loom::runtime::cpu {

Status verifyReduceScatter(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_ASSIGN_OR_RETURN(std::string reduction, op.strAttr("reduction", "sum"));
  if (reduction != "sum")
    return makeError("reduction '%s' is not supported (only 'sum')",
                     reduction.c_str());
  LOOM_ASSIGN_OR_RETURN(CollectiveGroup group, collectiveGroup(op));
  std::vector<int64_t> in = op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(int64_t axis,
                        tensorDimAttr(op, "axis", int64_t(in.size())));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  if (in[axis] % group.size != 0)
    return makeError("axis %lld of input %s does not split evenly over the "
                     "%lld ranks of mesh axes %s",
                     (long long)axis, shapeToString(in).c_str(),
                     (long long)group.size, shapeToString(group.axes).c_str());
  std::vector<int64_t> expected = in;
  expected[axis] /= group.size;
  if (op.outShape(0) != expected)
    return makeError("output %s is not input %s scattered along axis %lld "
                     "over the %lld ranks of mesh axes %s (that is %s)",
                     shapeToString(op.outShape(0)).c_str(),
                     shapeToString(in).c_str(), (long long)axis,
                     (long long)group.size, shapeToString(group.axes).c_str(),
                     shapeToString(expected).c_str());
  return Status::ok();
}

StatusOr<CollectivePlan> reduceScatterPlan(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(CollectiveGroup group, collectiveGroup(op));
  LOOM_ASSIGN_OR_RETURN(Communicator * comm, groupCommunicator(ctx, group));
  std::vector<int64_t> in = op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(int64_t axis,
                        tensorDimAttr(op, "axis", int64_t(in.size())));
  int64_t elemBytes = int64_t(sizeof(float));
  CollectivePlan plan;
  plan.kind = CollectiveKind::ReduceScatter;
  plan.comm = comm;
  plan.x = ctx.bytes(op.inputs[0]);
  plan.y = ctx.bytes(op.outputs[0]);
  plan.bytesPerRank = op.outNumel(0) * elemBytes;
  plan.in = blockSplit(in, axis, group.size, elemBytes);
  plan.out = BlockSplit{1, 1, plan.bytesPerRank};
  return plan;
}

StatusOr<KernelFn> bindReduceScatter(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(CollectivePlan plan, reduceScatterPlan(op, ctx));
  return hostCollective(plan, ctx);
}

} // namespace loom::runtime::cpu
