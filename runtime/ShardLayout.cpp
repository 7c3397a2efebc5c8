//===- ShardLayout.cpp - A rank's shard in a global tensor ----------------===//

#include "runtime/ShardLayout.h"

#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <cstring>

namespace loom::runtime {

bool ShardLayout::isWhole() const {
  if (global != local)
    return false;
  for (const std::vector<ShardSegment> &segments : dims)
    if (segments.size() > 1 ||
        (segments.size() == 1 && segments[0].globalStart != 0))
      return false;
  return true;
}

int64_t shardGroupSize(const plan::DimSharding &sharding,
                       const std::vector<int64_t> &meshSizes) {
  int64_t n = 1;
  for (int32_t axis : sharding.axes())
    n *= meshSizes[axis];
  return n;
}

int64_t shardGroupIndex(const plan::DimSharding &sharding,
                        const std::vector<int64_t> &meshSizes,
                        const std::vector<int64_t> &coords) {
  int64_t k = 0;
  for (int32_t axis : sharding.axes())
    k = k * meshSizes[axis] + coords[axis];
  return k;
}

ShardLayout blockLayout(const std::vector<int64_t> &global,
                        const std::vector<int64_t> &offset,
                        const std::vector<int64_t> &local) {
  ShardLayout layout{global, local, {}};
  layout.dims.resize(local.size());
  for (size_t d = 0; d < local.size(); ++d)
    if (local[d] > 0)
      layout.dims[d].push_back({offset[d], 0, local[d]});
  return layout;
}

ShardLayout shardLayout(const plan::Buffer &b,
                        const std::vector<int64_t> &meshSizes,
                        const std::vector<int64_t> &coords) {
  std::vector<int64_t> local(b.shape().begin(), b.shape().end());
  std::vector<int64_t> global = local;
  if (b.global_shape_size() != 0)
    global.assign(b.global_shape().begin(), b.global_shape().end());
  if (b.dim_shardings_size() == 0) {
    std::vector<int64_t> offset(local.size(), 0);
    if (b.shard_offset_size() != 0)
      offset.assign(b.shard_offset().begin(), b.shard_offset().end());
    return blockLayout(global, offset, local);
  }
  // The shard's shape follows from the global one; `shape` may view it
  // with other dimensions (a fused weight's blocks as a dimension).
  local.assign(global.size(), 0);
  for (size_t d = 0; d < global.size(); ++d)
    local[d] = global[d] / shardGroupSize(b.dim_shardings(d), meshSizes);
  ShardLayout layout{global, local, {}};
  layout.dims.resize(local.size());
  for (size_t d = 0; d < local.size(); ++d) {
    const plan::DimSharding &sharding = b.dim_shardings(d);
    int64_t blocks = std::max<int64_t>(sharding.blocks(), 1);
    int64_t n = shardGroupSize(sharding, meshSizes);
    int64_t k = shardGroupIndex(sharding, meshSizes, coords);
    int64_t block = global[d] / blocks, piece = block / n;
    if (piece == 0)
      continue;
    std::vector<ShardSegment> &segments = layout.dims[d];
    for (int64_t j = 0; j < blocks; ++j) {
      ShardSegment s{j * block + k * piece, j * piece, piece};
      // Unsplit blocks (n = 1) follow each other: one run.
      if (!segments.empty() &&
          segments.back().globalStart + segments.back().length ==
              s.globalStart &&
          segments.back().localStart + segments.back().length == s.localStart)
        segments.back().length += piece;
      else
        segments.push_back(s);
    }
  }
  return layout;
}

ShardRows::ShardRows(const ShardLayout &layout) : layout(layout) {
  size_t rank = layout.local.size();
  if (rank == 0)
    return;
  globalStride.assign(rank, 1);
  for (int d = static_cast<int>(rank) - 2; d >= 0; --d)
    globalStride[d] = globalStride[d + 1] * layout.global[d + 1];
  toGlobal.resize(rank - 1);
  for (size_t d = 0; d + 1 < rank; ++d) {
    toGlobal[d] = globalIndices(layout, d);
    rows *= layout.local[d];
  }
}

int64_t ShardRows::globalBase(int64_t row) const {
  int64_t base = 0;
  for (int d = static_cast<int>(toGlobal.size()) - 1; d >= 0; --d) {
    base += toGlobal[d][row % layout.local[d]] * globalStride[d];
    row /= layout.local[d];
  }
  return base;
}

std::vector<int64_t> globalIndices(const ShardLayout &layout, size_t dim) {
  std::vector<int64_t> indices(layout.local[dim]);
  for (const ShardSegment &s : layout.dims[dim])
    for (int64_t i = 0; i < s.length; ++i)
      indices[s.localStart + i] = s.globalStart + i;
  return indices;
}

namespace {

/// Copies between the shard and its place in the global tensor, in the
/// direction `toShard` says, row by row (all dimensions but the last), one
/// `memcpy` per segment of the last dimension.
void copyBetween(const ShardLayout &layout, int64_t elemBytes, uint8_t *global,
                 uint8_t *local, bool toShard) {
  auto copy = [&](int64_t globalIndex, int64_t localIndex, int64_t count) {
    uint8_t *g = global + globalIndex * elemBytes;
    uint8_t *l = local + localIndex * elemBytes;
    if (toShard)
      std::memcpy(l, g, count * elemBytes);
    else
      std::memcpy(g, l, count * elemBytes);
  };
  size_t rank = layout.local.size();
  if (rank == 0) {
    copy(0, 0, 1);
    return;
  }
  if (numElements(layout.local) == 0)
    return;
  ShardRows rows(layout);
  int64_t inner = layout.local.back();
  for (int64_t r = 0; r < rows.count(); ++r) {
    int64_t base = rows.globalBase(r);
    for (const ShardSegment &s : layout.dims.back())
      copy(base + s.globalStart, r * inner + s.localStart, s.length);
  }
}

} // namespace

void copyGlobalToShard(const ShardLayout &layout, int64_t elemBytes,
                       const void *global, void *local) {
  copyBetween(layout, elemBytes,
              const_cast<uint8_t *>(static_cast<const uint8_t *>(global)),
              static_cast<uint8_t *>(local), /*toShard=*/true);
}

void copyShardToGlobal(const ShardLayout &layout, int64_t elemBytes,
                       const void *local, void *global) {
  copyBetween(layout, elemBytes, static_cast<uint8_t *>(global),
              const_cast<uint8_t *>(static_cast<const uint8_t *>(local)),
              /*toShard=*/false);
}

namespace {

/// A run of indices of one dimension held by both shards: `length`
/// indices from local `fromStart` of one and `toStart` of the other.
struct CommonRun {
  int64_t fromStart, toStart, length;
};

/// The runs of dimension `d` that `from` and `to` both hold.
std::vector<CommonRun> commonRuns(const ShardLayout &from,
                                  const ShardLayout &to, size_t d) {
  std::vector<CommonRun> runs;
  for (const ShardSegment &a : from.dims[d])
    for (const ShardSegment &b : to.dims[d]) {
      int64_t lo = std::max(a.globalStart, b.globalStart);
      int64_t hi = std::min(a.globalStart + a.length, b.globalStart + b.length);
      if (lo < hi)
        runs.push_back({a.localStart + lo - a.globalStart,
                        b.localStart + lo - b.globalStart, hi - lo});
    }
  return runs;
}

} // namespace

int64_t copyShardToShard(const ShardLayout &from, const void *src,
                         const ShardLayout &to, void *dst, int64_t elemBytes) {
  const auto *in = static_cast<const uint8_t *>(src);
  auto *out = static_cast<uint8_t *>(dst);
  size_t rank = from.local.size();
  if (rank == 0) {
    std::memcpy(out, in, elemBytes);
    return 1;
  }
  // Per leading dimension, the (from, to) local index pairs both hold; the
  // last dimension's common runs are copied whole.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> pairs(rank - 1);
  for (size_t d = 0; d + 1 < rank; ++d) {
    for (const CommonRun &r : commonRuns(from, to, d))
      for (int64_t i = 0; i < r.length; ++i)
        pairs[d].push_back({r.fromStart + i, r.toStart + i});
    if (pairs[d].empty())
      return 0;
  }
  std::vector<CommonRun> last = commonRuns(from, to, rank - 1);
  int64_t perRow = 0;
  for (const CommonRun &r : last)
    perRow += r.length;
  if (perRow == 0)
    return 0;
  // Walk the rows both hold as a mixed-radix counter over `pairs`.
  std::vector<size_t> at(rank - 1, 0);
  int64_t copied = 0;
  while (true) {
    int64_t fromRow = 0, toRow = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      fromRow = fromRow * from.local[d] + pairs[d][at[d]].first;
      toRow = toRow * to.local[d] + pairs[d][at[d]].second;
    }
    const uint8_t *rowIn = in + fromRow * from.local.back() * elemBytes;
    uint8_t *rowOut = out + toRow * to.local.back() * elemBytes;
    for (const CommonRun &r : last)
      std::memcpy(rowOut + r.toStart * elemBytes,
                  rowIn + r.fromStart * elemBytes, r.length * elemBytes);
    copied += perRow;
    size_t d = rank - 1;
    while (d > 0 && ++at[d - 1] == pairs[d - 1].size())
      at[--d] = 0;
    if (d == 0)
      return copied;
  }
}

} // namespace loom::runtime
