//===- ArenaAssignmentTest.cpp - Static arena offsets ---------------------===//

#include "emit/ArenaAssignment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

using namespace mlir::loom;

namespace {

bool overlapInTime(const LiveRange &a, const LiveRange &b) {
  return a.start <= b.end && b.start <= a.end;
}

/// Buffers live at the same time do not share bytes.
void expectNoCollisions(const std::vector<LiveRange> &ranges,
                        const std::vector<int64_t> &off) {
  for (size_t i = 0; i < ranges.size(); ++i)
    for (size_t j = i + 1; j < ranges.size(); ++j)
      if (overlapInTime(ranges[i], ranges[j]))
        EXPECT_TRUE(off[i] + ranges[i].size <= off[j] ||
                    off[j] + ranges[j].size <= off[i])
            << "buffers " << i << " and " << j << " collide";
}

/// The same check in O(n log n), for programs too large for the pairs:
/// a sweep in time keeps the live buffers by offset, and a buffer that
/// starts must fit between its neighbours there. Returns the first
/// collision, or "" when there is none.
std::string firstCollisionSwept(const std::vector<LiveRange> &ranges,
                                const std::vector<int64_t> &off) {
  std::vector<std::pair<int64_t, size_t>> starts, ends;
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].size > 0) {
      starts.push_back({ranges[i].start, i});
      ends.push_back({ranges[i].end, i});
    }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  std::set<std::pair<int64_t, size_t>> live; // (offset, buffer)
  auto collide = [](size_t a, size_t b) {
    return "buffers " + std::to_string(a) + " and " + std::to_string(b) +
           " collide";
  };
  size_t e = 0;
  for (auto [t, i] : starts) {
    for (; e < ends.size() && ends[e].first < t; ++e)
      live.erase({off[ends[e].second], ends[e].second});
    auto next = live.lower_bound({off[i], 0});
    if (next != live.end() && off[i] + ranges[i].size > next->first)
      return collide(i, next->second);
    if (next != live.begin()) {
      size_t j = std::prev(next)->second;
      if (off[j] + ranges[j].size > off[i])
        return collide(j, i);
    }
    live.insert({off[i], i});
  }
  return "";
}

/// 40 buffers of up to 5000 bytes, each live for up to 10 of 40 steps.
std::vector<LiveRange> randomRanges(std::mt19937 &rng) {
  std::vector<LiveRange> ranges;
  for (int i = 0; i < 40; ++i) {
    int64_t start = rng() % 30;
    ranges.push_back(
        {1 + int64_t(rng() % 5000), start, start + int64_t(rng() % 10)});
  }
  return ranges;
}

TEST(ArenaAssignment, BuffersWithDisjointLifetimesShareBytes) {
  std::vector<LiveRange> ranges{{1000, 0, 1}, {1000, 2, 3}, {1000, 4, 5}};
  int64_t arena = 0;
  std::vector<int64_t> offsets = assignArenaOffsets(ranges, arena);
  EXPECT_EQ(arena, 1024);
  EXPECT_EQ(offsets[0], 0);
  EXPECT_EQ(offsets[1], 0);
  EXPECT_EQ(offsets[2], 0);
}

TEST(ArenaAssignment, SimultaneousBuffersDoNotOverlapAndAreAligned) {
  std::vector<LiveRange> ranges{{100, 0, 5}, {10, 1, 2}, {64, 2, 4}};
  int64_t arena = 0;
  std::vector<int64_t> offsets = assignArenaOffsets(ranges, arena);
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(offsets[i] % kArenaAlignment, 0);
    EXPECT_LE(offsets[i] + ranges[i].size, arena);
  }
  EXPECT_EQ(arena, 128 + 64 + 64);
}

TEST(ArenaAssignment, PlacementReachesTheBoundWhereLargestFirstDoesNot) {
  // Largest first, first fit puts the two 256-byte buffers at 0 and 256,
  // the first 192-byte one under them at 0 and the second, live with all
  // but the first, above at 512: 704 bytes. Placing the long-lived buffers
  // first (size x lifetime) stacks them and leaves the short ones the gap.
  std::vector<LiveRange> ranges{
      {256, 3, 3}, {256, 3, 5}, {192, 5, 6}, {192, 5, 8}};
  int64_t arena = 0;
  assignArenaOffsets(ranges, arena);
  EXPECT_EQ(liveSetBytes(ranges), 640);
  EXPECT_EQ(arena, 640);
}

TEST(ArenaAssignment, SkylineReachesTheBoundWhereGreedyOrdersDoNot) {
  // No order of first or best fit packs these into 640 bytes; the skyline
  // (lowest stretch of time first, the largest size x lifetime that fits
  // in it) does.
  std::vector<LiveRange> ranges{{128, 5, 8}, {192, 2, 4}, {192, 6, 6},
                                {256, 4, 6}, {64, 4, 7},  {128, 4, 5}};
  int64_t arena = 0;
  std::vector<int64_t> off = assignArenaOffsets(ranges, arena);
  EXPECT_EQ(liveSetBytes(ranges), 640);
  EXPECT_EQ(arena, 640);
  expectNoCollisions(ranges, off);
}

TEST(ArenaAssignment, RandomRangesNeverCollide) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LiveRange> ranges = randomRanges(rng);
    int64_t arena = 0;
    expectNoCollisions(ranges, assignArenaOffsets(ranges, arena));
  }
}

TEST(ArenaAssignment, LiveSetBoundIsTheMostBytesLiveAtOnce) {
  // 128 + 64 at instruction 1 and 128 + 64 + 64 at 2, each rounded up to
  // 64 bytes; the view (size 0) counts nothing.
  std::vector<LiveRange> ranges{{100, 0, 5}, {10, 1, 2}, {64, 2, 4}, {0, 0, 9}};
  EXPECT_EQ(liveSetBytes(ranges), 128 + 64 + 64);
  EXPECT_EQ(liveSetBytes({}), 0);
}

TEST(ArenaAssignment, ArenaIsNeverBelowTheLiveSetBound) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LiveRange> ranges = randomRanges(rng);
    int64_t arena = 0;
    assignArenaOffsets(ranges, arena);
    EXPECT_GE(arena, liveSetBytes(ranges));
  }
}

TEST(ArenaAssignment, DeepProgramsArePlacedInTimeOrderNearTheBound) {
  // A training step of a 12k-op chain: a few parameters for the whole
  // step, each forward op's output kept until its backward op (the last
  // forward output is the first freed), a short-lived temporary beside
  // each, of varied sizes. Above kThoroughPlacementRanges ranges, so only
  // the sweep in time places them.
  std::mt19937 rng(3);
  const int64_t n = 12000, steps = 2 * n + 2;
  std::vector<LiveRange> ranges;
  for (int i = 0; i < 4; ++i)
    ranges.push_back({4096, 0, steps});
  for (int64_t t = 0; t < n; ++t) {
    ranges.push_back({64 * (1 + int64_t(rng() % 16)), t, 2 * n - t});
    ranges.push_back({64 * (1 + int64_t(rng() % 64)), t, t + 1});
    ranges.push_back({64 * (1 + int64_t(rng() % 64)), 2 * n - t, 2 * n - t});
  }
  ASSERT_GT(ranges.size(), kThoroughPlacementRanges);
  int64_t arena = 0;
  std::vector<int64_t> off = assignArenaOffsets(ranges, arena);
  EXPECT_EQ(firstCollisionSwept(ranges, off), "");
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(off[i] % kArenaAlignment, 0);
    EXPECT_LE(off[i] + ranges[i].size, arena);
  }
  int64_t bound = liveSetBytes(ranges);
  EXPECT_GE(arena, bound);
  EXPECT_LE(arena, bound + bound / 100) << "the sweep left over 1% unused";
}

TEST(ArenaAssignment, SweptCheckFindsACollision) {
  // The checker the deep-program test relies on can fail.
  std::vector<LiveRange> ranges{{128, 0, 4}, {128, 3, 6}, {64, 5, 7}};
  EXPECT_EQ(firstCollisionSwept(ranges, {0, 128, 0}), "");
  EXPECT_EQ(firstCollisionSwept(ranges, {0, 64, 256}),
            "buffers 0 and 1 collide");
  EXPECT_EQ(firstCollisionSwept(ranges, {0, 128, 192}),
            "buffers 1 and 2 collide");
}

} // namespace
