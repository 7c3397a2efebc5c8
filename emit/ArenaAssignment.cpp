//===- ArenaAssignment.cpp - Static arena offsets from live ranges --------===//

#include "emit/ArenaAssignment.h"

#include <algorithm>
#include <numeric>

using namespace mlir::loom;

static int64_t alignUp(int64_t v) {
  return (v + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

std::vector<int64_t>
mlir::loom::assignArenaOffsets(const std::vector<LiveRange> &ranges,
                               int64_t &arenaBytes) {
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[a].size > ranges[b].size;
  });

  std::vector<int64_t> offsets(ranges.size(), 0);
  std::vector<size_t> placed;
  arenaBytes = 0;
  for (size_t i : order) {
    const LiveRange &r = ranges[i];
    // Occupied intervals of placed buffers whose lifetimes overlap r's.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      const LiveRange &o = ranges[j];
      if (o.start <= r.end && r.start <= o.end)
        busy.push_back({offsets[j], offsets[j] + alignUp(o.size)});
    }
    std::sort(busy.begin(), busy.end());
    int64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + alignUp(r.size) <= lo)
        break;
      candidate = std::max(candidate, hi);
    }
    offsets[i] = candidate;
    arenaBytes = std::max(arenaBytes, candidate + alignUp(r.size));
    placed.push_back(i);
  }
  return offsets;
}
