//===- MemoryLedger.cpp - What the runtime holds for tensors --------------===//

#include "runtime/support/MemoryLedger.h"

namespace loom::runtime {

MemoryLedger &MemoryLedger::host() {
  static MemoryLedger ledger;
  return ledger;
}

MemoryLedger &MemoryLedger::device() {
  static MemoryLedger ledger;
  return ledger;
}

void MemoryLedger::add(int64_t bytes) {
  int64_t held = now.fetch_add(bytes) + bytes;
  int64_t seen = most.load();
  while (held > seen && !most.compare_exchange_weak(seen, held)) {
  }
}

void MemoryLedger::remove(int64_t bytes) { now.fetch_sub(bytes); }

} // namespace loom::runtime
