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

} // namespace loom::runtime
