//===- ArenaAssignment.cpp - Static arena offsets from live ranges --------===//
//
// Placing buffers with known lifetimes in the fewest bytes is NP-hard
// (dynamic storage allocation), so the arena is the smallest of a few
// heuristic placements, stopping at the first that reaches the live-set
// bound: three orders (largest first, largest size x lifetime first,
// earliest start first) each placed by first fit and by best fit (the
// smallest gap that holds the buffer), then a sweep in time (an allocator's
// best fit), then three skyline placements, then (up to
// `kPerturbedPlacementRanges` buffers) largest first with the sizes
// perturbed, a few times. No one wins on every program:
// largest-first first fit reaches the bound on most steps without pipeline
// stages, the skyline packs a pipeline stage's staggered micro-batches and a
// micro-batched step closer.
//
// All but the sweep compare each buffer with the placed ones that live at
// the same time, quadratic in the buffers of a deep program. Above
// `kThoroughPlacementRanges` buffers (a GPT of about 130 layers on one
// device) only the sweep runs, O(n log n): on the GPT-2 plans of the tests
// it takes 1-13% above the bound where the others reach it, on chains of
// 10k to 40k nodes 448 bytes (0.017% to 0.004%).
//
//===----------------------------------------------------------------------===//

#include "emit/ArenaAssignment.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <set>

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

namespace {

enum class Fit { First, Best };

/// Offsets for the ranges, and the arena bytes they take.
struct Placement {
  std::vector<int64_t> offsets;
  int64_t bytes = 0;
};

/// Places the ranges in `order`, each at the lowest offset (first fit) or
/// in the smallest gap (best fit) left by the buffers placed before it that
/// are live at the same time.
Placement place(const std::vector<LiveRange> &ranges,
                const std::vector<size_t> &order, Fit fit) {
  // Placed buffers by their extent in the arena (offset, end), so a new
  // buffer walks them from the bottom up: no per-buffer sort. A flat
  // vector, each entry carrying its lifetime: the walk is the placement's
  // cost, and it reads memory in order.
  struct Placed {
    int64_t offset, end, start, last;
  };
  Placement result;
  result.offsets.assign(ranges.size(), 0);
  std::vector<Placed> placed;
  placed.reserve(ranges.size());
  for (size_t i : order) {
    const LiveRange &r = ranges[i];
    int64_t size = alignUp(r.size);
    // `top` is the end of the overlapping buffers seen so far; a gap opens
    // where the next one starts above it.
    int64_t top = 0, best = -1, bestGap = 0;
    for (const Placed &o : placed) {
      if (o.start > r.end || r.start > o.last) // never live together
        continue;
      int64_t gap = o.offset - top;
      if (gap >= size && (best < 0 || gap < bestGap)) {
        best = top;
        bestGap = gap;
        if (fit == Fit::First || gap == size)
          break;
      }
      top = std::max(top, o.end);
    }
    int64_t offset = best >= 0 ? best : top;
    result.offsets[i] = offset;
    result.bytes = std::max(result.bytes, offset + size);
    // After the placed buffers of the same extent, as a multimap would.
    Placed entry{offset, offset + size, r.start, r.end};
    auto at = std::upper_bound(placed.begin(), placed.end(), entry,
                               [](const Placed &a, const Placed &b) {
                                 return std::pair{a.offset, a.end} <
                                        std::pair{b.offset, b.end};
                               });
    placed.insert(at, entry);
  }
  return result;
}

/// Places the buffers in the order they start, as an allocator running the
/// program would: a buffer whose last instruction has passed returns its
/// bytes to the holes (merged with neighbouring holes, the arena's top
/// lowered where a hole reaches it), and each new buffer takes the smallest
/// hole that holds it, else the top. O(n log n) in the number of buffers,
/// where the other placements compare each buffer with every placed one:
/// the one that keeps programs of 100k instructions quick to place.
Placement sweep(const std::vector<LiveRange> &ranges) {
  std::vector<size_t> order;
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].size > 0) // a view (no bytes) needs no place
      order.push_back(i);
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    const LiveRange &x = ranges[a], &y = ranges[b];
    return x.start != y.start ? x.start < y.start : x.size > y.size;
  });
  Placement result;
  result.offsets.assign(ranges.size(), 0);
  // Holes below the top, by offset (to merge) and by (size, offset).
  std::map<int64_t, int64_t> holes;
  std::set<std::pair<int64_t, int64_t>> bySize;
  int64_t top = 0;
  auto release = [&](int64_t offset, int64_t size) {
    auto next = holes.lower_bound(offset);
    if (next != holes.end() && next->first == offset + size) {
      size += next->second;
      bySize.erase({next->second, next->first});
      next = holes.erase(next);
    }
    if (next != holes.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        bySize.erase({prev->second, prev->first});
        holes.erase(prev);
      }
    }
    if (offset + size == top) {
      top = offset;
      return;
    }
    holes[offset] = size;
    bySize.insert({size, offset});
  };
  // Live buffers by their last instruction, the soonest to end on top.
  using Live = std::pair<int64_t, size_t>;
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  for (size_t i : order) {
    const LiveRange &r = ranges[i];
    while (!live.empty() && live.top().first < r.start) {
      size_t j = live.top().second;
      live.pop();
      release(result.offsets[j], alignUp(ranges[j].size));
    }
    int64_t size = alignUp(r.size), offset = top;
    auto hole = bySize.lower_bound({size, 0});
    if (hole != bySize.end()) {
      auto [holeSize, holeOffset] = *hole;
      bySize.erase(hole);
      holes.erase(holeOffset);
      offset = holeOffset;
      if (holeSize > size) {
        holes[offset + size] = holeSize - size;
        bySize.insert({holeSize - size, offset + size});
      }
    } else {
      top += size;
    }
    result.offsets[i] = offset;
    result.bytes = std::max(result.bytes, offset + size);
    live.push({r.end, i});
  }
  return result;
}

/// Skyline placement (after Sekiyama et al., "Profile-guided memory
/// optimization for deep neural networks", 2018). Time is cut at the
/// instants where a buffer starts or ends; the skyline gives each stretch
/// of time the top of the buffers placed in it. The lowest stretch takes,
/// of the unplaced buffers whose lifetime lies inside it, the one of
/// largest `weight`; where none fits, the stretch rises to its lower
/// neighbour and the bytes under it are lost to that stretch of time.
template <typename Weight>
Placement skyline(const std::vector<LiveRange> &ranges, Weight weight) {
  std::vector<int64_t> cuts;
  for (const LiveRange &r : ranges) {
    cuts.push_back(r.start);
    cuts.push_back(r.end + 1);
  }
  llvm::sort(cuts);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  auto cut = [&](int64_t t) {
    return int(std::lower_bound(cuts.begin(), cuts.end(), t) - cuts.begin());
  };

  // The unplaced buffers by the stretch they start at, heaviest first
  // (the first made among equals); a view (no bytes) needs no place.
  auto heavier = [&](size_t a, size_t b) {
    auto wa = weight(ranges[a]), wb = weight(ranges[b]);
    return wa > wb || (wa == wb && a < b);
  };
  std::vector<std::vector<size_t>> byStart(cuts.size());
  std::vector<int> endOf(ranges.size());
  size_t left = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    endOf[i] = cut(ranges[i].end + 1);
    if (ranges[i].size > 0) {
      byStart[cut(ranges[i].start)].push_back(i);
      ++left;
    }
  }
  for (std::vector<size_t> &ids : byStart)
    llvm::sort(ids, heavier);

  // The skyline as stretches [start, end) at a height, no two neighbours
  // at the same height, and the stretches by height so that the lowest is
  // found at once.
  struct Stretch {
    int end;
    int64_t height;
  };
  std::map<int, Stretch> stretches;
  std::set<std::pair<int64_t, int>> lowest;
  auto remove = [&](auto it) {
    lowest.erase({it->second.height, it->first});
    return stretches.erase(it);
  };
  // Raises the uncovered [start, end) to `height`, merged with neighbours
  // at that height.
  auto raise = [&](int start, int end, int64_t height) {
    if (start == end)
      return;
    auto next = stretches.lower_bound(start);
    if (next != stretches.end() && next->first == end &&
        next->second.height == height) {
      end = next->second.end;
      next = remove(next);
    }
    if (next != stretches.begin()) {
      auto prev = std::prev(next);
      if (prev->second.end == start && prev->second.height == height) {
        start = prev->first;
        remove(prev);
      }
    }
    stretches[start] = {end, height};
    lowest.insert({height, start});
  };
  raise(0, int(cuts.size()) - 1, 0);

  Placement result;
  result.offsets.assign(ranges.size(), 0);
  while (left > 0) {
    auto [height, start] = *lowest.begin();
    auto it = stretches.find(start);
    int end = it->second.end;
    std::optional<std::pair<size_t, size_t>> pick; // (start cut, position)
    for (int s = start; s < end; ++s) {
      std::vector<size_t> &ids = byStart[s];
      auto fits = llvm::find_if(ids, [&](size_t i) { return endOf[i] <= end; });
      if (fits != ids.end() &&
          (!pick || heavier(*fits, byStart[pick->first][pick->second])))
        pick = {size_t(s), size_t(fits - ids.begin())};
    }
    if (!pick) {
      // Nothing fits: rise to the lower neighbour (the whole timeline
      // holds every buffer, so there is one).
      int64_t to = std::numeric_limits<int64_t>::max();
      if (it != stretches.begin())
        to = std::prev(it)->second.height;
      if (std::next(it) != stretches.end())
        to = std::min(to, std::next(it)->second.height);
      assert(to != std::numeric_limits<int64_t>::max());
      remove(it);
      raise(start, end, to);
      continue;
    }
    std::vector<size_t> &ids = byStart[pick->first];
    size_t i = ids[pick->second];
    ids.erase(ids.begin() + pick->second);
    --left;
    int64_t top = height + alignUp(ranges[i].size);
    result.offsets[i] = height;
    result.bytes = std::max(result.bytes, top);
    remove(it);
    raise(start, int(pick->first), height);
    raise(int(pick->first), endOf[i], top);
    raise(endOf[i], end, height);
  }
  return result;
}

} // namespace

std::vector<int64_t>
mlir::loom::assignArenaOffsets(const std::vector<LiveRange> &ranges,
                               int64_t &arenaBytes) {
  auto span = [](const LiveRange &r) { return double(r.end - r.start + 1); };
  // Persistent spans are huge: weights are doubles, not int64_t products.
  auto area = [&](const LiveRange &r) { return double(r.size) * span(r); };
  const int64_t bound = liveSetBytes(ranges);
  std::vector<int64_t> bestOffsets;
  arenaBytes = -1;
  auto keep = [&](Placement placement) {
    if (arenaBytes < 0 || placement.bytes < arenaBytes) {
      arenaBytes = placement.bytes;
      bestOffsets = std::move(placement.offsets);
    }
    return arenaBytes <= bound;
  };
  if (ranges.size() > kThoroughPlacementRanges) {
    keep(sweep(ranges));
    return bestOffsets;
  }
  auto sorted = [&](auto before) {
    std::vector<size_t> order(ranges.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return before(ranges[a], ranges[b]);
    });
    return order;
  };
  const std::vector<size_t> orders[] = {
      sorted([](const LiveRange &a, const LiveRange &b) {
        return a.size > b.size;
      }),
      sorted([&](const LiveRange &a, const LiveRange &b) {
        return area(a) > area(b);
      }),
      sorted([](const LiveRange &a, const LiveRange &b) {
        return a.start != b.start ? a.start < b.start : a.size > b.size;
      }),
  };

  for (const std::vector<size_t> &order : orders)
    for (Fit fit : {Fit::First, Fit::Best})
      if (keep(place(ranges, order, fit)))
        return bestOffsets;
  if (keep(sweep(ranges)))
    return bestOffsets;
  auto life = [&](const LiveRange &r) { return std::pair{span(r), r.size}; };
  auto sqrtArea = [&](const LiveRange &r) {
    return double(r.size) * std::sqrt(span(r));
  };
  if (keep(skyline(ranges, area)) || keep(skyline(ranges, life)) ||
      keep(skyline(ranges, sqrtArea)) ||
      ranges.size() > kPerturbedPlacementRanges)
    return bestOffsets;
  // Largest first again, each size scaled by a factor in [0.7, 1.3] drawn
  // from the buffer's index and the try (splitmix64: the same plan on every
  // machine): a step whose short-lived buffers interleave with long ones
  // (a pipeline stage's per-micro-batch ZeRO-3 gathers) packs closer.
  auto mix = [](uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  double n = double(ranges.size());
  uint64_t tries = std::min<uint64_t>(
      kPerturbedPlacements, uint64_t(kPerturbedPlacementWork / (n * n)));
  for (uint64_t t = 0; t < tries; ++t) {
    std::vector<std::pair<int64_t, size_t>> keys;
    for (size_t i = 0; i < ranges.size(); ++i) {
      int64_t scale = 700 + int64_t(mix(t * 1000003 + i) % 601);
      keys.push_back({-(ranges[i].size / 64) * scale, i});
    }
    llvm::sort(keys);
    std::vector<size_t> order;
    for (auto [key, i] : keys)
      order.push_back(i);
    for (Fit fit : {Fit::First, Fit::Best})
      if (keep(place(ranges, order, fit)))
        return bestOffsets;
  }
  return bestOffsets;
}
