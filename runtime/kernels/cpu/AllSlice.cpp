//===- AllSlice.cpp - all_slice: this rank's block of a whole value -*- C++ -*-===//
//
// `all_slice` keeps the block of its input that this rank's coordinate on
// the mesh axes `axes` selects along `axis` (upstream `shard.all_slice`):
// no communication, a copy of `rows` strided blocks of bytes, for any
// element type (batch-sized integer constants such as position ids too).
//
//===----------------------------------------------------------------------===//

#include "runtime/PlanFormat.h"
#include "runtime/comm/Communicator.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <cstring>

namespace loom::runtime::cpu {

namespace {

/// The instruction's axis, checked against the input's rank.
StatusOr<int64_t> sliceAxis(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(double axis, op.numAttr("axis"));
  int64_t rank = static_cast<int64_t>(op.inShape(0).size());
  if (axis < 0 || axis >= rank || axis != static_cast<int64_t>(axis))
    return makeError("axis %g is not a dimension of the rank-%lld input",
                     axis, (long long)rank);
  return static_cast<int64_t>(axis);
}

} // namespace

Status verifyAllSlice(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  int64_t meshRank = std::max(op.plan.mesh_size(), 1);
  for (int64_t a : axes)
    if (a < 0 || a >= meshRank)
      return makeError("mesh axis %lld does not exist (the mesh has %lld "
                       "axes)",
                       (long long)a, (long long)meshRank);
  LOOM_ASSIGN_OR_RETURN(int64_t axis, sliceAxis(op));
  if (op.inputs[0]->dtype() != op.outputs[0]->dtype())
    return makeError("input and output differ in element type");
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  std::vector<int64_t> in = op.inShape(0), out = op.outShape(0);
  bool fits = in.size() == out.size() && out[axis] > 0 &&
              in[axis] % out[axis] == 0;
  for (size_t d = 0; fits && d < in.size(); ++d)
    fits = static_cast<int64_t>(d) == axis || in[d] == out[d];
  if (!fits)
    return makeError("output %s is not a block of input %s along axis %lld",
                     shapeToString(out).c_str(), shapeToString(in).c_str(),
                     (long long)axis);
  return Status::ok();
}

StatusOr<BlockCopy> allSliceCopy(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  std::sort(axes.begin(), axes.end());
  Communicator *comm = ctx.commForAxes(axes);
  if (!comm)
    return makeError("no communicator for the requested mesh axes");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, sliceAxis(op));
  std::vector<int64_t> in = op.inShape(0);
  int64_t block = op.outShape(0)[axis];
  if (block * comm->size() != in[axis])
    return makeError("the %d ranks of mesh axes %s cannot each take %lld of "
                     "the %lld elements of axis %lld",
                     comm->size(), shapeToString(axes).c_str(),
                     (long long)block, (long long)in[axis], (long long)axis);
  int64_t inner =
      product(in, axis + 1, in.size()) * dtypeSize(op.inputs[0]->dtype());
  BlockCopy c;
  c.rows = product(in, 0, axis);
  c.blockBytes = block * inner;
  c.rowBytes = in[axis] * inner;
  c.src = ctx.bytes(op.inputs[0]) + comm->rank() * c.blockBytes;
  c.dst = ctx.bytes(op.outputs[0]);
  return c;
}

StatusOr<KernelFn> bindAllSlice(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(BlockCopy c, allSliceCopy(op, ctx));
  return KernelFn([c](const StepContext &) {
    for (int64_t r = 0; r < c.rows; ++r)
      std::memcpy(c.dst + r * c.blockBytes, c.src + r * c.rowBytes,
                  c.blockBytes);
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
