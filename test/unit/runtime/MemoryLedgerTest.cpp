//===- MemoryLedgerTest.cpp - The runtime's count of tensor bytes ---------===//

#include "runtime/support/MemoryLedger.h"
#include "runtime/Arena.h"

#include <gtest/gtest.h>

using namespace loom::runtime;

namespace {

TEST(MemoryLedger, KeepsTheHighWaterMark) {
  MemoryLedger ledger;
  ledger.add(100);
  ledger.add(50);
  ledger.remove(120);
  ledger.add(10);
  EXPECT_EQ(ledger.current(), 40);
  EXPECT_EQ(ledger.peak(), 150);
  ledger.resetPeak();
  EXPECT_EQ(ledger.peak(), 40);
}

TEST(MemoryLedger, CountedVectorsAndArenasAreOnTheHostLedger) {
  MemoryLedger &host = MemoryLedger::host();
  int64_t before = host.current();
  {
    CountedVector<float> v(1000);
    EXPECT_EQ(host.current(), before + 4000);
    StatusOr<Arena> arena = Arena::allocate(100);
    ASSERT_TRUE(arena.isOk());
    // The arena's block, rounded up to its alignment.
    EXPECT_EQ(host.current(), before + 4000 + 128);
    EXPECT_GE(host.peak(), before + 4128);
  }
  EXPECT_EQ(host.current(), before);
}

} // namespace
