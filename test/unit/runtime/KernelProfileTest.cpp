//===- KernelProfileTest.cpp - loom-run --profile's kernel curves ---------===//

#include "runtime/driver/KernelProfile.h"
#include "runtime/OpTable.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace loom::runtime;

TEST(KernelProfile, FitsACallOverheadAndARate) {
  // 2 us a call and 4 GB/s, measured at 4 KB and 1 MB.
  auto seconds = [](double bytes) { return 2e-6 + bytes / 4e9; };
  KernelCurve k = fitKernelCurve("add", false, 4096, seconds(4096), 1 << 20,
                                 seconds(1 << 20));
  EXPECT_EQ(k.op, "add");
  EXPECT_FALSE(k.flopRated);
  EXPECT_NEAR(k.rate, 4e9, 4e9 * 1e-9);
  EXPECT_NEAR(k.callSeconds, 2e-6, 1e-12);
}

TEST(KernelProfile, NoiseNeverGivesANegativeCallOrRate) {
  // The large size measured no slower: all of its time is work.
  KernelCurve flat = fitKernelCurve("relu", false, 1000, 2e-6, 8000, 2e-6);
  EXPECT_EQ(flat.callSeconds, 0);
  EXPECT_DOUBLE_EQ(flat.rate, 8000 / 2e-6);
  // A line through the points that crosses below 0 at no work: no overhead.
  KernelCurve steep = fitKernelCurve("relu", false, 1000, 1e-7, 8000, 4e-6);
  EXPECT_EQ(steep.callSeconds, 0);
  EXPECT_GT(steep.rate, 0);
}

TEST(KernelProfile, CasesAreOpsOfThePlanFormat) {
  std::set<std::string> seen;
  for (const KernelCase &k : kernelCases()) {
    EXPECT_NE(findOp(kernelOp(k)), nullptr) << k.op;
    EXPECT_TRUE(seen.insert(k.op).second) << k.op << " twice";
    // Every case is one instruction whose work grows with its scale.
    loom::plan::Program small, large;
    double smallFlops = k.build(small, kernelOp(k), kSmallScale);
    double largeFlops = k.build(large, kernelOp(k), kLargeScale);
    ASSERT_EQ(small.instructions_size(), 1) << k.op;
    EXPECT_EQ(small.instructions(0).op(), kernelOp(k));
    EXPECT_EQ(k.flopRated, smallFlops > 0) << k.op;
    if (k.flopRated)
      EXPECT_GT(largeFlops, smallFlops) << k.op;
    EXPECT_GT(instructionBytes(large, 0), instructionBytes(small, 0)) << k.op;
  }
  EXPECT_TRUE(seen.count("attention") && seen.count("layer_norm_grad") &&
              seen.count("adamw") && seen.count("cross_entropy") &&
              seen.count("mul:broadcast"));
}

TEST(KernelProfile, InstructionBytesCountEveryOperand) {
  loom::plan::Program p;
  KernelCase adamw;
  for (const KernelCase &k : kernelCases())
    if (k.op == "adamw")
      adamw = k;
  ASSERT_NE(adamw.build, nullptr);
  adamw.build(p, "adamw", 1);
  // Four 1024-float inputs, three of them written back in place.
  EXPECT_EQ(instructionBytes(p, 0), 7 * 1024 * 4);
}

TEST(KernelProfile, MeasuresEveryCaseThroughTheCpuKernels) {
  LocalCommunicator world;
  StatusOr<std::vector<KernelCurve>> curves = measureKernels(world);
  ASSERT_TRUE(curves.isOk()) << curves.status().message();
  ASSERT_EQ(curves->size(), kernelCases().size());
  for (size_t i = 0; i < curves->size(); ++i) {
    const KernelCurve &k = (*curves)[i];
    EXPECT_EQ(k.op, kernelCases()[i].op);
    EXPECT_EQ(k.flopRated, kernelCases()[i].flopRated);
    EXPECT_TRUE(std::isfinite(k.rate) && k.rate > 0) << k.op;
    EXPECT_TRUE(std::isfinite(k.callSeconds) && k.callSeconds >= 0) << k.op;
    // Measured up to the bytes of the larger size.
    loom::plan::Program large;
    kernelCases()[i].build(large, kernelOp(kernelCases()[i]), kLargeScale);
    EXPECT_EQ(k.upToBytes, instructionBytes(large, 0)) << k.op;
  }
}
