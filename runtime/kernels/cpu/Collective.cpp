//===- Collective.cpp - What the block collectives share --------*- C++ -*-===//

#include "runtime/kernels/cpu/Collective.h"

#include "runtime/PlanFormat.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/HostTensor.h"
#include "runtime/support/MemoryLedger.h"

#include <cstring>
#include <memory>

namespace loom::runtime::cpu {

BlockSplit blockSplit(const std::vector<int64_t> &shape, int64_t dim, int64_t n,
                      int64_t elemBytes) {
  BlockSplit s;
  s.n = n;
  s.rows = product(shape, 0, dim);
  s.pieceBytes =
      shape[dim] / n * product(shape, dim + 1, shape.size()) * elemBytes;
  return s;
}

std::vector<PitchedCopy> blockCopies(const BlockSplit &s, bool pack) {
  return blockCopies(s, pack, s.blockBytes(), 0);
}

std::vector<PitchedCopy> blockCopies(const BlockSplit &s, bool pack,
                                     int64_t packedStride, int64_t packedBase) {
  std::vector<PitchedCopy> copies;
  if (s.rows == 0 || s.pieceBytes == 0)
    return copies;
  // Block k is `rows` pieces, `n` pieces apart in the tensor and dense in
  // the packed form.
  for (int64_t k = 0; k < s.n; ++k) {
    int64_t tensorAt = k * s.pieceBytes, tensorPitch = s.n * s.pieceBytes;
    int64_t packedAt = packedBase + k * packedStride,
            packedPitch = s.pieceBytes;
    if (pack)
      copies.push_back(
          {tensorAt, tensorPitch, packedAt, packedPitch, s.pieceBytes, s.rows});
    else
      copies.push_back(
          {packedAt, packedPitch, tensorAt, tensorPitch, s.pieceBytes, s.rows});
  }
  return copies;
}

void hostCopies(const std::vector<PitchedCopy> &copies, const uint8_t *src,
                uint8_t *dst) {
  for (const PitchedCopy &c : copies)
    for (int64_t r = 0; r < c.height; ++r)
      std::memcpy(dst + c.dstOffset + r * c.dstPitch,
                  src + c.srcOffset + r * c.srcPitch,
                  static_cast<size_t>(c.width));
}

StatusOr<CollectiveGroup> collectiveGroup(const OpView &op) {
  CollectiveGroup g;
  LOOM_ASSIGN_OR_RETURN(g.axes, op.intsAttr("axes"));
  std::vector<int64_t> sizes = meshSizes(op.plan);
  int64_t meshRank = static_cast<int64_t>(sizes.size());
  for (size_t i = 0; i < g.axes.size(); ++i) {
    int64_t a = g.axes[i];
    if (a < 0 || a >= meshRank)
      return makeError("mesh axis %lld does not exist (the mesh has %lld "
                       "axes)",
                       (long long)a, (long long)meshRank);
    if (i && a == g.axes[i - 1])
      return makeError("mesh axis %lld is listed twice", (long long)a);
    if (i && a < g.axes[i - 1])
      return makeError("mesh axes %s are not ascending (the group is "
                       "numbered row-major over ascending axes)",
                       shapeToString(g.axes).c_str());
    g.size *= sizes[a];
  }
  return g;
}

StatusOr<Communicator *> groupCommunicator(BindContext &ctx,
                                           const CollectiveGroup &group) {
  Communicator *comm = ctx.commForAxes(group.axes);
  if (!comm)
    return makeError("no communicator for the requested mesh axes");
  if (comm->size() != group.size)
    return makeError("the communicator of mesh axes %s has %d ranks, the "
                     "plan's mesh %lld",
                     shapeToString(group.axes).c_str(), comm->size(),
                     (long long)group.size);
  return comm;
}

StatusOr<int64_t> tensorDimAttr(const OpView &op, const char *name,
                                int64_t rank) {
  LOOM_ASSIGN_OR_RETURN(int64_t dim, intAttr(op, name));
  if (dim < 0 || dim >= rank)
    return makeError("%s %lld is not a dimension of the rank-%lld input", name,
                     (long long)dim, (long long)rank);
  return dim;
}

Status expectSameTypeNotInPlace(const OpView &op) {
  if (op.inputs[0]->dtype() != op.outputs[0]->dtype())
    return makeError("input and output differ in element type (%s and %s)",
                     dtypeName(op.inputs[0]->dtype()),
                     dtypeName(op.outputs[0]->dtype()));
  return op.expectNotInPlace();
}

StatusOr<InFlightBuckets *> inFlightBucketsOf(BindContext &ctx) {
  InFlightBuckets *buckets = ctx.inFlightBuckets();
  if (!buckets)
    return makeError("this executor cannot overlap collectives");
  return buckets;
}

Status exchange(const CollectivePlan &plan, const uint8_t *send,
                uint8_t *recv) {
  switch (plan.kind) {
  case CollectiveKind::AllGather:
    return plan.comm->allGather(send, recv, plan.bytesPerRank);
  case CollectiveKind::ReduceScatter:
    return plan.comm->reduceScatterSum(
        reinterpret_cast<const float *>(send), reinterpret_cast<float *>(recv),
        plan.bytesPerRank / int64_t(sizeof(float)));
  case CollectiveKind::AllToAll:
    return plan.comm->allToAll(send, recv, plan.bytesPerRank);
  }
  return makeError("unknown collective");
}

KernelFn hostCollective(const CollectivePlan &plan, BindContext &ctx) {
  // Staging for the packed blocks, shared by the program's collectives
  // (they run one at a time, and block); a tensor that is its own packed
  // form needs none.
  auto send = ctx.sharedScratch(0, plan.sendStagingBytes());
  auto recv = ctx.sharedScratch(1, plan.recvStagingBytes());
  std::vector<PitchedCopy> pack, unpack;
  if (!plan.in.packed())
    pack = blockCopies(plan.in, true);
  if (!plan.out.packed())
    unpack = blockCopies(plan.out, false);
  return KernelFn(
      [plan, send, recv, pack, unpack](const StepContext &) -> Status {
        const uint8_t *from = plan.x;
        if (!plan.in.packed()) {
          hostCopies(pack, plan.x, send->data());
          from = send->data();
        }
        uint8_t *to = plan.out.packed() ? plan.y : recv->data();
        LOOM_RETURN_IF_ERROR(exchange(plan, from, to));
        if (!plan.out.packed())
          hostCopies(unpack, recv->data(), plan.y);
        return Status::ok();
      });
}

} // namespace loom::runtime::cpu
