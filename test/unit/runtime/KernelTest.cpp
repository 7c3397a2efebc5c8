//===- KernelTest.cpp - CPU kernels against naive references ----------------===//

#include "KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

std::vector<float> values(const HostTensor &t) { return t.toF32(); }

// Kernel tests compare f32 kernels with double references computed from the
// same f32 inputs on small, well-conditioned cases (values of order 1, no
// cancellation): the reference itself moves by ~1e-7 relative when its inputs
// move by 1e-7, and each `tol` is a few f32 ulps of the result times the
// number of accumulated terms, 10x or more above that.
void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

/// NumPy broadcasting reference: value of `t` (shape `s`) at the output index
/// `idx` of shape `out`.
double at(const std::vector<float> &t, const std::vector<int64_t> &s,
          const std::vector<int64_t> &out, int64_t flat) {
  std::vector<int64_t> idx(out.size());
  for (int d = out.size() - 1; d >= 0; --d) {
    idx[d] = flat % out[d];
    flat /= out[d];
  }
  int64_t off = 0, stride = 1;
  for (int d = s.size() - 1; d >= 0; --d) {
    int64_t i = idx[d + out.size() - s.size()];
    off += (s[d] == 1 ? 0 : i) * stride;
    stride *= s[d];
  }
  return t[off];
}

TEST(KernelTest, MatmulAllTransposes) {
  std::mt19937 rng(1);
  const int64_t m = 5, k = 7, n = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      auto a = randomFloats(m * k, rng), b = randomFloats(k * n, rng);
      std::vector<int64_t> as = ta ? std::vector<int64_t>{k, m}
                                   : std::vector<int64_t>{m, k};
      std::vector<int64_t> bs = tb ? std::vector<int64_t>{n, k}
                                   : std::vector<int64_t>{k, n};
      auto r = runOp("matmul",
                     {HostTensor::fromF32(as, a), HostTensor::fromF32(bs, b)},
                     {{m, n}}, [&](plan::Instruction &i) {
                       setI(i, "transpose_a", ta);
                       setI(i, "transpose_b", tb);
                     });
      ASSERT_TRUE(r.isOk()) << r.status().message();
      std::vector<double> want(m * n, 0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t p = 0; p < k; ++p)
            want[i * n + j] += double(ta ? a[p * m + i] : a[i * k + p]) *
                               (tb ? b[j * k + p] : b[p * n + j]);
      expectNear(values((*r)[0]), want, 1e-5);
    }
}

TEST(KernelTest, MatmulCollapsesLeadingDims) {
  std::mt19937 rng(2);
  auto a = randomFloats(2 * 3 * 4, rng), b = randomFloats(4 * 5, rng);
  auto r = runOp("matmul",
                 {HostTensor::fromF32({2, 3, 4}, a),
                  HostTensor::fromF32({4, 5}, b)},
                 {{2, 3, 5}});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  std::vector<double> want(6 * 5, 0);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j)
      for (int p = 0; p < 4; ++p)
        want[i * 5 + j] += double(a[i * 4 + p]) * b[p * 5 + j];
  expectNear(values((*r)[0]), want, 1e-5);
}

struct BroadcastCase {
  std::vector<int64_t> a, b, out;
};

TEST(KernelTest, BinaryOpsBroadcast) {
  std::mt19937 rng(3);
  std::vector<BroadcastCase> cases = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}, {2, 3, 4}},
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},    {{1}, {2, 3}, {2, 3}},
      {{3, 1}, {1, 4}, {3, 4}},          {{2, 3}, {}, {2, 3}},
      {{4, 1, 2}, {1, 3, 1}, {4, 3, 2}},
  };
  for (const char *op : {"add", "sub", "mul", "div"}) {
    for (const BroadcastCase &c : cases) {
      auto a = randomFloats(numElements(c.a), rng);
      auto b = randomFloats(numElements(c.b), rng, 0.5f, 2.0f);
      auto r = runOp(op, {HostTensor::fromF32(c.a, a), HostTensor::fromF32(c.b, b)},
                     {c.out});
      ASSERT_TRUE(r.isOk()) << r.status().message();
      std::vector<double> want(numElements(c.out));
      for (size_t i = 0; i < want.size(); ++i) {
        double x = at(a, c.a, c.out, i), y = at(b, c.b, c.out, i);
        std::string o = op;
        want[i] = o == "add" ? x + y : o == "sub" ? x - y : o == "mul" ? x * y : x / y;
      }
      expectNear(values((*r)[0]), want, 1e-5);
    }
  }
}

TEST(KernelTest, LargeShapesTakeTheThreadedPaths) {
  // Above kParallelThreshold elements the loops run under OpenMP.
  std::mt19937 rng(9);
  std::vector<int64_t> as = {64, 3, 200}, bs = {3, 1};
  auto a = randomFloats(numElements(as), rng), b = randomFloats(3, rng);
  auto r = runOp("mul", {HostTensor::fromF32(as, a), HostTensor::fromF32(bs, b)}, {as});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  std::vector<double> want(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    want[i] = double(a[i]) * b[(i / 200) % 3];
  expectNear(values((*r)[0]), want, 1e-6);
  auto s = runOp("sum_to", {HostTensor::fromF32(as, a)}, {{}});
  ASSERT_TRUE(s.isOk()) << s.status().message();
  double total = 0;
  for (float v : a)
    total += v;
  // An f32 sum of the test's values (total of order 1e3): ~1e-4 rounding.
  EXPECT_NEAR(values((*s)[0])[0], total, 1e-3);
}

TEST(KernelTest, BinaryRejectsNonBroadcastableShapes) {
  auto r = runOp("add", {HostTensor(ElemType::F32, {2, 3}),
                         HostTensor(ElemType::F32, {2})},
                 {{2, 3}});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("does not broadcast"), std::string::npos);
}

TEST(KernelTest, UnaryOpsAndGrads) {
  std::mt19937 rng(4);
  auto x = randomFloats(37, rng, -3, 3), dy = randomFloats(37, rng);
  for (const char *op : {"relu", "tanh", "sigmoid"}) {
    auto r = runOp(op, {HostTensor::fromF32({37}, x)}, {{37}});
    ASSERT_TRUE(r.isOk()) << r.status().message();
    std::vector<double> want(37);
    for (int i = 0; i < 37; ++i) {
      std::string o = op;
      want[i] = o == "relu"   ? std::max(0.0, double(x[i]))
                : o == "tanh" ? std::tanh(double(x[i]))
                              : 1 / (1 + std::exp(-double(x[i])));
    }
    expectNear(values((*r)[0]), want, 1e-6);

    // The gradient ops take the forward input (relu) or output (tanh,
    // sigmoid), as docs/plan-format.md says.
    std::vector<float> saved = std::string(op) == "relu" ? x : values((*r)[0]);
    auto g = runOp(std::string(op) + "_grad",
                   {HostTensor::fromF32({37}, dy), HostTensor::fromF32({37}, saved)},
                   {{37}});
    ASSERT_TRUE(g.isOk()) << g.status().message();
    std::vector<double> wantGrad(37);
    for (int i = 0; i < 37; ++i) {
      std::string o = op;
      double v = saved[i];
      wantGrad[i] = o == "relu"   ? (x[i] > 0 ? dy[i] : 0.0)
                    : o == "tanh" ? dy[i] * (1 - v * v)
                                  : dy[i] * v * (1 - v);
    }
    expectNear(values((*g)[0]), wantGrad, 1e-6);
  }
}

// As in PyTorch, relu keeps NaN (so a NaN in the data reaches the loss) and
// +inf.
TEST(KernelTest, ReluKeepsNanAndInf) {
  const float inf = std::numeric_limits<float>::infinity();
  auto r =
      runOp("relu", {HostTensor::fromF32({5}, {NAN, inf, -inf, -1, 2})}, {{5}});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  std::vector<float> y = values((*r)[0]);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], inf);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(y[4], 2.0f);
}

TEST(KernelTest, ScaleInPlaceAndCopy) {
  auto r = runOp("scale", {HostTensor::fromF32({3}, {1, -2, 4})}, {{3}},
                 [](plan::Instruction &i) { setF(i, "factor", -0.5); }, {0});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  expectNear(values((*r)[0]), {-0.5, 1, -2}, 0);

  auto c = runOp("copy", {HostTensor::fromI64({2, 2}, {1, 2, 3, 4})}, {{4}});
  ASSERT_FALSE(c.isOk()); // output is F32 (runOp makes F32 outputs)
  auto c2 = runOp("copy", {HostTensor::fromF32({2, 2}, {1, 2, 3, 4})}, {{4}});
  ASSERT_TRUE(c2.isOk()) << c2.status().message();
  expectNear(values((*c2)[0]), {1, 2, 3, 4}, 0);
}

TEST(KernelTest, SumToReducesBroadcastDims) {
  std::mt19937 rng(5);
  std::vector<int64_t> xs = {2, 3, 4};
  auto x = randomFloats(24, rng);
  for (std::vector<int64_t> ys :
       {std::vector<int64_t>{4}, {3, 1}, {1}, {2, 1, 4}, {}, {2, 3, 4}, {1, 3, 1}}) {
    auto r = runOp("sum_to", {HostTensor::fromF32(xs, x)}, {ys});
    ASSERT_TRUE(r.isOk()) << r.status().message();
    std::vector<double> want(numElements(ys), 0);
    // Each x element adds into the y element it broadcasts from.
    for (int64_t i = 0; i < 24; ++i) {
      std::vector<int64_t> idx = {i / 12, (i / 4) % 3, i % 4};
      int64_t off = 0, stride = 1;
      for (int d = ys.size() - 1; d >= 0; --d) {
        int64_t id = idx[d + 3 - ys.size()];
        off += (ys[d] == 1 ? 0 : id) * stride;
        stride *= ys[d];
      }
      want[off] += x[i];
    }
    expectNear(values((*r)[0]), want, 1e-5);
  }
}

TEST(KernelTest, CrossEntropyMatchesLogSoftmax) {
  std::mt19937 rng(6);
  const int64_t rows = 6, classes = 5;
  auto logits = randomFloats(rows * classes, rng, -4, 4);
  std::vector<int64_t> target = {0, 4, 2, 1, 3, 4};
  auto r = runOp("cross_entropy",
                 {HostTensor::fromF32({2, 3, classes}, logits),
                  HostTensor::fromI64({2, 3}, target)},
                 {{}});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  double want = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(double(logits[i * classes + c]));
    want += std::log(sum) - logits[i * classes + target[i]];
  }
  // Double reference; the f32 loss (order 1) rounds at ~1e-7.
  EXPECT_NEAR(values((*r)[0])[0], want / rows, 1e-5);
}

TEST(KernelTest, CrossEntropyIsStableForLargeLogits) {
  auto r = runOp("cross_entropy",
                 {HostTensor::fromF32({1, 3}, {1000, 0, -1000}),
                  HostTensor::fromI64({1}, {1})},
                 {{}});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  // A loss of 1000 in f32 is exact to 6e-5.
  EXPECT_NEAR(values((*r)[0])[0], 1000.0, 1e-3);
  auto g = runOp("cross_entropy_grad",
                 {HostTensor::fromF32({1, 3}, {1000, 0, -1000}),
                  HostTensor::fromI64({1}, {1})},
                 {{1, 3}});
  ASSERT_TRUE(g.isOk());
  expectNear(values((*g)[0]), {1, -1, 0}, 1e-6);
}

TEST(KernelTest, CrossEntropyRejectsOutOfRangeTargets) {
  auto r = runOp("cross_entropy",
                 {HostTensor::fromF32({1, 3}, {1, 2, 3}),
                  HostTensor::fromI64({1}, {3})},
                 {{}});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("outside [0, 3)"), std::string::npos);
  EXPECT_NE(r.status().message().find("test_op"), std::string::npos);
}

/// Central finite differences of a scalar loss op at `x`.
std::vector<double> finiteDiff(const std::string &op, std::vector<float> x,
                               const std::vector<int64_t> &shape,
                               const HostTensor &target, double eps) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    float keep = x[i];
    double f[2];
    for (int s = 0; s < 2; ++s) {
      x[i] = keep + (s ? -eps : eps);
      auto r = runOp(op, {HostTensor::fromF32(shape, x), target}, {{}});
      EXPECT_TRUE(r.isOk());
      f[s] = r.isOk() ? values((*r)[0])[0] : 0;
    }
    x[i] = keep;
    grad[i] = (f[0] - f[1]) / (2 * eps);
  }
  return grad;
}

TEST(KernelTest, CrossEntropyGradMatchesFiniteDifferences) {
  std::mt19937 rng(7);
  std::vector<int64_t> shape = {3, 4};
  auto logits = randomFloats(12, rng, -2, 2);
  HostTensor target = HostTensor::fromI64({3}, {3, 0, 2});
  auto g = runOp("cross_entropy_grad", {HostTensor::fromF32(shape, logits), target},
                 {shape});
  ASSERT_TRUE(g.isOk()) << g.status().message();
  expectNear(values((*g)[0]),
             finiteDiff("cross_entropy", logits, shape, target, 1e-2), 1e-3);
}

TEST(KernelTest, MseAndGradMatchFiniteDifferences) {
  std::mt19937 rng(8);
  std::vector<int64_t> shape = {4, 2};
  auto pred = randomFloats(8, rng), tgt = randomFloats(8, rng);
  HostTensor target = HostTensor::fromF32(shape, tgt);
  auto l = runOp("mse", {HostTensor::fromF32(shape, pred), target}, {{1}});
  ASSERT_TRUE(l.isOk()) << l.status().message();
  double want = 0;
  for (int i = 0; i < 8; ++i)
    want += (double(pred[i]) - tgt[i]) * (double(pred[i]) - tgt[i]);
  // Double reference over 8 terms; the f32 mean rounds at ~1e-7.
  EXPECT_NEAR(values((*l)[0])[0], want / 8, 1e-6);

  auto g = runOp("mse_grad", {HostTensor::fromF32(shape, pred), target}, {shape});
  ASSERT_TRUE(g.isOk()) << g.status().message();
  expectNear(values((*g)[0]), finiteDiff("mse", pred, shape, target, 1e-2),
             1e-3);
}

// On a data-parallel rank a loss divides by the whole batch's `count`: the
// same sums, divided by 3x the rows, are a third of the local means (up to
// the rounding of one division, ~1e-7 relative). A count below the rows held
// is refused.
TEST(KernelTest, LossesDivideByTheirCount) {
  std::mt19937 rng(9);
  std::vector<int64_t> shape = {4, 3};
  HostTensor logits = HostTensor::fromF32(shape, randomFloats(12, rng));
  HostTensor ids = HostTensor::fromI64({4}, {0, 2, 1, 2});
  HostTensor pred = HostTensor::fromF32(shape, randomFloats(12, rng));
  HostTensor tgt = HostTensor::fromF32(shape, randomFloats(12, rng));
  struct Case {
    const char *op;
    HostTensor a, b;
    std::vector<int64_t> out;
    int64_t held;
  };
  std::vector<Case> cases = {{"cross_entropy", logits, ids, {1}, 4},
                             {"cross_entropy_grad", logits, ids, shape, 4},
                             {"mse", pred, tgt, {1}, 12},
                             {"mse_grad", pred, tgt, shape, 12}};
  for (const Case &c : cases) {
    auto withCount = [&](int64_t n) {
      return runOp(c.op, {c.a, c.b}, {c.out}, [n](plan::Instruction &i) {
        (*i.mutable_attrs())["count"].set_i(n);
      });
    };
    auto local = runOp(c.op, {c.a, c.b}, {c.out});
    auto global = withCount(3 * c.held);
    ASSERT_TRUE(local.isOk() && global.isOk()) << c.op;
    std::vector<float> l = values((*local)[0]), g = values((*global)[0]);
    for (size_t k = 0; k < l.size(); ++k)
      EXPECT_NEAR(3 * g[k], l[k], 1e-6 * std::fabs(l[k]) + 1e-12)
          << c.op << "[" << k << "]";
    auto bad = withCount(c.held - 1);
    ASSERT_FALSE(bad.isOk()) << c.op;
    EXPECT_NE(bad.status().message().find("count"), std::string::npos)
        << bad.status().message();
  }
}

TEST(KernelTest, AllReduceOnOneRankCopies) {
  auto r = runOp("all_reduce", {HostTensor::fromF32({2}, {3, -1})}, {{2}},
                 [](plan::Instruction &i) { setInts(i, "axes", {0}); });
  ASSERT_TRUE(r.isOk()) << r.status().message();
  expectNear(values((*r)[0]), {3, -1}, 0);
}

} // namespace
