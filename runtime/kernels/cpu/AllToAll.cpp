//===- AllToAll.cpp - all_to_all: block j of x to group rank j --*- C++ -*-===//
//
// `x` is cut into `n` blocks along `split_axis` (`n` the size of the group
// of mesh axes `axes`); block `j` goes to the group's rank `j`, and `y` is
// the concatenation along `concat_axis` of the blocks received, in group
// order (upstream `shard.all_to_all`); any element type. `x` is packed into
// its blocks and the received blocks unpacked into `y` unless the axis is
// the first (Collective.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/PlanFormat.h"
#include "runtime/kernels/cpu/Collective.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/support/HostTensor.h"

namespace loom::runtime::cpu {

namespace {

struct AllToAllAxes {
  int64_t split, concat;
};

StatusOr<AllToAllAxes> allToAllAxes(const OpView &op) {
  int64_t rank = static_cast<int64_t>(op.inShape(0).size());
  AllToAllAxes a;
  LOOM_ASSIGN_OR_RETURN(a.split, tensorDimAttr(op, "split_axis", rank));
  LOOM_ASSIGN_OR_RETURN(a.concat, tensorDimAttr(op, "concat_axis", rank));
  return a;
}

} // namespace

Status verifyAllToAll(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(CollectiveGroup group, collectiveGroup(op));
  LOOM_ASSIGN_OR_RETURN(AllToAllAxes a, allToAllAxes(op));
  LOOM_RETURN_IF_ERROR(expectSameTypeNotInPlace(op));
  std::vector<int64_t> in = op.inShape(0);
  if (in[a.split] % group.size != 0)
    return makeError("split_axis %lld of input %s does not split evenly over "
                     "the %lld ranks of mesh axes %s",
                     (long long)a.split, shapeToString(in).c_str(),
                     (long long)group.size, shapeToString(group.axes).c_str());
  std::vector<int64_t> expected = in;
  expected[a.split] /= group.size;
  expected[a.concat] *= group.size;
  if (op.outShape(0) != expected)
    return makeError(
        "output %s is not input %s split along axis %lld and "
        "concatenated along axis %lld over the %lld ranks of "
        "mesh axes %s (that is %s)",
        shapeToString(op.outShape(0)).c_str(), shapeToString(in).c_str(),
        (long long)a.split, (long long)a.concat, (long long)group.size,
        shapeToString(group.axes).c_str(), shapeToString(expected).c_str());
  return Status::ok();
}

StatusOr<CollectivePlan> allToAllPlan(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(CollectiveGroup group, collectiveGroup(op));
  LOOM_ASSIGN_OR_RETURN(Communicator * comm, groupCommunicator(ctx, group));
  LOOM_ASSIGN_OR_RETURN(AllToAllAxes a, allToAllAxes(op));
  int64_t elemBytes = dtypeSize(op.inputs[0]->dtype());
  CollectivePlan plan;
  plan.kind = CollectiveKind::AllToAll;
  plan.comm = comm;
  plan.x = ctx.bytes(op.inputs[0]);
  plan.y = ctx.bytes(op.outputs[0]);
  plan.bytesPerRank = op.inNumel(0) / group.size * elemBytes;
  plan.in = blockSplit(op.inShape(0), a.split, group.size, elemBytes);
  plan.out = blockSplit(op.outShape(0), a.concat, group.size, elemBytes);
  return plan;
}

StatusOr<KernelFn> bindAllToAll(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(CollectivePlan plan, allToAllPlan(op, ctx));
  return hostCollective(plan, ctx);
}

} // namespace loom::runtime::cpu
