//===- CollectivesTest.cpp - loom-run's choice of NCCL or host staging ===//

#include "runtime/driver/Collectives.h"

#include <gtest/gtest.h>

using namespace loom::runtime;

namespace {

CollectivesChoice choose(CollectivesMode mode, int world, int devices,
                         bool nccl = true) {
  StatusOr<CollectivesChoice> c = chooseCollectives(mode, world, devices, nccl);
  EXPECT_TRUE(c.isOk()) << c.status().message();
  return c.isOk() ? *c : CollectivesChoice{};
}

std::string chooseError(CollectivesMode mode, int world, int devices,
                        bool nccl = true) {
  StatusOr<CollectivesChoice> c = chooseCollectives(mode, world, devices, nccl);
  EXPECT_FALSE(c.isOk());
  return c.isOk() ? "" : c.status().message();
}

TEST(CollectivesTest, AutoStagesWhenRanksShareAGpu) {
  CollectivesChoice c = choose(CollectivesMode::Auto, 2, 1);
  EXPECT_TRUE(c.hostStaged);
  EXPECT_EQ(c.reason, "2 ranks share 1 GPU");
  // Four ranks on two GPUs (local rank % 2): still shared.
  c = choose(CollectivesMode::Auto, 4, 2);
  EXPECT_TRUE(c.hostStaged);
  EXPECT_EQ(c.reason, "4 ranks share 2 GPUs");
}

TEST(CollectivesTest, AutoTakesNcclWithOneGpuPerRank) {
  CollectivesChoice c = choose(CollectivesMode::Auto, 4, 4);
  EXPECT_FALSE(c.hostStaged);
  EXPECT_EQ(c.reason, "one GPU per rank");
  c = choose(CollectivesMode::Auto, 1, 1);
  EXPECT_FALSE(c.hostStaged);
  EXPECT_EQ(c.reason, "one rank");
}

TEST(CollectivesTest, AutoStagesWithoutNccl) {
  CollectivesChoice c = choose(CollectivesMode::Auto, 2, 2, false);
  EXPECT_TRUE(c.hostStaged);
  EXPECT_EQ(c.reason, "NCCL is not available");
}

TEST(CollectivesTest, HostAlwaysStages) {
  EXPECT_TRUE(choose(CollectivesMode::Host, 4, 4).hostStaged);
  EXPECT_TRUE(choose(CollectivesMode::Host, 1, 1, false).hostStaged);
  EXPECT_TRUE(choose(CollectivesMode::Host, 2, 1).hostStaged);
}

TEST(CollectivesTest, NcclIsForcedOrFails) {
  EXPECT_FALSE(choose(CollectivesMode::Nccl, 2, 2).hostStaged);
  EXPECT_FALSE(choose(CollectivesMode::Nccl, 1, 1).hostStaged);
  EXPECT_EQ(chooseError(CollectivesMode::Nccl, 2, 1),
            "--collectives nccl: 2 ranks share 1 GPU, and NCCL takes one "
            "rank per GPU; use --collectives host or auto");
  EXPECT_NE(chooseError(CollectivesMode::Nccl, 2, 2, false)
                .find("--collectives nccl: NCCL is not available"),
            std::string::npos);
}

TEST(CollectivesTest, ParseMode) {
  EXPECT_EQ(*parseCollectivesMode("auto"), CollectivesMode::Auto);
  EXPECT_EQ(*parseCollectivesMode("nccl"), CollectivesMode::Nccl);
  EXPECT_EQ(*parseCollectivesMode("host"), CollectivesMode::Host);
  StatusOr<CollectivesMode> bad = parseCollectivesMode("mpi");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(),
            "--collectives must be nccl, host or auto, got 'mpi'");
  for (CollectivesMode m :
       {CollectivesMode::Auto, CollectivesMode::Nccl, CollectivesMode::Host})
    EXPECT_EQ(*parseCollectivesMode(collectivesModeName(m)), m);
}

} // namespace
