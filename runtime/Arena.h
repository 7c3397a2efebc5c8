//===- Arena.h - The one allocation of a program -------------------*- C++ -*-===//
//
// The compiler owns memory: every buffer has a fixed offset in its program's
// arena, so a rank allocates exactly one 64-byte aligned block and nothing
// else per step.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_ARENA_H
#define LOOM_RUNTIME_ARENA_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <cstdlib>
#include <memory>

namespace loom::runtime {

class Arena {
public:
  static constexpr int64_t kAlignment = 64;

  /// Allocates `bytes` zeroed bytes aligned to `kAlignment`, recorded in the
  /// host ledger (runtime/support/MemoryLedger.h).
  static StatusOr<Arena> allocate(int64_t bytes);

  uint8_t *data() { return storage.get(); }
  const uint8_t *data() const { return storage.get(); }
  int64_t size() const { return bytes; }

private:
  /// Frees the block and takes its bytes off the host ledger.
  struct Free {
    int64_t bytes;
    void operator()(uint8_t *p) const;
  };
  std::unique_ptr<uint8_t, Free> storage;
  int64_t bytes = 0;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_ARENA_H
