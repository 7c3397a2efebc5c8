//===- ArenaAssignment.cpp - Static arena offsets from live ranges --------===//

#include "emit/ArenaAssignment.h"

#include <algorithm>
#include <map>
#include <numeric>

using namespace mlir::loom;

static int64_t alignUp(int64_t v) {
  return (v + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

int64_t mlir::loom::liveSetBytes(const std::vector<LiveRange> &ranges) {
  std::map<int64_t, int64_t> delta;
  for (const LiveRange &r : ranges) {
    if (r.size == 0)
      continue;
    delta[r.start] += alignUp(r.size);
    delta[r.end + 1] -= alignUp(r.size); // persistent ends are far below 2^63
  }
  int64_t live = 0, most = 0;
  for (auto [at, d] : delta) {
    live += d;
    most = std::max(most, live);
  }
  return most;
}

std::vector<int64_t>
mlir::loom::assignArenaOffsets(const std::vector<LiveRange> &ranges,
                               int64_t &arenaBytes) {
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[a].size > ranges[b].size;
  });

  // Placed buffers by their extent in the arena (offset, end), so a new
  // buffer walks them from the bottom up and stops at the first gap it
  // fits in: no per-buffer sort of the buffers it meets.
  std::vector<int64_t> offsets(ranges.size(), 0);
  std::multimap<std::pair<int64_t, int64_t>, size_t> placed;
  arenaBytes = 0;
  for (size_t i : order) {
    const LiveRange &r = ranges[i];
    int64_t size = alignUp(r.size);
    int64_t candidate = 0;
    for (const auto &[extent, j] : placed) {
      const LiveRange &o = ranges[j];
      if (o.start > r.end || r.start > o.end) // never live together
        continue;
      if (candidate + size <= extent.first)
        break;
      candidate = std::max(candidate, extent.second);
    }
    offsets[i] = candidate;
    arenaBytes = std::max(arenaBytes, candidate + size);
    placed.emplace(std::pair{candidate, candidate + size}, i);
  }
  return offsets;
}
