//===- FastMathTest.cpp - fastExp and the kernels built on it -------------===//
//
// fastExp is checked against the correctly rounded exp over a sweep of
// every float bit pattern with a stride (both the inline baseline build in
// this file and `expArray`, the widest clone this CPU runs), plus the
// special values; the kernels that use it (softmax rows, sigmoid, tanh-form
// GELU and its gradient, cross-entropy) at the extremes.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"
#include "runtime/kernels/cpu/FastMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace loom::runtime;
using namespace loom::runtime::test;
using loom::runtime::cpu::expArray;
using loom::runtime::cpu::fastExp;
using loom::runtime::cpu::sigmoidArray;
using loom::runtime::cpu::softmaxRow;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Distance in representable floats (both finite or both the same inf).
int64_t ulpDistance(float a, float b) {
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff)
                 : static_cast<int64_t>(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

/// Every `stride`-th float bit pattern that is not NaN.
std::vector<float> floatSweep(uint32_t stride) {
  std::vector<float> xs;
  for (uint64_t b = 0; b <= 0xffffffffu; b += stride) {
    uint32_t bits = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    if (!std::isnan(f))
      xs.push_back(f);
  }
  return xs;
}

/// Worst ulp error of `ys` against the correctly rounded e^x; overflow and
/// underflow must match exactly.
int64_t worstExpUlp(const std::vector<float> &xs, const std::vector<float> &ys,
                    float *worstX) {
  int64_t worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    float want = static_cast<float>(std::exp(static_cast<double>(xs[i])));
    if (std::isinf(want) || std::isinf(ys[i])) {
      EXPECT_EQ(ys[i], want) << "x = " << xs[i];
      continue;
    }
    int64_t d = ulpDistance(ys[i], want);
    if (d > worst) {
      worst = d;
      *worstX = xs[i];
    }
  }
  return worst;
}

TEST(FastMathTest, FastExpWithinTwoUlpOverAllFloats) {
  std::vector<float> xs = floatSweep(251);
  // Dense around the interesting ranges too.
  for (float x = -110.0f; x <= 95.0f; x += 0.00390625f)
    xs.push_back(x);
  std::vector<float> inl(xs.size()), arr(xs.size());
  for (size_t i = 0; i < xs.size(); ++i)
    inl[i] = fastExp(xs[i]);
  expArray(xs.data(), arr.data(), static_cast<int64_t>(xs.size()));
  float wx = 0;
  EXPECT_LE(worstExpUlp(xs, inl, &wx), 2) << "inline, worst at x = " << wx;
  EXPECT_LE(worstExpUlp(xs, arr, &wx), 2) << "expArray, worst at x = " << wx;
#ifndef __FMA__
  // This file's scalar baseline build and the runtime's widest clone give
  // the same bits (the runtime builds with -ffp-contract=off).
  for (size_t i = 0; i < xs.size(); ++i)
    if (std::memcmp(&inl[i], &arr[i], sizeof(float)) != 0) {
      ADD_FAILURE() << "clone differs at x = " << xs[i] << ": " << arr[i]
                    << " vs " << inl[i];
      break;
    }
#endif
}

TEST(FastMathTest, FastExpSpecialValues) {
  std::vector<float> xs = {0.0f,      -0.0f,     1.0f,        -1.0f,
                           kInf,      -kInf,     kNaN,        88.72283f,
                           88.7229f,  89.0f,     1000.0f,     -87.33655f,
                           -87.5f,    -100.0f,   -103.27893f, -103.97208f,
                           -104.0f,   -1000.0f,  1e-30f,      -1e-30f,
                           std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max()};
  std::vector<float> ys(xs.size());
  expArray(xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    float x = xs[i];
    for (float y : {ys[i], fastExp(x)}) {
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(y));
        continue;
      }
      float want = static_cast<float>(std::exp(static_cast<double>(x)));
      if (std::isinf(want) || want == 0.0f)
        EXPECT_EQ(y, want) << "x = " << x;
      else
        EXPECT_LE(ulpDistance(y, want), 2) << "x = " << x << ": " << y
                                           << " vs " << want;
    }
  }
  EXPECT_EQ(fastExp(0.0f), 1.0f);
  EXPECT_GT(fastExp(-103.27893f), 0.0f); // subnormal, not flushed
}

TEST(FastMathTest, SigmoidArrayAtTheExtremes) {
  std::vector<float> xs = {-kInf, -1e4f, -100.0f, -88.0f, -20.0f, -1.0f,
                           -1e-6f, 0.0f, 1e-6f,  1.0f,    20.0f,  100.0f,
                           1e4f,   kInf};
  std::vector<float> ys(xs.size());
  sigmoidArray(xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    double want = 1.0 / (1.0 + std::exp(-static_cast<double>(xs[i])));
    // The fast exp's own error (a few f32 ulps) against a double reference.
    EXPECT_NEAR(ys[i], want, 1e-7 + 4e-7 * want) << "x = " << xs[i];
  }
  float nan = kNaN, y;
  sigmoidArray(&nan, &y, 1);
  EXPECT_TRUE(std::isnan(y));
}

TEST(FastMathTest, SoftmaxRowAllLengthsAndMaskedEntries) {
  std::mt19937 rng(5);
  for (int64_t n = 1; n <= 70; ++n) {
    std::vector<float> x = randomFloats(n, rng, -30, 30);
    if (n > 3) {
      x[1] = -kInf; // a masked score
      x[n - 1] = 1e30f;
    }
    std::vector<float> y(n);
    softmaxRow(x.data(), y.data(), n);
    double mx = -INFINITY, sum = 0;
    for (float v : x)
      mx = std::max(mx, static_cast<double>(v));
    for (float v : x)
      sum += std::exp(v - mx);
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = std::exp(x[i] - mx) / sum;
    EXPECT_TRUE(allClose(y, want, 1e-7, 1e-6)) << "n = " << n;
    // In place too.
    softmaxRow(x.data(), x.data(), n);
    EXPECT_EQ(x, y);
  }
}

TEST(FastMathTest, CausalSoftmaxBlockMatchesShortRowsBitwise) {
  std::mt19937 rng(6);
  for (int64_t n : {1, 7, 8, 9, 33, 64}) {
    std::vector<float> s = randomFloats(n * n, rng, -8, 8);
    std::vector<float> p = s;
    loom::runtime::cpu::softmaxBlock(p.data(), n, n, /*causal=*/true);
    std::vector<float> dp = randomFloats(n * n, rng, -1, 1), ds = dp;
    loom::runtime::cpu::softmaxGradBlock(p.data(), ds.data(), n, n, true);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> row(s.begin() + i * n, s.begin() + i * n + i + 1);
      softmaxRow(row.data(), row.data(), i + 1);
      std::vector<float> drow(dp.begin() + i * n, dp.begin() + i * n + i + 1);
      loom::runtime::cpu::softmaxGradRow(row.data(), drow.data(), i + 1);
      for (int64_t j = 0; j < n; ++j) {
        float want = j <= i ? row[j] : 0.0f;
        float wantD = j <= i ? drow[j] : 0.0f;
        EXPECT_EQ(p[i * n + j], want) << n << " " << i << " " << j;
        EXPECT_EQ(ds[i * n + j], wantD) << n << " " << i << " " << j;
      }
    }
  }
}

TEST(FastMathTest, TanhGeluAndGradAtTheExtremes) {
  std::vector<float> x = {-kInf, -1e30f, -1e4f, -100.0f, -20.0f, -9.0f,
                          -5.0f, -3.0f,  -1.0f, -0.1f,   -1e-8f, 0.0f,
                          1e-8f, 0.1f,   1.0f,  3.0f,    5.0f,   9.0f,
                          20.0f, 100.0f, 1e4f,  1e30f,   kInf,   kNaN};
  int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> dy(n, 1.0f);
  auto attrs = [](plan::Instruction &i) { setI(i, "approximate", 1); };
  bool ok;
  auto y = runF32("gelu", {HostTensor::fromF32({n}, x)}, {{n}}, attrs, &ok);
  ASSERT_TRUE(ok);
  auto g = runF32("gelu_grad",
                  {HostTensor::fromF32({n}, dy), HostTensor::fromF32({n}, x)},
                  {{n}}, attrs, &ok);
  ASSERT_TRUE(ok);
  const double c = std::sqrt(2 / M_PI), k = 0.044715;
  for (int64_t i = 0; i < n; ++i) {
    double v = x[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(y[0][i]));
      EXPECT_TRUE(std::isnan(g[0][i]));
      continue;
    }
    if (std::isinf(v)) {
      // +inf passes through; -inf gives NaN (-inf * 0), as PyTorch does.
      if (v > 0) {
        EXPECT_EQ(y[0][i], kInf);
      }
      continue;
    }
    if (std::fabs(v) > 1e18) {
      // x^2 overflows du/dx there (in PyTorch's formula too): forward only.
      EXPECT_EQ(y[0][i], v > 0 ? x[i] : -0.0f) << "x = " << v;
      continue;
    }
    double u = c * (v + k * v * v * v);
    double t = std::tanh(u);
    double wantY = 0.5 * v * (1 + t);
    double sech2 = 1 - t * t;
    double wantG =
        0.5 * (1 + t) + 0.5 * v * sech2 * c * (1 + 3 * k * v * v);
    if (std::isnan(wantG))
      wantG = v > 0 ? 1 : 0; // inf * 0 in the double reference
    // Double references; the bounds are the fast tanh's error plus f32
    // rounding (GELU is well-conditioned: its derivative is at most ~1.13).
    EXPECT_NEAR(y[0][i], wantY, 1e-6 + 1e-6 * std::fabs(wantY)) << "x = " << v;
    EXPECT_FALSE(std::isnan(g[0][i])) << "x = " << v;
    EXPECT_NEAR(g[0][i], wantG, 1e-6 + 1e-5 * std::fabs(wantG)) << "x = " << v;
  }
}

TEST(FastMathTest, CrossEntropyWideRows) {
  // 3 rows of 67 classes (not a multiple of any vector width), logits in
  // [-60, 60] and one row with a huge logit.
  std::mt19937 rng(9);
  int64_t rows = 3, classes = 67;
  std::vector<float> logits = randomFloats(rows * classes, rng, -60, 60);
  logits[2 * classes + 5] = 1e30f;
  std::vector<int64_t> target = {3, 66, 5};
  HostTensor t(ElemType::I64, {rows});
  std::memcpy(t.bytes.data(), target.data(), rows * sizeof(int64_t));
  auto r = runOp("cross_entropy",
                 {HostTensor::fromF32({rows, classes}, logits), t}, {{1}});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  auto g = runOp("cross_entropy_grad",
                 {HostTensor::fromF32({rows, classes}, logits), t},
                 {{rows, classes}});
  ASSERT_TRUE(g.isOk()) << g.status().message();
  double total = 0;
  std::vector<double> wantG(rows * classes);
  for (int64_t i = 0; i < rows; ++i) {
    const float *row = logits.data() + i * classes;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < classes; ++j)
      mx = std::max(mx, static_cast<double>(row[j]));
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(row[j] - mx);
    total += mx + std::log(sum) - row[target[i]];
    for (int64_t j = 0; j < classes; ++j)
      wantG[i * classes + j] =
          (std::exp(row[j] - mx) / sum - (j == target[i])) / rows;
  }
  // Double reference of a mean of order 1: f32 rounding ~1e-7 relative.
  EXPECT_NEAR(r->at(0).toF32()[0], total / rows, 1e-6 * (total / rows));
  EXPECT_TRUE(allClose(g->at(0).toF32(), wantG, 1e-7, 1e-5));
}

} // namespace

namespace {

TEST(KernelThreadsTest, SumToColumnRangesMatchTheSerialOrder) {
  // Big enough for the column-range threads (inner >= 512, above
  // kParallelThreshold elements): each output is 0 plus the rows in order,
  // in float, exactly as the serial loop adds them.
  std::mt19937 rng(12);
  for (auto [xs, ys] : std::vector<std::pair<std::vector<int64_t>,
                                             std::vector<int64_t>>>{
           {{96, 1000}, {1000}},
           {{4, 24, 700}, {4, 1, 700}},
           {{3, 40, 520}, {1, 40, 520}}}) {
    auto x = randomFloats(numElements(xs), rng);
    auto r = runOp("sum_to", {HostTensor::fromF32(xs, x)}, {ys});
    ASSERT_TRUE(r.isOk()) << r.status().message();
    std::vector<float> got = (*r)[0].toF32();
    int64_t inner = xs.back(), outer = numElements(xs) / inner;
    std::vector<float> want(numElements(ys), 0.0f);
    for (int64_t o = 0; o < outer; ++o) {
      // The output row `o` adds into: drop the dims that ys broadcasts.
      int64_t rem = o, off = 0, stride = inner;
      for (int d = static_cast<int>(xs.size()) - 2; d >= 0; --d) {
        int64_t id = rem % xs[d];
        rem /= xs[d];
        int64_t yd = d + static_cast<int>(ys.size()) - static_cast<int>(xs.size());
        if (yd >= 0 && ys[yd] != 1) {
          off += id * stride;
          stride *= ys[yd];
        }
      }
      for (int64_t i = 0; i < inner; ++i)
        want[off + i] += x[o * inner + i];
    }
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)),
              0)
        << shapeToString(xs);
  }
}

} // namespace
