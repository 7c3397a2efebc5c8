//===- KernelNNTest.cpp - softmax, gelu and norms vs references -----------===//
//
// Forward kernels are compared with naive double-precision references; each
// gradient kernel with the references' analytic formula where short, and
// always with central finite differences of the forward kernel:
// d/dx sum(w * forward(x)) must equal grad(dy = w).
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

using Shape = std::vector<int64_t>;
using AttrFn = std::function<void(plan::Instruction &)>;

/// Finite differences of `sum(w * op(inputs)[0])` with respect to input
/// `which`.
std::vector<double> fdGrad(const std::string &op, std::vector<HostTensor> ins,
                           const Shape &outShape, const AttrFn &attrs,
                           size_t which, const std::vector<float> &w,
                           double eps = 1e-2) {
  Shape s = ins[which].shape;
  return numericGrad(
      [&](const std::vector<float> &x) {
        ins[which] = HostTensor::fromF32(s, x);
        bool ok;
        auto r = runF32(op, ins, {outShape}, attrs, &ok);
        EXPECT_TRUE(ok);
        return ok ? dot(w, r[0]) : 0.0;
      },
      ins[which].toF32(), eps);
}

TEST(KernelNNTest, SoftmaxAlongAnyAxisAndItsGrad) {
  std::mt19937 rng(31);
  std::vector<std::pair<Shape, int64_t>> cases = {
      {{4, 7}, 1},     {{4, 7}, 0},      {{2, 5, 3}, 1},
      {{2, 3, 70}, 2}, {{3, 6, 130}, 1}, {{2, 3, 4}, -1}};
  for (const auto &[xs, axisAttr] : cases) {
    int64_t axis = axisAttr < 0 ? axisAttr + xs.size() : axisAttr;
    auto x = randomFloats(numElements(xs), rng, -3, 3);
    AttrFn attrs = [&](plan::Instruction &i) { setI(i, "axis", axisAttr); };
    bool ok;
    auto r = runF32("softmax", {HostTensor::fromF32(xs, x)}, {xs}, attrs, &ok);
    ASSERT_TRUE(ok);
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      Shape idx = unravel(i, xs);
      double sum = 0;
      for (idx[axis] = 0; idx[axis] < xs[axis]; ++idx[axis])
        sum += std::exp(double(x[ravel(idx, xs)]));
      want[i] = std::exp(double(x[i])) / sum;
    }
    EXPECT_TRUE(allClose(r[0], want, 1e-6, 1e-5)) << shapeToString(xs);

    auto dy = randomFloats(x.size(), rng);
    auto g =
        runF32("softmax_grad",
               {HostTensor::fromF32(xs, dy), HostTensor::fromF32(xs, r[0])},
               {xs}, attrs, &ok);
    ASSERT_TRUE(ok);
    if (x.size() < 200) {
      EXPECT_TRUE(allClose(g[0],
                           fdGrad("softmax", {HostTensor::fromF32(xs, x)}, xs,
                                  attrs, 0, dy, 1e-2),
                           1e-3, 2e-3))
          << shapeToString(xs);
    }
    std::vector<double> wantGrad(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      Shape idx = unravel(i, xs);
      double dotv = 0;
      for (idx[axis] = 0; idx[axis] < xs[axis]; ++idx[axis])
        dotv += double(dy[ravel(idx, xs)]) * r[0][ravel(idx, xs)];
      wantGrad[i] = r[0][i] * (dy[i] - dotv);
    }
    EXPECT_TRUE(allClose(g[0], wantGrad, 1e-6, 1e-5)) << shapeToString(xs);
  }
}

TEST(KernelNNTest, SoftmaxIsStableForLargeInputs) {
  bool ok;
  auto r = runF32(
      "softmax", {HostTensor::fromF32({1, 3}, {1000, 0, 1000})}, {{1, 3}},
      [](plan::Instruction &i) { setI(i, "axis", 1); }, &ok);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(allClose(r[0], {0.5, 0, 0.5}, 1e-7));
}

TEST(KernelNNTest, GeluBothFormsAndGrads) {
  std::mt19937 rng(32);
  Shape xs = {3, 41};
  auto x = randomFloats(numElements(xs), rng, -4, 4);
  for (int approx = 0; approx < 2; ++approx) {
    AttrFn attrs = [&](plan::Instruction &i) {
      if (approx)
        setI(i, "approximate", 1);
    };
    bool ok;
    auto r = runF32("gelu", {HostTensor::fromF32(xs, x)}, {xs}, attrs, &ok);
    ASSERT_TRUE(ok);
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      double v = x[i];
      want[i] = approx ? 0.5 * v *
                             (1 + std::tanh(std::sqrt(2 / M_PI) *
                                            (v + 0.044715 * v * v * v)))
                       : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    }
    EXPECT_TRUE(allClose(r[0], want, 1e-6, 1e-5)) << approx;
    auto dy = randomFloats(x.size(), rng);
    auto g = runF32("gelu_grad",
                    {HostTensor::fromF32(xs, dy), HostTensor::fromF32(xs, x)},
                    {xs}, attrs, &ok);
    ASSERT_TRUE(ok);
    EXPECT_TRUE(allClose(
        g[0],
        fdGrad("gelu", {HostTensor::fromF32(xs, x)}, xs, attrs, 0, dy, 1e-2),
        1e-3, 2e-3))
        << approx;
  }
  auto bad = runOp("gelu", {HostTensor(ElemType::F32, {2})}, {{2}},
                   [](plan::Instruction &i) { setI(i, "approximate", 2); });
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("must be 0 or 1"), std::string::npos);
}

/// Reference layer norm (or RMS norm) in double over `[rows, cols]`.
std::vector<double> refNorm(const std::vector<float> &x, int64_t rows,
                            int64_t cols, const std::vector<float> &scale,
                            const std::vector<float> *bias, double eps,
                            bool rms) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += x[r * cols + j];
      mean /= cols;
    }
    for (int64_t j = 0; j < cols; ++j)
      var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
    var /= cols;
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] =
          (x[r * cols + j] - mean) / std::sqrt(var + eps) * scale[j] +
          (bias ? (*bias)[j] : 0.0);
  }
  return y;
}

TEST(KernelNNTest, LayerNormAndRmsNormWithGrads) {
  std::mt19937 rng(33);
  struct Case {
    Shape x;
    int64_t axis;
  };
  std::vector<Case> cases = {
      {{4, 6}, 1}, {{2, 3, 5}, 1}, {{2, 3, 5}, 2}, {{3, 4, 2, 3}, -2}};
  const double eps = 1e-5;
  for (const char *op : {"layer_norm", "rms_norm"})
    for (const Case &c : cases)
      for (int withBias = 0; withBias < 2; ++withBias) {
        bool rms = std::string(op) == "rms_norm";
        if (rms && withBias)
          continue;
        int64_t axis = c.axis < 0 ? c.axis + c.x.size() : c.axis;
        Shape ps(c.x.begin() + axis, c.x.end());
        int64_t cols = numElements(ps), rows = numElements(c.x) / cols;
        auto x = randomFloats(numElements(c.x), rng, -2, 2);
        auto scale = randomFloats(cols, rng, 0.5, 1.5);
        auto bias = randomFloats(cols, rng);
        AttrFn attrs = [&](plan::Instruction &i) {
          setI(i, "axis", c.axis);
          setF(i, "epsilon", eps);
        };
        std::vector<HostTensor> ins = {HostTensor::fromF32(c.x, x),
                                       HostTensor::fromF32(ps, scale)};
        if (withBias)
          ins.push_back(HostTensor::fromF32(ps, bias));
        bool ok;
        auto r = runF32(op, ins, {c.x}, attrs, &ok);
        ASSERT_TRUE(ok) << op;
        EXPECT_TRUE(allClose(
            r[0],
            refNorm(x, rows, cols, scale, withBias ? &bias : nullptr, eps, rms),
            1e-5, 1e-4))
            << op << shapeToString(c.x);

        auto dy = randomFloats(x.size(), rng);
        std::vector<Shape> outs = {c.x, ps};
        if (!rms)
          outs.push_back(ps);
        auto g =
            runF32(std::string(op) + "_grad",
                   {HostTensor::fromF32(c.x, dy), HostTensor::fromF32(c.x, x),
                    HostTensor::fromF32(ps, scale)},
                   outs, attrs, &ok);
        ASSERT_TRUE(ok);
        std::string what = std::string(op) + shapeToString(c.x);
        EXPECT_TRUE(
            allClose(g[0], fdGrad(op, ins, c.x, attrs, 0, dy), 1e-3, 2e-3))
            << what << " dx";
        EXPECT_TRUE(
            allClose(g[1], fdGrad(op, ins, c.x, attrs, 1, dy), 1e-3, 2e-3))
            << what << " dscale";
        if (!rms) {
          // dbias = sum of dy over rows, whether or not the forward had one.
          std::vector<double> db(cols, 0.0);
          for (int64_t i = 0; i < rows * cols; ++i)
            db[i % cols] += dy[i];
          EXPECT_TRUE(allClose(g[2], db, 1e-5, 1e-5)) << what << " dbias";
        }
      }
}

TEST(KernelNNTest, NormGradsOnLargeRowsTakeTheThreadedPaths) {
  std::mt19937 rng(34);
  const int64_t rows = 96, cols = 384;
  auto x = randomFloats(rows * cols, rng, -2, 2);
  auto dy = randomFloats(rows * cols, rng);
  auto scale = randomFloats(cols, rng, 0.5, 1.5);
  AttrFn attrs = [](plan::Instruction &i) {
    setI(i, "axis", 1);
    setF(i, "epsilon", 1e-5);
  };
  bool ok;
  auto g = runF32("layer_norm_grad",
                  {HostTensor::fromF32({rows, cols}, dy),
                   HostTensor::fromF32({rows, cols}, x),
                   HostTensor::fromF32({cols}, scale)},
                  {{rows, cols}, {cols}, {cols}}, attrs, &ok);
  ASSERT_TRUE(ok);
  // Analytic reference in double.
  std::vector<double> dx(rows * cols), ds(cols, 0.0), db(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = &x[r * cols], *pdy = &dy[r * cols];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mean += px[j];
    mean /= cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (px[j] - mean) * (px[j] - mean);
    double rstd = 1 / std::sqrt(var / cols + 1e-5);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      double xh = (px[j] - mean) * rstd;
      mg += pdy[j] * scale[j];
      mgx += pdy[j] * scale[j] * xh;
      ds[j] += pdy[j] * xh;
      db[j] += pdy[j];
    }
    mg /= cols;
    mgx /= cols;
    for (int64_t j = 0; j < cols; ++j)
      dx[r * cols + j] =
          rstd * (pdy[j] * scale[j] - mg - (px[j] - mean) * rstd * mgx);
  }
  EXPECT_TRUE(allClose(g[0], dx, 1e-4, 1e-4));
  EXPECT_TRUE(allClose(g[1], ds, 1e-4, 1e-4));
  EXPECT_TRUE(allClose(g[2], db, 1e-4, 1e-4));
}

TEST(KernelNNTest, BatchNormTrainingModeWithGrads) {
  std::mt19937 rng(35);
  for (Shape xs : {Shape{4, 3}, Shape{2, 3, 5}, Shape{3, 2, 4, 3}}) {
    int64_t c = xs[1];
    auto x = randomFloats(numElements(xs), rng, -2, 2);
    auto scale = randomFloats(c, rng, 0.5, 1.5), bias = randomFloats(c, rng);
    AttrFn attrs = [](plan::Instruction &i) { setF(i, "epsilon", 1e-5); };
    std::vector<HostTensor> ins = {HostTensor::fromF32(xs, x),
                                   HostTensor::fromF32({c}, scale),
                                   HostTensor::fromF32({c}, bias)};
    bool ok;
    auto r = runF32("batch_norm", ins, {xs}, attrs, &ok);
    ASSERT_TRUE(ok);
    std::vector<double> want(x.size()), mean(c, 0.0), var(c, 0.0);
    double count = double(x.size()) / c;
    for (size_t i = 0; i < x.size(); ++i)
      mean[unravel(i, xs)[1]] += x[i] / count;
    for (size_t i = 0; i < x.size(); ++i) {
      int64_t ch = unravel(i, xs)[1];
      var[ch] += (x[i] - mean[ch]) * (x[i] - mean[ch]) / count;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      int64_t ch = unravel(i, xs)[1];
      want[i] =
          (x[i] - mean[ch]) / std::sqrt(var[ch] + 1e-5) * scale[ch] + bias[ch];
    }
    EXPECT_TRUE(allClose(r[0], want, 1e-5, 1e-4)) << shapeToString(xs);

    auto dy = randomFloats(x.size(), rng);
    auto g = runF32("batch_norm_grad",
                    {HostTensor::fromF32(xs, dy), HostTensor::fromF32(xs, x),
                     HostTensor::fromF32({c}, scale)},
                    {xs, {c}, {c}}, attrs, &ok);
    ASSERT_TRUE(ok);
    for (size_t which = 0; which < 3; ++which)
      EXPECT_TRUE(allClose(g[which],
                           fdGrad("batch_norm", ins, xs, attrs, which, dy),
                           1e-3, 2e-3))
          << shapeToString(xs) << " gradient " << which;
  }
  auto bad =
      runOp("batch_norm",
            {HostTensor(ElemType::F32, {2, 3}), HostTensor(ElemType::F32, {2}),
             HostTensor(ElemType::F32, {3})},
            {{2, 3}}, [](plan::Instruction &i) { setF(i, "epsilon", 1e-5); });
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("scale has shape [2], expected [3]"),
            std::string::npos)
      << bad.status().message();
}

} // namespace
