//===- CollectiveKernels.cpp - Block collectives on NCCL --------*- C++ -*-===//
//
// The plans are the CPU backend's (runtime/kernels/cpu/Collective.h), read
// on the device arena; the communicator is NCCL on the device's stream (or
// host staging, ordered on it the same way: HostStagedCommunicator.h). A
// tensor cut along a dim other than the first is packed into (or unpacked
// from) device staging with one cudaMemcpy2DAsync per block, all ordered on
// the one stream with the collective between them.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBind.h"
#include "runtime/cuda/CudaKernels.h"

#include "runtime/comm/InFlightBuckets.h"
#include "runtime/kernels/cpu/Collective.h"

namespace loom::runtime::cuda {

namespace {

/// The CPU backend's block copies (cpu::blockCopies, which its tests
/// check), one cudaMemcpy2DAsync each.
Status deviceCopies(const std::vector<cpu::PitchedCopy> &copies,
                    const uint8_t *src, uint8_t *dst, cudaStream_t stream,
                    const char *what) {
  for (const cpu::PitchedCopy &c : copies)
    LOOM_RETURN_IF_ERROR(cudaCheck(
        cudaMemcpy2DAsync(dst + c.dstOffset, static_cast<size_t>(c.dstPitch),
                          src + c.srcOffset, static_cast<size_t>(c.srcPitch),
                          static_cast<size_t>(c.width),
                          static_cast<size_t>(c.height),
                          cudaMemcpyDeviceToDevice, stream),
        what));
  return Status::ok();
}

StatusOr<KernelFn> deviceCollective(const cpu::CollectivePlan &plan,
                                    BindContext &ctx) {
  CudaDevice &dev = cudaDevice(ctx);
  // Device staging for the packed blocks, allocated once here at bind and
  // owned by the call; a tensor that is its own packed form needs none.
  DeviceBuffer send, recv;
  if (plan.sendStagingBytes() > 0) {
    LOOM_ASSIGN_OR_RETURN(send, dev.allocateWorkspace(plan.sendStagingBytes()));
  }
  if (plan.recvStagingBytes() > 0) {
    LOOM_ASSIGN_OR_RETURN(recv, dev.allocateWorkspace(plan.recvStagingBytes()));
  }
  std::vector<cpu::PitchedCopy> pack, unpack;
  if (!plan.in.packed())
    pack = cpu::blockCopies(plan.in, true);
  if (!plan.out.packed())
    unpack = cpu::blockCopies(plan.out, false);
  cudaStream_t s = dev.stream();
  return KernelFn([plan, send, recv, pack, unpack,
                   s](const StepContext &) -> Status {
    const uint8_t *from = plan.x;
    if (!plan.in.packed()) {
      auto *staged = static_cast<uint8_t *>(send.get());
      LOOM_RETURN_IF_ERROR(deviceCopies(pack, plan.x, staged, s,
                                        "cudaMemcpy2DAsync (collective pack)"));
      from = staged;
    }
    uint8_t *to =
        plan.out.packed() ? plan.y : static_cast<uint8_t *>(recv.get());
    LOOM_RETURN_IF_ERROR(cpu::exchange(plan, from, to));
    if (!plan.out.packed())
      return deviceCopies(unpack, to, plan.y, s,
                          "cudaMemcpy2DAsync (collective unpack)");
    return Status::ok();
  });
}

/// A bucket's copies (cpu::bucketPlan), on the device's stream.
Status bucketCopies(const cpu::BucketPlan &plan, cudaStream_t stream,
                    const char *what) {
  for (const cpu::BufferCopy &c : plan.copies)
    LOOM_RETURN_IF_ERROR(deviceCopies(c.copies, c.src, c.dst, stream, what));
  return Status::ok();
}

} // namespace

StatusOr<KernelFn> bindBucketStart(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(cpu::BucketPlan plan, cpu::bucketPlan(op, ctx));
  LOOM_ASSIGN_OR_RETURN(InFlightBuckets * buckets, cpu::inFlightBucketsOf(ctx));
  cudaStream_t s = cudaDevice(ctx).stream();
  // The packing is ordered before the collective on the device's stream,
  // which the communicator's stream waits for.
  return KernelFn([plan, buckets, s](const StepContext &) -> Status {
    LOOM_RETURN_IF_ERROR(
        bucketCopies(plan, s, "cudaMemcpy2DAsync (bucket pack)"));
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> pending,
                          cpu::startBucket(plan));
    return buckets->put(plan.bucket, std::move(pending));
  });
}

StatusOr<KernelFn> bindBucketWait(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(cpu::BucketPlan plan, cpu::bucketPlan(op, ctx));
  LOOM_ASSIGN_OR_RETURN(InFlightBuckets * buckets, cpu::inFlightBucketsOf(ctx));
  cudaStream_t s = cudaDevice(ctx).stream();
  // The wait makes the device's stream wait for the collective; the
  // unpacking follows it there.
  return KernelFn([plan, buckets, s](const StepContext &) -> Status {
    LOOM_RETURN_IF_ERROR(buckets->wait(plan.bucket));
    return bucketCopies(plan, s, "cudaMemcpy2DAsync (bucket unpack)");
  });
}

StatusOr<KernelFn> bindAllGather(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(cpu::CollectivePlan plan, cpu::allGatherPlan(op, ctx));
  return deviceCollective(plan, ctx);
}

StatusOr<KernelFn> bindReduceScatter(const OpView &op, BindContext &ctx) {
  // NCCL sums fp32, as all_reduce does (docs/cuda.md).
  LOOM_RETURN_IF_ERROR(expectAllF32(op));
  LOOM_ASSIGN_OR_RETURN(cpu::CollectivePlan plan,
                        cpu::reduceScatterPlan(op, ctx));
  return deviceCollective(plan, ctx);
}

StatusOr<KernelFn> bindAllToAll(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(cpu::CollectivePlan plan, cpu::allToAllPlan(op, ctx));
  return deviceCollective(plan, ctx);
}

} // namespace loom::runtime::cuda
