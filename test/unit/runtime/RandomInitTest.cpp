//===- RandomInitTest.cpp - Deterministic random parameter values ---------===//

#include "runtime/init/RandomInit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace loom::runtime;
namespace plan = loom::plan;

namespace {

plan::InitRule normal(double std) {
  plan::InitRule rule;
  rule.set_kind(plan::InitRule::NORMAL);
  rule.set_std(std);
  return rule;
}

std::vector<float> fill(const plan::InitRule &rule, uint64_t seed,
                        const std::string &name,
                        const std::vector<int64_t> &global,
                        const std::vector<int64_t> &offset,
                        const std::vector<int64_t> &local) {
  int64_t n = 1;
  for (int64_t d : local)
    n *= d;
  std::vector<float> out(n, -123.0f);
  fillByInitRule(rule, seed, name, global, offset, local, out.data());
  return out;
}

std::vector<float> fillWhole(const plan::InitRule &rule, uint64_t seed,
                             const std::string &name,
                             const std::vector<int64_t> &shape) {
  return fill(rule, seed, name, shape, std::vector<int64_t>(shape.size(), 0),
              shape);
}

TEST(RandomInitTest, SameSeedAndNameGiveTheSameValues) {
  auto a = fillWhole(normal(0.02), 7, "h.0.attn.weight", {16, 24});
  auto b = fillWhole(normal(0.02), 7, "h.0.attn.weight", {16, 24});
  EXPECT_EQ(a, b);
}

TEST(RandomInitTest, SeedsAndNamesGiveDifferentValues) {
  auto a = fillWhole(normal(0.02), 7, "w", {64});
  auto otherSeed = fillWhole(normal(0.02), 8, "w", {64});
  auto otherName = fillWhole(normal(0.02), 7, "v", {64});
  int sameSeed = 0, sameName = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sameSeed += a[i] == otherSeed[i];
    sameName += a[i] == otherName[i];
  }
  EXPECT_EQ(sameSeed, 0);
  EXPECT_EQ(sameName, 0);
}

TEST(RandomInitTest, ValuesDependOnTheGlobalIndexOnly) {
  // The same flat tensor under another shape has the same elements.
  EXPECT_EQ(fillWhole(normal(1), 3, "w", {6, 4}),
            fillWhole(normal(1), 3, "w", {24}));
}

TEST(RandomInitTest, ShardIsTheSliceOfTheUnshardedTensor) {
  std::vector<int64_t> global{6, 5, 4};
  auto whole = fillWhole(normal(0.02), 11, "w", global);
  for (const auto &[offset, local] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{0, 0, 0}, {3, 5, 4}},
           {{3, 0, 0}, {3, 5, 4}},
           {{0, 2, 0}, {6, 3, 4}},
           {{2, 1, 2}, {2, 3, 2}}}) {
    auto shard = fill(normal(0.02), 11, "w", global, offset, local);
    size_t k = 0;
    for (int64_t i = 0; i < local[0]; ++i)
      for (int64_t j = 0; j < local[1]; ++j)
        for (int64_t l = 0; l < local[2]; ++l, ++k) {
          int64_t g =
              ((i + offset[0]) * global[1] + j + offset[1]) * global[2] + l +
              offset[2];
          ASSERT_EQ(shard[k], whole[g]) << "element " << k;
        }
    EXPECT_EQ(k, shard.size());
  }
}

TEST(RandomInitTest, NormalHasTheRuleMeanAndStd) {
  const int64_t n = 200000;
  auto v = fillWhole(normal(0.02), 1, "transformer.wte.weight", {n});
  double sum = 0, sumSq = 0;
  for (float x : v) {
    sum += x;
    sumSq += double(x) * x;
  }
  double mean = sum / n, stddev = std::sqrt(sumSq / n - mean * mean);
  // Standard errors: 0.02/sqrt(n) = 4.5e-5 for the mean, about 0.16% of the
  // std for the std.
  EXPECT_NEAR(mean, 0.0, 2.5e-4);
  EXPECT_NEAR(stddev, 0.02, 0.02 * 0.01);
  // A normal, not a uniform: about 4.55% of samples beyond 2 std.
  int64_t tails = 0;
  for (float x : v)
    tails += std::fabs(x) > 0.04f;
  EXPECT_NEAR(double(tails) / n, 0.0455, 0.003);
}

TEST(RandomInitTest, OnesAndZeros) {
  plan::InitRule ones, zeros;
  ones.set_kind(plan::InitRule::ONES);
  zeros.set_kind(plan::InitRule::ZEROS);
  EXPECT_EQ(fillWhole(ones, 5, "ln.weight", {3}),
            (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(fillWhole(zeros, 5, "ln.bias", {2, 2}),
            (std::vector<float>{0, 0, 0, 0}));
}

TEST(RandomInitTest, ScalarParameter) {
  auto a = fill(normal(1), 9, "s", {}, {}, {});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_NE(a[0], -123.0f);
  EXPECT_EQ(a, fill(normal(1), 9, "s", {}, {}, {}));
}

} // namespace
