//===- PointToPoint.cpp - send and recv between pipeline stages -*- C++ -*-===//
//
// `send` hands its buffer to the rank of another pipeline stage (the rank
// with the same coordinates but `peer_stage` on the `pp` axis) and does not
// wait; the executor waits for every send when the step ends, and the plan
// keeps the buffer unchanged until then. `recv` returns once the buffer
// holds what that rank sent under the same `tag` (docs/plan-format.md,
// "Pipeline stages"). Bytes move as they are, of any element type.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/InFlightBuckets.h"
#include "runtime/kernels/cpu/CpuKernels.h"

namespace loom::runtime::cpu {

namespace {

/// Where a transfer goes: the `pp` axis, the peer's coordinate on it and
/// the tag, as the instruction's attributes give them.
struct Route {
  int64_t axis, peer, tag;
};

StatusOr<Route> parseRoute(const OpView &op) {
  Route r{-1, 0, 0};
  for (int i = 0; i < op.plan.mesh_size(); ++i)
    if (op.plan.mesh(i).name() == "pp")
      r.axis = i;
  if (r.axis < 0)
    return makeError("the plan's mesh has no 'pp' axis to send along");
  LOOM_ASSIGN_OR_RETURN(r.peer, intAttr(op, "peer_stage"));
  LOOM_ASSIGN_OR_RETURN(r.tag, intAttr(op, "tag"));
  int64_t stages = op.plan.mesh(static_cast<int>(r.axis)).size();
  if (r.peer < 0 || r.peer >= stages)
    return makeError("peer_stage %lld is not one of the %lld pipeline stages",
                     (long long)r.peer, (long long)stages);
  if (r.tag < 0 || r.tag > 32767)
    return makeError("tag %lld is not in [0, 32767]", (long long)r.tag);
  return r;
}

/// The communicator along the pp axis, where the peer's index is its
/// coordinate; not this rank's own.
StatusOr<Communicator *> pipelineComm(const Route &r, BindContext &ctx) {
  Communicator *comm = ctx.commForAxes({r.axis});
  if (!comm)
    return makeError("no communicator along the pp axis");
  if (r.peer == comm->rank())
    return makeError("peer_stage %lld is this rank's own stage",
                     (long long)r.peer);
  return comm;
}

} // namespace

Status verifySend(const OpView &op) { return parseRoute(op).status(); }

StatusOr<KernelFn> bindSend(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(Route r, parseRoute(op));
  LOOM_ASSIGN_OR_RETURN(Communicator * comm, pipelineComm(r, ctx));
  InFlightBuckets *inFlight = ctx.inFlightBuckets();
  if (!inFlight)
    return makeError("this executor cannot keep sends in flight");
  const uint8_t *data = ctx.bytes(op.inputs[0]);
  int64_t bytes = op.inputs[0]->size_bytes();
  int peer = static_cast<int>(r.peer), tag = static_cast<int>(r.tag);
  return KernelFn([=](const StepContext &) -> Status {
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> send,
                          comm->startSend(data, bytes, peer, tag));
    inFlight->addSend(std::move(send));
    return Status::ok();
  });
}

Status verifyRecv(const OpView &op) { return parseRoute(op).status(); }

StatusOr<KernelFn> bindRecv(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(Route r, parseRoute(op));
  LOOM_ASSIGN_OR_RETURN(Communicator * comm, pipelineComm(r, ctx));
  uint8_t *data = ctx.bytes(op.outputs[0]);
  int64_t bytes = op.outputs[0]->size_bytes();
  int peer = static_cast<int>(r.peer), tag = static_cast<int>(r.tag);
  return KernelFn([=](const StepContext &) {
    return comm->recv(data, bytes, peer, tag);
  });
}

} // namespace loom::runtime::cpu
