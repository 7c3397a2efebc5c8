//===- ProfileTest.cpp - loom-run --profile's curve fits --------------------===//

#include "runtime/driver/Options.h"
#include "runtime/driver/Profile.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace loom::runtime;

TEST(ProfileFit, RecoversAGemmCurve) {
  // rate(d) = 2e11 (d / (d + 48))^3, measured at the profile's sides.
  std::vector<std::pair<double, double>> samples;
  for (double d : {16, 32, 64, 128, 256, 512, 1024})
    samples.push_back({d, 2e11 * std::pow(d / (d + 48), 3)});
  GemmCurve fit = fitGemmCurve(samples);
  EXPECT_NEAR(fit.halfDim, 48, 48 * 0.02); // the grid's step
  EXPECT_NEAR(fit.peakFlops, 2e11, 2e11 * 0.03);
}

TEST(ProfileFit, AFlatRateHasNoFallOff) {
  std::vector<std::pair<double, double>> samples;
  for (double d : {16, 64, 256, 1024})
    samples.push_back({d, 5e10});
  GemmCurve fit = fitGemmCurve(samples);
  EXPECT_EQ(fit.halfDim, 0);
  EXPECT_NEAR(fit.peakFlops, 5e10, 1);
}

TEST(ProfileFit, RecoversAlphaAndBetaOfARing) {
  // 4 ranks, 2 us a hop, 3 GB/s: t = 6 alpha + 1.5 S / B.
  std::vector<std::pair<double, double>> samples;
  for (double bytes = 4; bytes <= 16 << 20; bytes *= 4)
    samples.push_back({bytes, 6 * 2e-6 + 1.5 * bytes / 3e9});
  LinkFit fit = fitAllReduce(samples, 4);
  EXPECT_NEAR(fit.latencyS, 2e-6, 1e-9);
  EXPECT_NEAR(fit.bandwidthBytesPerS, 3e9, 3e9 * 1e-6);
}

TEST(ProfileFit, NegativeLatencyFallsBackToBandwidthAlone) {
  // Timings shorter for tiny messages than the line through the big ones.
  std::vector<std::pair<double, double>> samples = {
      {4, 1e-9}, {1 << 20, 1e-3}, {4 << 20, 4e-3}};
  LinkFit fit = fitAllReduce(samples, 2);
  EXPECT_EQ(fit.latencyS, 0);
  EXPECT_GT(fit.bandwidthBytesPerS, 0);
}

TEST(ProfileFit, InStepCostsAreAtLeastTheCollectiveAlone) {
  // Rounds of compute noisier than a tiny all-reduce: its cost is what it
  // took alone; a size measured only in a step keeps its figure.
  std::vector<std::pair<double, double>> alone = {{4, 6e-6}, {1 << 20, 4e-4}};
  std::vector<std::pair<double, double>> inStep = {
      {4, -2e-6}, {1 << 20, 9e-4}, {4 << 20, 3e-3}};
  auto costs = inStepCosts(inStep, alone);
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_EQ(costs[0], (std::pair<double, double>{4, 6e-6}));
  EXPECT_EQ(costs[1], (std::pair<double, double>{1 << 20, 9e-4}));
  EXPECT_EQ(costs[2], (std::pair<double, double>{4 << 20, 3e-3}));
}

TEST(ProfileFit, OverlapIsWhatStartingEarlySaves) {
  // Sizes of 1 MiB and up: the overlapped ones added 1 ms of the blocking
  // ones' 4 ms, so three quarters ran beside the compute; the tiny size's
  // noise does not count.
  std::vector<std::pair<double, double>> blocking = {
      {4, 1e-5}, {1 << 20, 1e-3}, {4 << 20, 3e-3}};
  std::vector<std::pair<double, double>> overlapped = {
      {4, 9e-4}, {1 << 20, 2.5e-4}, {4 << 20, 7.5e-4}};
  EXPECT_DOUBLE_EQ(overlapShare(blocking, overlapped), 0.75);
  // Slower when overlapped (CPU ranks, whose cores move the data): 0.
  EXPECT_EQ(overlapShare(overlapped, blocking), 0);
  // Nothing big enough measured: the datasheet's full overlap.
  EXPECT_EQ(overlapShare({{4, 1e-5}}, {{4, 0}}), 1);
}

TEST(ProfileFit, OperandReadsGiveARateAndTheCache) {
  const double mib = 1 << 20;
  // 2 MiB an operand: 1 ms more out of cache, half of it at 16 MiB.
  std::vector<std::pair<double, double>> pools = {
      {4 * mib, 0},     {8 * mib, 2e-4},  {16 * mib, 5e-4},
      {32 * mib, 9e-4}, {64 * mib, 1e-3}, {128 * mib, 1e-3}};
  OperandFit fit = fitOperandReads(pools, 2 * mib);
  EXPECT_DOUBLE_EQ(fit.bytesPerS, 2 * mib / 1e-3);
  EXPECT_DOUBLE_EQ(fit.cacheBytes, 16 * mib);
  // Between two pools: geometrically, from where the extra time was.
  pools[2].second = 8e-4;
  EXPECT_NEAR(fitOperandReads(pools, 2 * mib).cacheBytes,
              8 * mib * std::pow(2.0, 0.5), 1);
  // Noise below zero counts as none; the smallest pool already out of
  // cache is the cache; no extra time at all measures nothing.
  pools[1].second = -1e-4;
  EXPECT_NEAR(fitOperandReads(pools, 2 * mib).cacheBytes,
              8 * mib * std::pow(2.0, 0.5 / 0.8), 1);
  pools[0].second = 7e-4;
  EXPECT_DOUBLE_EQ(fitOperandReads(pools, 2 * mib).cacheBytes, 4 * mib);
  for (auto &p : pools)
    p.second = 0;
  OperandFit none = fitOperandReads(pools, 2 * mib);
  EXPECT_EQ(none.bytesPerS, 0);
  EXPECT_EQ(none.cacheBytes, 0);
}

TEST(ProfileOptions, ProfileTakesQuietOnly) {
  auto parse = [](std::vector<const char *> args) {
    args.insert(args.begin(), "loom-run");
    return parseOptions(int(args.size()), const_cast<char **>(args.data()));
  };
  StatusOr<RunOptions> ok = parse({"--profile", "c.json", "--quiet"});
  ASSERT_TRUE(ok.isOk()) << ok.status().message();
  EXPECT_EQ(ok->profilePath, "c.json");
  EXPECT_TRUE(ok->quiet);
  for (auto bad : {std::vector<const char *>{"--profile", "c.json", "p.loomplan"},
                   std::vector<const char *>{"--profile=c.json", "--steps", "2"},
                   std::vector<const char *>{"--profile", "c.json", "--device",
                                             "cuda"}}) {
    StatusOr<RunOptions> r = parse(bad);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("--profile FILE takes --quiet only"),
              std::string::npos)
        << r.status().message();
  }
}
