//===- MemoryModelTest.cpp - What one device holds and whether it fits ----===//

#include "passes/planner/MemoryModel.h"

#include <gtest/gtest.h>

using namespace mlir::loom::planner;

namespace {

constexpr int64_t kMiB = 1024 * 1024, kGiB = 1024 * kMiB;

/// 1 + 1 + 2 + 3 GiB and 512 MiB of workspace: 7.5 GiB.
DeviceMemory sevenAndAHalfGiB() {
  DeviceMemory m;
  m.parameters = kGiB;
  m.gradients = kGiB;
  m.optimizerState = 2 * kGiB;
  m.activations = 3 * kGiB;
  m.workspace = 512 * kMiB;
  return m;
}

TEST(MemoryModel, FitsWithRoomToSpare) {
  DeviceMemory m = sevenAndAHalfGiB();
  EXPECT_EQ(m.total(), 8053063680);
  MemoryFit fit = checkMemoryFit(m, 8 * kGiB);
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.requiredBytes, 8053063680);
  EXPECT_EQ(fit.capacityBytes, 8589934592);
  EXPECT_EQ(fit.shortfallBytes, 0);
}

TEST(MemoryModel, ExactlyFullFits) {
  EXPECT_TRUE(checkMemoryFit(sevenAndAHalfGiB(), 8053063680).fits);
  EXPECT_FALSE(checkMemoryFit(sevenAndAHalfGiB(), 8053063679).fits);
}

TEST(MemoryModel, ShortfallWhenItDoesNotFit) {
  MemoryFit fit = checkMemoryFit(sevenAndAHalfGiB(), 7 * kGiB);
  EXPECT_FALSE(fit.fits);
  EXPECT_EQ(fit.shortfallBytes, 536870912); // 512 MiB
}

} // namespace
