//===- OptimizerTest.cpp - sgd and adamw against PyTorch's formulas ---------===//
//
// The references below are torch.optim.SGD / torch.optim.AdamW's update rules
// written out by hand in double precision, run for 3 steps.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

struct SgdConfig {
  double lr, momentum, weightDecay, dampening;
  bool nesterov;
};

void PrintTo(const SgdConfig &c, std::ostream *os) {
  *os << "lr=" << c.lr << " momentum=" << c.momentum << " wd=" << c.weightDecay
      << " dampening=" << c.dampening << " nesterov=" << c.nesterov;
}

class SgdTest : public ::testing::TestWithParam<SgdConfig> {};

TEST_P(SgdTest, MatchesTorchOverThreeSteps) {
  SgdConfig c = GetParam();
  std::mt19937 rng(11);
  const int64_t n = 10;
  auto p0 = randomFloats(n, rng), g = randomFloats(n, rng);
  bool hasBuf = c.momentum != 0;
  std::vector<HostTensor> inputs = {HostTensor::fromF32({n}, p0),
                                    HostTensor::fromF32({n}, g)};
  if (hasBuf)
    inputs.push_back(HostTensor(ElemType::F32, {n}));
  std::vector<std::vector<int64_t>> outs = {{n}};
  std::vector<int> inPlace = {0};
  if (hasBuf) {
    outs.push_back({n});
    inPlace.push_back(2);
  }
  auto r = runOp("sgd", inputs, outs,
                 [&](plan::Instruction &i) {
                   setF(i, "lr", c.lr);
                   setF(i, "momentum", c.momentum);
                   setF(i, "weight_decay", c.weightDecay);
                   setF(i, "dampening", c.dampening);
                   setI(i, "nesterov", c.nesterov);
                 },
                 inPlace, /*steps=*/3);
  ASSERT_TRUE(r.isOk()) << r.status().message();

  std::vector<double> p(p0.begin(), p0.end()), buf(n, 0);
  for (int t = 1; t <= 3; ++t)
    for (int64_t i = 0; i < n; ++i) {
      double d = g[i] + c.weightDecay * p[i];
      if (c.momentum != 0) {
        buf[i] = t == 1 ? d : c.momentum * buf[i] + (1 - c.dampening) * d;
        d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
      }
      p[i] -= c.lr * d;
    }
  std::vector<float> got = (*r)[0].toF32();
  // Double reference of the same update; parameters of order 1 round at
  // ~1e-7 in f32 per step, so 1e-5 leaves a factor 10 over the steps.
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(got[i], p[i], 1e-5) << "p[" << i << "]";
  if (hasBuf) {
    std::vector<float> gotBuf = (*r)[1].toF32();
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(gotBuf[i], buf[i], 1e-5) << "buf[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, SgdTest,
    ::testing::Values(SgdConfig{0.1, 0, 0, 0, false},
                      SgdConfig{0.1, 0.9, 0, 0, false},
                      SgdConfig{0.05, 0.9, 0.01, 0, false},
                      SgdConfig{0.05, 0.8, 0.1, 0.3, false},
                      SgdConfig{0.05, 0.9, 0.01, 0, true},
                      SgdConfig{0.2, 0, 0.5, 0, false}));

TEST(SgdTest, MomentumWithoutBufferIsRejected) {
  auto r = runOp("sgd", {HostTensor(ElemType::F32, {2}), HostTensor(ElemType::F32, {2})},
                 {{2}}, [](plan::Instruction &i) {
                   setF(i, "lr", 0.1);
                   setF(i, "momentum", 0.9);
                 }, {0});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("momentum buffer must be present"),
            std::string::npos);
}

TEST(SgdTest, NesterovNeedsMomentum) {
  auto r = runOp("sgd", {HostTensor(ElemType::F32, {2}), HostTensor(ElemType::F32, {2})},
                 {{2}}, [](plan::Instruction &i) {
                   setF(i, "lr", 0.1);
                   setI(i, "nesterov", 1);
                 }, {0});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("nesterov"), std::string::npos);
}

struct AdamWConfig {
  double lr, beta1, beta2, eps, weightDecay;
};

void PrintTo(const AdamWConfig &c, std::ostream *os) {
  *os << "lr=" << c.lr << " betas=" << c.beta1 << "/" << c.beta2
      << " eps=" << c.eps << " wd=" << c.weightDecay;
}

class AdamWTest : public ::testing::TestWithParam<AdamWConfig> {};

TEST_P(AdamWTest, MatchesTorchOverThreeSteps) {
  AdamWConfig c = GetParam();
  std::mt19937 rng(12);
  const int64_t n = 9;
  auto p0 = randomFloats(n, rng), g = randomFloats(n, rng);
  auto r = runOp("adamw",
                 {HostTensor::fromF32({n}, p0), HostTensor::fromF32({n}, g),
                  HostTensor(ElemType::F32, {n}), HostTensor(ElemType::F32, {n})},
                 {{n}, {n}, {n}},
                 [&](plan::Instruction &i) {
                   setF(i, "lr", c.lr);
                   setF(i, "beta1", c.beta1);
                   setF(i, "beta2", c.beta2);
                   setF(i, "eps", c.eps);
                   setF(i, "weight_decay", c.weightDecay);
                 },
                 {0, 2, 3}, /*steps=*/3);
  ASSERT_TRUE(r.isOk()) << r.status().message();

  std::vector<double> p(p0.begin(), p0.end()), m(n, 0), v(n, 0);
  for (int t = 1; t <= 3; ++t)
    for (int64_t i = 0; i < n; ++i) {
      p[i] *= 1 - c.lr * c.weightDecay;
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * g[i];
      v[i] = c.beta2 * v[i] + (1 - c.beta2) * g[i] * g[i];
      double mHat = m[i] / (1 - std::pow(c.beta1, t));
      double vHat = v[i] / (1 - std::pow(c.beta2, t));
      p[i] -= c.lr * mHat / (std::sqrt(vHat) + c.eps);
    }
  std::vector<float> gp = (*r)[0].toF32(), gm = (*r)[1].toF32(),
                     gv = (*r)[2].toF32();
  // Double reference of one AdamW step on f32 state of order 1: ~1e-7 each.
  // The gradients are far from 0, so the sign-like step is well-conditioned.
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(gp[i], p[i], 2e-6) << "p[" << i << "]";
    EXPECT_NEAR(gm[i], m[i], 1e-6) << "m[" << i << "]";
    EXPECT_NEAR(gv[i], v[i], 1e-6) << "v[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, AdamWTest,
                         ::testing::Values(AdamWConfig{1e-3, 0.9, 0.999, 1e-8, 0.01},
                                           AdamWConfig{0.1, 0.8, 0.99, 1e-6, 0.1},
                                           AdamWConfig{0.05, 0.9, 0.999, 1e-8, 0}));

TEST(AdamWTest, DefaultsFollowPyTorch) {
  // Only lr given: betas 0.9/0.999, eps 1e-8, weight decay 0.01.
  auto r = runOp("adamw",
                 {HostTensor::fromF32({1}, {1.0f}), HostTensor::fromF32({1}, {0.5f}),
                  HostTensor(ElemType::F32, {1}), HostTensor(ElemType::F32, {1})},
                 {{1}, {1}, {1}}, [](plan::Instruction &i) { setF(i, "lr", 0.1); },
                 {0, 2, 3});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  // Step 1: p = 1*(1-0.001) - 0.1 * 1 (mHat/sqrt(vHat) = sign(g) = 1).
  EXPECT_NEAR((*r)[0].toF32()[0], 0.999 - 0.1, 1e-6);
}

} // namespace
