//===- AllGather.cpp - all_gather: every rank's x, concatenated -*- C++ -*-===//
//
// `y` is the concatenation along `axis` of the `x` of every rank of the
// group of mesh axes `axes`, in group order (upstream `shard.all_gather`);
// any element type. The communicator gathers whole `x`s; along a dim other
// than the first, they are unpacked into `y`'s rows (Collective.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/PlanFormat.h"
#include "runtime/kernels/cpu/Collective.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/support/HostTensor.h"

namespace loom::runtime::cpu {

Status verifyAllGather(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(CollectiveGroup group, collectiveGroup(op));
  std::vector<int64_t> in = op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(int64_t axis,
                        tensorDimAttr(op, "axis", int64_t(in.size())));
  LOOM_RETURN_IF_ERROR(expectSameTypeNotInPlace(op));
  std::vector<int64_t> expected = in;
  expected[axis] *= group.size;
  if (op.outShape(0) != expected)
    return makeError("output %s is not input %s gathered along axis %lld "
                     "over the %lld ranks of mesh axes %s (that is %s)",
                     shapeToString(op.outShape(0)).c_str(),
                     shapeToString(in).c_str(), (long long)axis,
                     (long long)group.size, shapeToString(group.axes).c_str(),
                     shapeToString(expected).c_str());
  return Status::ok();
}

StatusOr<CollectivePlan> allGatherPlan(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(CollectiveGroup group, collectiveGroup(op));
  LOOM_ASSIGN_OR_RETURN(Communicator * comm, groupCommunicator(ctx, group));
  LOOM_ASSIGN_OR_RETURN(
      int64_t axis, tensorDimAttr(op, "axis", int64_t(op.inShape(0).size())));
  int64_t elemBytes = dtypeSize(op.inputs[0]->dtype());
  CollectivePlan plan;
  plan.kind = CollectiveKind::AllGather;
  plan.comm = comm;
  plan.x = ctx.bytes(op.inputs[0]);
  plan.y = ctx.bytes(op.outputs[0]);
  plan.bytesPerRank = op.inNumel(0) * elemBytes;
  plan.in = BlockSplit{1, 1, plan.bytesPerRank};
  plan.out = blockSplit(op.outShape(0), axis, group.size, elemBytes);
  return plan;
}

StatusOr<KernelFn> bindAllGather(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(CollectivePlan plan, allGatherPlan(op, ctx));
  return hostCollective(plan, ctx);
}

} // namespace loom::runtime::cpu
