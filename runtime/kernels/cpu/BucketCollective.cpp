//===- BucketCollective.cpp - Buckets of reduce-scatters and gathers -*- C++ -*-===//
//
// `reduce_scatter_start` / `all_gather_start` pack a bucket's tensors into
// its send staging and start one non-blocking collective into its receive
// staging (Communicator::startReduceScatterSum, startAllGather), kept in
// the executor's InFlightBuckets under the bucket's id; `_wait` waits for
// it and unpacks the receive staging into the bucket's results. The
// layout (BucketPlan, Collective.h) is the CUDA backend's too.
//
//===----------------------------------------------------------------------===//

#include "runtime/PlanFormat.h"
#include "runtime/comm/InFlightBuckets.h"
#include "runtime/kernels/cpu/Collective.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/support/HostTensor.h"

namespace loom::runtime::cpu {

namespace {

bool isStart(const OpView &op) {
  return op.inst.op() == "reduce_scatter_start" ||
         op.inst.op() == "all_gather_start";
}
bool isScatter(const OpView &op) {
  return op.inst.op() == "reduce_scatter_start" ||
         op.inst.op() == "reduce_scatter_wait";
}

/// What a start or wait says about its bucket: the group, the tensors'
/// shapes (the whole ones first: a reduce-scatter's operands, an
/// all-gather's results) and dims, and its staging.
struct BucketShape {
  CollectiveGroup group;
  int64_t bucket = 0;
  std::vector<int64_t> dims;
  /// Each tensor of the start (operands) or the wait (results).
  std::vector<std::vector<int64_t>> tensors;
  const plan::Buffer *send = nullptr, *recv = nullptr;
};

StatusOr<BucketShape> bucketShape(const OpView &op) {
  BucketShape b;
  bool start = isStart(op);
  const auto &tensors = start ? op.inputs : op.outputs;
  const auto &staging = start ? op.outputs : op.inputs;
  if (staging.size() != 2)
    return makeError("a bucket's %s names its send and receive staging "
                     "buffers, got %zu",
                     start ? "start" : "wait", staging.size());
  b.send = staging[0];
  b.recv = staging[1];
  LOOM_ASSIGN_OR_RETURN(b.group, collectiveGroup(op));
  LOOM_ASSIGN_OR_RETURN(b.bucket, intAttr(op, "bucket"));
  if (b.bucket < 0)
    return makeError("bucket must be non-negative, got %lld",
                     (long long)b.bucket);
  LOOM_ASSIGN_OR_RETURN(b.dims, intsAttrOfSize(op, "dims", tensors.size()));
  plan::DType dtype = b.send->dtype();
  if (isScatter(op) && dtype != plan::F32)
    return makeError("a reduce-scatter bucket sums f32 tensors, got %s",
                     dtypeName(dtype));
  if (dtype != plan::F32 && dtype != plan::BF16)
    return makeError("a gather bucket holds f32 or bf16 tensors, got %s",
                     dtypeName(dtype));
  int64_t n = b.group.size, send = 0, recv = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i]->dtype() != dtype)
      return makeError("tensor %zu of the bucket is %s, its staging %s", i,
                       dtypeName(tensors[i]->dtype()), dtypeName(dtype));
    std::vector<int64_t> shape = bufferShape(*tensors[i]);
    int64_t d = b.dims[i];
    if (d < 0 || d >= static_cast<int64_t>(shape.size()))
      return makeError("dims[%zu] = %lld is not a dimension of %s", i,
                       (long long)d, shapeToString(shape).c_str());
    // The whole tensor is a start's operand when it scatters, a wait's
    // result when it gathers.
    bool whole = start == isScatter(op);
    if (whole && shape[d] % n != 0)
      return makeError("dim %lld of tensor %zu (%s) does not split evenly "
                       "over the %lld ranks of mesh axes %s",
                       (long long)d, i, shapeToString(shape).c_str(),
                       (long long)n, shapeToString(b.group.axes).c_str());
    int64_t numel = numElements(shape);
    (start ? send : recv) += numel;
    b.tensors.push_back(std::move(shape));
  }
  // The other staging buffer's size follows: a reduce-scatter keeps one
  // rank's block of what it sends, a gather receives every rank's.
  if (start)
    recv = isScatter(op) ? send / n : send * n;
  else
    send = isScatter(op) ? recv * n : recv / n;
  int64_t sendNumel = numElements(bufferShape(*b.send));
  int64_t recvNumel = numElements(bufferShape(*b.recv));
  if (b.recv->dtype() != dtype || sendNumel != send || recvNumel != recv)
    return makeError("the bucket's staging holds %lld and %lld elements; its "
                     "tensors need %lld to send and %lld to receive",
                     (long long)sendNumel, (long long)recvNumel,
                     (long long)send, (long long)recv);
  return b;
}

} // namespace

StatusOr<BucketPlan> bucketPlan(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(BucketShape b, bucketShape(op));
  BucketPlan plan;
  plan.kind =
      isScatter(op) ? CollectiveKind::ReduceScatter : CollectiveKind::AllGather;
  LOOM_ASSIGN_OR_RETURN(plan.comm, groupCommunicator(ctx, b.group));
  plan.bucket = b.bucket;
  plan.send = ctx.bytes(b.send);
  plan.recv = ctx.bytes(b.recv);
  bool start = isStart(op);
  const auto &tensors = start ? op.inputs : op.outputs;
  int64_t n = b.group.size, elem = dtypeSize(b.send->dtype());
  plan.bytesPerRank =
      (isScatter(op) ? numElements(bufferShape(*b.recv))
                     : numElements(bufferShape(*b.send))) *
      elem;
  // `at`: the tensor's bytes in one rank's block.
  int64_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint8_t *tensor = ctx.bytes(tensors[i]);
    const std::vector<int64_t> &shape = b.tensors[i];
    int64_t bytes = numElements(shape) * elem;
    auto add = [&](const uint8_t *src, uint8_t *dst,
                   std::vector<PitchedCopy> copies) {
      if (!copies.empty())
        plan.copies.push_back({src, dst, std::move(copies)});
    };
    auto whole = [&](int64_t srcOffset, int64_t dstOffset, int64_t width) {
      return std::vector<PitchedCopy>{
          {srcOffset, width, dstOffset, width, width, 1}};
    };
    if (isScatter(op) && start) {
      // Block k of the operand goes to block k of the send staging.
      BlockSplit s = blockSplit(shape, b.dims[i], n, elem);
      add(tensor, plan.send, blockCopies(s, true, plan.bytesPerRank, at));
      at += s.blockBytes();
    } else if (isScatter(op)) {
      // This rank's block of the sum is the result, whole.
      if (bytes > 0)
        add(plan.recv, tensor, whole(at, 0, bytes));
      at += bytes;
    } else if (start) {
      // The operands side by side are this rank's block.
      if (bytes > 0)
        add(tensor, plan.send, whole(0, at, bytes));
      at += bytes;
    } else {
      // Block k of the result is at block k of the receive staging.
      BlockSplit s = blockSplit(shape, b.dims[i], n, elem);
      add(plan.recv, tensor, blockCopies(s, false, plan.bytesPerRank, at));
      at += s.blockBytes();
    }
  }
  return plan;
}

StatusOr<std::unique_ptr<PendingCollective>>
startBucket(const BucketPlan &plan) {
  if (plan.kind == CollectiveKind::ReduceScatter)
    return plan.comm->startReduceScatterSum(
        reinterpret_cast<const float *>(plan.send),
        reinterpret_cast<float *>(plan.recv),
        plan.bytesPerRank / int64_t(sizeof(float)));
  return plan.comm->startAllGather(plan.send, plan.recv, plan.bytesPerRank);
}

Status verifyBucketStart(const OpView &op) {
  LOOM_RETURN_IF_ERROR(bucketShape(op).status());
  if (isScatter(op)) {
    LOOM_ASSIGN_OR_RETURN(std::string reduction,
                          op.strAttr("reduction", "sum"));
    if (reduction != "sum")
      return makeError("reduction '%s' is not supported (only 'sum')",
                       reduction.c_str());
  }
  return Status::ok();
}

/// Runs a plan's copies in host memory.
static void runCopies(const std::vector<BufferCopy> &copies) {
  for (const BufferCopy &c : copies)
    hostCopies(c.copies, c.src, c.dst);
}

StatusOr<KernelFn> bindBucketStart(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(BucketPlan plan, bucketPlan(op, ctx));
  LOOM_ASSIGN_OR_RETURN(InFlightBuckets * buckets, inFlightBucketsOf(ctx));
  return KernelFn([plan, buckets](const StepContext &) -> Status {
    runCopies(plan.copies);
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> pending,
                          startBucket(plan));
    return buckets->put(plan.bucket, std::move(pending));
  });
}

Status verifyBucketWait(const OpView &op) {
  return bucketShape(op).status();
}

StatusOr<KernelFn> bindBucketWait(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(BucketPlan plan, bucketPlan(op, ctx));
  LOOM_ASSIGN_OR_RETURN(InFlightBuckets * buckets, inFlightBucketsOf(ctx));
  return KernelFn([plan, buckets](const StepContext &) -> Status {
    LOOM_RETURN_IF_ERROR(buckets->wait(plan.bucket));
    runCopies(plan.copies);
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
