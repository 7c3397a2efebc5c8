//===- SampleOrder.h - Which sample each place of the run reads -*- C++ -*-===//
//
// A run reads its data as one global sequence of positions: step i's global
// batch is positions [i*B, (i+1)*B), and a rank's buffer takes its slice of
// them (`firstSample`). The order maps a position to a sample of an array of
// N samples, the same on every rank and for every plan, so a run's losses do
// not depend on its parallel layout, and the data position of a run is its
// step count alone:
//
// - sequential: position p reads sample p mod N (the file's order, again
//   from the start after each epoch);
// - shuffled(seed): epoch e = p div N reads the samples in the order of a
//   seeded permutation of [0, N), a new one each epoch. The permutation is
//   computed, not stored (a keyed Feistel network over the next power of
//   four, walked until it lands in [0, N)), so it costs no memory at any N
//   and each rank computes only the places it reads.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DATA_SAMPLEORDER_H
#define LOOM_RUNTIME_DATA_SAMPLEORDER_H

#include <cstdint>

namespace loom::runtime {

class SampleOrder {
public:
  static SampleOrder sequential() { return SampleOrder(false, 0); }
  static SampleOrder shuffled(uint64_t seed) { return SampleOrder(true, seed); }

  bool isShuffled() const { return shuffle; }
  uint64_t seed() const { return key; }

  /// The sample that global position `position` (>= 0) reads from an
  /// array of `n` (>= 1) samples.
  int64_t sample(int64_t position, int64_t n) const;

private:
  SampleOrder(bool shuffle, uint64_t seed) : shuffle(shuffle), key(seed) {}
  bool shuffle;
  uint64_t key;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DATA_SAMPLEORDER_H
