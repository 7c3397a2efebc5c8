//===- Collective.h - Plans of the block collectives ------------*- C++ -*-===//
//
// The three collectives that move blocks of a tensor between the ranks of a
// group (upstream `shard.all_gather`, `shard.reduce_scatter`,
// `shard.all_to_all`) are one scheme: pack `x` into the layout the
// communicator sends (its blocks along the split dim one after another),
// exchange, unpack the received blocks into `y` along the concatenation
// dim. Along dim 0 (or behind dims of size 1) the tensor already is that
// layout and the communicator reads `x` or writes `y` itself. The shapes and
// the group resolve once, at bind, into a `CollectivePlan`; the CPU kernels
// (AllGather.cpp, ReduceScatter.cpp, AllToAll.cpp) run it with memcpy, the
// CUDA backend with cudaMemcpy2DAsync and NCCL.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_CPU_COLLECTIVE_H
#define LOOM_RUNTIME_KERNELS_CPU_COLLECTIVE_H

#include "runtime/comm/Communicator.h"
#include "runtime/kernels/Kernel.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace loom::runtime::cpu {

/// A tensor cut into `n` equal blocks along one dim, seen as bytes: `rows`
/// rows (the product of the dims before it), each `n` pieces of
/// `pieceBytes`. Its packed form is the `n` blocks one after another, each
/// block its `rows` pieces in order.
struct BlockSplit {
  int64_t n = 1, rows = 1, pieceBytes = 0;
  /// Whether the tensor is its own packed form (one block, or one row).
  bool packed() const { return n == 1 || rows <= 1; }
  /// Bytes of one block.
  int64_t blockBytes() const { return rows * pieceBytes; }
};

/// `shape` (of `elemBytes`-byte elements) cut into `n` blocks along `dim`
/// (`shape[dim]` a multiple of `n`).
BlockSplit blockSplit(const std::vector<int64_t> &shape, int64_t dim, int64_t n,
                      int64_t elemBytes);

/// A copy of `height` rows of `width` bytes: row `r` from
/// `src + srcOffset + r * srcPitch` to `dst + dstOffset + r * dstPitch` (a
/// cudaMemcpy2D).
struct PitchedCopy {
  int64_t srcOffset = 0, srcPitch = 0, dstOffset = 0, dstPitch = 0;
  int64_t width = 0, height = 0;
};
/// The copies, one per block, from a tensor split by `s` to its packed form
/// (`pack`) or back; none when there are no bytes. Both backends run these.
std::vector<PitchedCopy> blockCopies(const BlockSplit &s, bool pack);
/// The same, with the packed form's block `k` at `packedBase + k *
/// packedStride` instead of `k * s.blockBytes()`: one tensor's part of a
/// bucket whose block `k` holds every member's block `k` side by side.
std::vector<PitchedCopy> blockCopies(const BlockSplit &s, bool pack,
                                     int64_t packedStride, int64_t packedBase);
/// Runs `copies` from `src` to `dst` in host memory.
void hostCopies(const std::vector<PitchedCopy> &copies, const uint8_t *src,
                uint8_t *dst);

enum class CollectiveKind { AllGather, ReduceScatter, AllToAll };

/// One instruction on this rank: `x` packed by `in` (into send staging,
/// unless `in.packed()`), `bytesPerRank` bytes per rank exchanged through
/// `comm`, the received blocks unpacked by `out` (from receive staging,
/// unless `out.packed()`) into `y`. all_gather: `in` is one block (`x`);
/// reduce_scatter: `out` is one block (`y`), the exchange sums f32.
struct CollectivePlan {
  CollectiveKind kind = CollectiveKind::AllGather;
  Communicator *comm = nullptr;
  const uint8_t *x = nullptr;
  uint8_t *y = nullptr;
  BlockSplit in, out;
  int64_t bytesPerRank = 0;

  int64_t sendStagingBytes() const {
    return in.packed() ? 0 : in.n * in.blockBytes();
  }
  int64_t recvStagingBytes() const {
    return out.packed() ? 0 : out.n * out.blockBytes();
  }
};

/// The mesh axes of a collective and the number of ranks they span on the
/// plan's mesh.
struct CollectiveGroup {
  std::vector<int64_t> axes;
  int64_t size = 1;
};
/// The instruction's `axes`: existing mesh axes, each once, ascending (the
/// group is numbered row-major over them, as `createAxesCommunicator`
/// orders it).
StatusOr<CollectiveGroup> collectiveGroup(const OpView &op);
/// This rank's communicator of the group (bind time), checked to have the
/// group's size.
StatusOr<Communicator *> groupCommunicator(BindContext &ctx,
                                           const CollectiveGroup &group);
/// The dim attribute `name` of the rank-`rank` input.
StatusOr<int64_t> tensorDimAttr(const OpView &op, const char *name,
                                int64_t rank);
/// Fails unless input and output have one element type and differ.
Status expectSameTypeNotInPlace(const OpView &op);

/// The plans of verified instructions on this rank's arena (`ctx.bytes`:
/// host or device memory), with the group's communicator.
StatusOr<CollectivePlan> allGatherPlan(const OpView &op, BindContext &ctx);
StatusOr<CollectivePlan> reduceScatterPlan(const OpView &op, BindContext &ctx);
StatusOr<CollectivePlan> allToAllPlan(const OpView &op, BindContext &ctx);

/// Copies between two buffers of the arena (host or device memory).
struct BufferCopy {
  const uint8_t *src = nullptr;
  uint8_t *dst = nullptr;
  std::vector<PitchedCopy> copies;
};

/// A bucket of reduce-scatters or all-gathers (`reduce_scatter_start` /
/// `_wait`, `all_gather_start` / `_wait`, docs/plan-format.md): the start
/// packs its tensors into the send staging, block `k` of every tensor side
/// by side at `k * bytesPerRank` (a reduce-scatter) or the tensors side by
/// side (an all-gather), and starts one collective into the receive
/// staging; the wait unpacks the receive staging into its tensors.
struct BucketPlan {
  CollectiveKind kind = CollectiveKind::AllGather;
  Communicator *comm = nullptr;
  int64_t bucket = 0;
  uint8_t *send = nullptr, *recv = nullptr;
  /// Bytes of one rank's block: what the all-gather sends, what the
  /// reduce-scatter keeps.
  int64_t bytesPerRank = 0;
  /// The start's copies into `send`, or the wait's out of `recv`.
  std::vector<BufferCopy> copies;
};

/// Where a bucket's start leaves its collective for the wait; an error
/// when the executor cannot overlap collectives.
StatusOr<InFlightBuckets *> inFlightBucketsOf(BindContext &ctx);

/// The plan of a verified start or wait instruction on this rank's arena.
StatusOr<BucketPlan> bucketPlan(const OpView &op, BindContext &ctx);
/// Starts the bucket's collective from `send` into `recv`.
StatusOr<std::unique_ptr<PendingCollective>>
startBucket(const BucketPlan &plan);

/// The plan's communicator call from the packed `send` to the packed `recv`
/// (host or device memory, as the communicator takes).
Status exchange(const CollectivePlan &plan, const uint8_t *send, uint8_t *recv);

/// The plan run on the host: pack, exchange, unpack. Its staging is
/// allocated here, once, and owned by the returned call.
KernelFn hostCollective(const CollectivePlan &plan, BindContext &ctx);

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_COLLECTIVE_H
