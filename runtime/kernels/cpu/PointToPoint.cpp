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

/// Where a transfer goes: the pipeline communicator and the peer's index in
/// it (its pp coordinate), and the tag.
struct Route {
  Communicator *comm;
  int peer;
  int tag;
};

/// The `pp` axis of the plan's mesh.
StatusOr<int64_t> pipelineAxis(const OpView &op) {
  for (int i = 0; i < op.plan.mesh_size(); ++i)
    if (op.plan.mesh(i).name() == "pp")
      return static_cast<int64_t>(i);
  return makeError("the plan's mesh has no 'pp' axis to send along");
}

Status verifyRoute(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(int64_t axis, pipelineAxis(op));
  LOOM_ASSIGN_OR_RETURN(int64_t peer, intAttr(op, "peer_stage"));
  LOOM_ASSIGN_OR_RETURN(int64_t tag, intAttr(op, "tag"));
  int64_t stages = op.plan.mesh(static_cast<int>(axis)).size();
  if (peer < 0 || peer >= stages)
    return makeError("peer_stage %lld is not one of the %lld pipeline stages",
                     (long long)peer, (long long)stages);
  if (tag < 0 || tag > 32767)
    return makeError("tag %lld is not in [0, 32767]", (long long)tag);
  return Status::ok();
}

StatusOr<Route> routeOf(const OpView &op, BindContext &ctx) {
  LOOM_RETURN_IF_ERROR(verifyRoute(op));
  LOOM_ASSIGN_OR_RETURN(int64_t axis, pipelineAxis(op));
  Communicator *comm = ctx.commForAxes({axis});
  if (!comm)
    return makeError("no communicator along the pp axis");
  LOOM_ASSIGN_OR_RETURN(int64_t peer, intAttr(op, "peer_stage"));
  LOOM_ASSIGN_OR_RETURN(int64_t tag, intAttr(op, "tag"));
  if (peer == comm->rank())
    return makeError("peer_stage %lld is this rank's own stage",
                     (long long)peer);
  return Route{comm, static_cast<int>(peer), static_cast<int>(tag)};
}

} // namespace

Status verifySend(const OpView &op) { return verifyRoute(op); }

StatusOr<KernelFn> bindSend(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(Route route, routeOf(op, ctx));
  InFlightBuckets *inFlight = ctx.inFlightBuckets();
  if (!inFlight)
    return makeError("this executor cannot keep sends in flight");
  const uint8_t *data = ctx.bytes(op.inputs[0]);
  int64_t bytes = op.inputs[0]->size_bytes();
  return KernelFn([=](const StepContext &) -> Status {
    LOOM_ASSIGN_OR_RETURN(
        std::unique_ptr<PendingCollective> send,
        route.comm->startSend(data, bytes, route.peer, route.tag));
    inFlight->addSend(std::move(send));
    return Status::ok();
  });
}

Status verifyRecv(const OpView &op) { return verifyRoute(op); }

StatusOr<KernelFn> bindRecv(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(Route route, routeOf(op, ctx));
  uint8_t *data = ctx.bytes(op.outputs[0]);
  int64_t bytes = op.outputs[0]->size_bytes();
  return KernelFn([=](const StepContext &) {
    return route.comm->recv(data, bytes, route.peer, route.tag);
  });
}

} // namespace loom::runtime::cpu
