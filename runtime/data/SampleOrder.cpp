//===- SampleOrder.cpp - Which sample each place reads ----------*- C++ -*-===//

#include "runtime/data/SampleOrder.h"

namespace loom::runtime {

namespace {

/// SplitMix64's finaliser: a bijective 64-bit mix.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The place of `i` in a keyed permutation of [0, n): a balanced Feistel
/// network over 2*half bits (a permutation of [0, 4^half) with 4^half >= n),
/// applied again while the result lies outside [0, n) ("cycle walking",
/// which restricts it to a permutation of [0, n)).
uint64_t permute(uint64_t i, uint64_t n, uint64_t key) {
  int bits = 64 - __builtin_clzll(n - 1); // bits of n - 1, n >= 2
  int half = (bits + 1) / 2;
  uint64_t mask = (uint64_t{1} << half) - 1;
  do {
    uint64_t left = i >> half, right = i & mask;
    for (uint64_t round = 0; round < 6; ++round) {
      uint64_t f = mix(key ^ mix(right + (round << 56))) & mask;
      uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    i = (left << half) | right;
  } while (i >= n);
  return i;
}

} // namespace

int64_t SampleOrder::sample(int64_t position, int64_t n) const {
  int64_t place = position % n;
  if (!shuffle || n < 2)
    return place;
  uint64_t epoch = static_cast<uint64_t>(position / n);
  uint64_t epochKey = mix(mix(key) + epoch);
  return static_cast<int64_t>(permute(static_cast<uint64_t>(place),
                                      static_cast<uint64_t>(n), epochKey));
}

} // namespace loom::runtime
