//===- MemoryLedgerTest.cpp - The runtime's count of tensor bytes ---------===//

#include "runtime/support/MemoryLedger.h"
#include "TestPlans.h"
#include "runtime/Arena.h"
#include "runtime/Executor.h"

#include <gtest/gtest.h>

using namespace loom::runtime;
using namespace loom::runtime::test;

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

TEST(MemoryLedger, KernelsShareTheirScratchForOneCall) {
  // Two attention instructions, Sq = Sk = 8 and 32: each keeps its
  // probabilities only during its call (Sq x Sk floats, one thread), so the
  // program holds the larger scratch once, not both.
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  for (int64_t s : {8, 32}) {
    std::vector<int32_t> in;
    for (const char *n : {"q", "k", "v"})
      in.push_back(
          addBuffer(prog, n + std::to_string(s), plan::INPUT, {1, 1, s, 4}));
    int32_t out =
        addBuffer(prog, "o" + std::to_string(s), plan::OUTPUT, {1, 1, s, 4});
    plan::Instruction &inst = addInst(prog, "attention", in, {out});
    setF(inst, "scale", 0.5);
  }
  MemoryLedger &host = MemoryLedger::host();
  int64_t before = host.current();
  LocalCommunicator world;
  auto exec = Executor::create(p, world);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  EXPECT_EQ(host.current() - before, prog.arena_bytes() + 32 * 32 * 4);
  exec->reset();
  EXPECT_EQ(host.current(), before);
}

} // namespace
