//===- ShardLayout.h - A rank's shard in a global tensor --------*- C++ -*-===//
//
// A PARAMETER, OPTIMIZER_STATE or RUNNING_STAT buffer may hold a shard of a
// larger (global) tensor: a block at `shard_offset`, or, with
// `dim_shardings`, on each dimension the piece of every block that the
// rank's index among the dimension's mesh axes selects (docs/plan-format.md,
// "Sharded buffers"). A shard is the cartesian product of, per dimension, a
// few runs of consecutive global indices (segments); this file computes
// them from the rank's mesh coordinate and copies between the global tensor
// and the shard. Part of `LoomPlanFormat`: no kernels, no communicators.
//
// Example: a [6, 4] fused q/k/v weight with `dim_shardings` {axes [tp],
// blocks 3} on dim 0 and {} on dim 1, over tp = 2. Rank tp = 1 holds rows
// 1, 3 and 5: dim 0 has segments (global 1, local 0, 1), (3, 1, 1),
// (5, 2, 1), dim 1 one segment (0, 0, 4).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SHARDLAYOUT_H
#define LOOM_RUNTIME_SHARDLAYOUT_H

#include "runtime/plan.pb.h"

#include <cstdint>
#include <vector>

namespace loom::runtime {

/// A run of `length` consecutive indices of one dimension: global indices
/// [globalStart, globalStart + length) are local [localStart, +length).
struct ShardSegment {
  int64_t globalStart = 0;
  int64_t localStart = 0;
  int64_t length = 0;
  bool operator==(const ShardSegment &o) const {
    return globalStart == o.globalStart && localStart == o.localStart &&
           length == o.length;
  }
};

/// Where one rank's shard of a buffer lies in the buffer's global tensor.
struct ShardLayout {
  std::vector<int64_t> global; ///< the global (unsharded) shape
  /// The shard's shape: `Buffer.shape`, or with `dim_shardings` the global
  /// shape over each dimension's ranks (which `Buffer.shape` may view with
  /// other dimensions, same elements in the same order).
  std::vector<int64_t> local;
  /// Per dimension, the segments in increasing local order; together they
  /// cover [0, local[d]) once. Dimensions of size 0 have none.
  std::vector<std::vector<ShardSegment>> dims;

  /// Whether the shard is the whole global tensor (a replicated buffer).
  bool isWhole() const;
};

/// The number of ranks a dimension is split over (the product of the sizes
/// of its `axes` on a mesh of `meshSizes`) and this rank's index among
/// them (row-major over `axes` in the listed order, the last fastest) for
/// mesh coordinates `coords`.
int64_t shardGroupSize(const plan::DimSharding &sharding,
                       const std::vector<int64_t> &meshSizes);
int64_t shardGroupIndex(const plan::DimSharding &sharding,
                        const std::vector<int64_t> &meshSizes,
                        const std::vector<int64_t> &coords);

/// The layout of `b`'s shard on the rank at mesh coordinates `coords` (one
/// per axis of `meshSizes`, row-major rank order). With `dim_shardings`:
/// dimension d of global size G in B = max(blocks, 1) blocks over n ranks
/// holds, for each block j, global [j G/B + k G/B/n, +G/B/n) at local
/// j G/B/n, where k is the rank's index among the axes (adjacent segments
/// merged). Without: one segment per dimension at `shard_offset` (zeros
/// when empty), of the local size; a buffer without `global_shape` is its
/// own global tensor. `b` must have passed plan validation.
ShardLayout shardLayout(const plan::Buffer &b,
                        const std::vector<int64_t> &meshSizes,
                        const std::vector<int64_t> &coords);

/// The local shard's rows (every dimension but the last, row-major) and the
/// global index of each row's first element: each segment of the last
/// dimension is then a run of global indices from there.
class ShardRows {
public:
  explicit ShardRows(const ShardLayout &layout);
  /// Rows of the shard (1 for a scalar).
  int64_t count() const { return rows; }
  int64_t globalBase(int64_t row) const;

private:
  const ShardLayout &layout;
  int64_t rows = 1;
  std::vector<int64_t> globalStride;
  std::vector<std::vector<int64_t>> toGlobal; // per leading dimension
};

/// The layout of a block of shape `local` at `offset` in a tensor of shape
/// `global` (all three of the same rank; offset + local <= global).
ShardLayout blockLayout(const std::vector<int64_t> &global,
                        const std::vector<int64_t> &offset,
                        const std::vector<int64_t> &local);

/// For each local index of dimension `dim`, its global index.
std::vector<int64_t> globalIndices(const ShardLayout &layout, size_t dim);

/// Copies the shard `layout` describes out of the C-order tensor `global`
/// (shape `layout.global`) into the C-order `local` (shape `layout.local`);
/// elements are `elemBytes` bytes of any type.
void copyGlobalToShard(const ShardLayout &layout, int64_t elemBytes,
                       const void *global, void *local);

/// The inverse: writes the C-order shard `local` into its place in `global`,
/// leaving the other elements as they are.
void copyShardToGlobal(const ShardLayout &layout, int64_t elemBytes,
                       const void *local, void *global);

/// Copies the elements that two shards of one global tensor (`from` and
/// `to`, of the same global shape) both hold from the C-order `src` (shape
/// `from.local`) into their places in the C-order `dst` (shape
/// `to.local`), leaving `dst`'s other elements as they are; returns the
/// number of elements copied (a checkpoint block into a rank's shard under
/// another plan).
int64_t copyShardToShard(const ShardLayout &from, const void *src,
                         const ShardLayout &to, void *dst, int64_t elemBytes);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SHARDLAYOUT_H
