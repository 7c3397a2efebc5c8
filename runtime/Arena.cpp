//===- Arena.cpp - The one allocation of a program ---------------*- C++ -*-===//

#include "runtime/Arena.h"

#include "runtime/support/MemoryLedger.h"

#include <cstring>

namespace loom::runtime {

StatusOr<Arena> Arena::allocate(int64_t bytes) {
  if (bytes < 0)
    return makeError("negative arena size %lld", (long long)bytes);
  // aligned_alloc needs a multiple of the alignment, and at least one block.
  int64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0)
    rounded = kAlignment;
  void *p = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
  if (!p)
    return makeError("cannot allocate an arena of %lld bytes",
                     (long long)bytes);
  std::memset(p, 0, static_cast<size_t>(rounded));
  MemoryLedger::host().add(rounded);
  Arena arena;
  arena.storage = std::unique_ptr<uint8_t, Free>(static_cast<uint8_t *>(p),
                                                 Free{rounded});
  arena.bytes = bytes;
  return arena;
}

void Arena::Free::operator()(uint8_t *p) const {
  std::free(p);
  MemoryLedger::host().remove(bytes);
}

} // namespace loom::runtime
