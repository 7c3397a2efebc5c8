//===- ArenaAssignment.h - Static arena offsets from live ranges -*- C++ -*-===//

#ifndef LOOM_EMIT_ARENAASSIGNMENT_H
#define LOOM_EMIT_ARENAASSIGNMENT_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mlir::loom {

/// A buffer to place: it occupies `size` bytes from instruction `start` to
/// instruction `end` inclusive (persistent buffers span everything).
struct LiveRange {
  int64_t size = 0;
  int64_t start = 0, end = 0;
};

inline constexpr int64_t kArenaAlignment = 64;

/// Programs of more buffers are placed by the O(n log n) sweep alone.
inline constexpr size_t kThoroughPlacementRanges = 20000;
/// Programs of at most so many buffers, when no other placement reaches
/// the bound, also try perturbed largest-first orders: at most
/// `kPerturbedPlacements`, and fewer for more buffers (each try compares
/// every pair, so n x n x tries stays under `kPerturbedPlacementWork`).
inline constexpr size_t kPerturbedPlacementRanges = 4000;
inline constexpr uint64_t kPerturbedPlacements = 32;
inline constexpr double kPerturbedPlacementWork = 1e7;

/// Assigns each range a `kArenaAlignment`-aligned offset so that ranges that
/// are live at the same time never overlap; returns the offsets and sets
/// `arenaBytes`: the smallest of a few greedy placements (first and best fit
/// over three orders, a sweep in time, skylines, perturbed largest-first
/// orders), stopping at the first that reaches `liveSetBytes`; above
/// `kThoroughPlacementRanges` ranges, the sweep.
std::vector<int64_t> assignArenaOffsets(const std::vector<LiveRange> &ranges,
                                        int64_t &arenaBytes);

/// The most bytes of `ranges` (each rounded up to `kArenaAlignment`) live
/// at one instruction: no placement takes fewer.
int64_t liveSetBytes(const std::vector<LiveRange> &ranges);

} // namespace mlir::loom

#endif // LOOM_EMIT_ARENAASSIGNMENT_H
