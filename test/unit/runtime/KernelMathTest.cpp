//===- KernelMathTest.cpp - batch_matmul, linear, element-wise, reductions ===//

#include "KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

using Shape = std::vector<int64_t>;

Shape broadcastShape(Shape a, Shape b) {
  if (a.size() < b.size())
    std::swap(a, b);
  Shape out = a;
  size_t shift = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i)
    out[i + shift] = b[i] == 1 ? a[i + shift] : b[i];
  return out;
}

struct BmmCase {
  Shape a, b;
  bool ta, tb;
};

TEST(KernelMathTest, BatchMatmulBroadcastsAndTransposes) {
  std::mt19937 rng(11);
  std::vector<BmmCase> cases = {
      {{3, 4, 5}, {3, 5, 2}, false, false},
      {{2, 3, 4, 5}, {5, 6}, false, false},   // shared rhs: one tall GEMM
      {{2, 3, 5, 4}, {5, 6}, true, false},    // shared rhs, transposed lhs
      {{3, 1, 4, 5}, {2, 6, 5}, false, true}, // batch broadcast both ways
      {{4, 5}, {2, 3, 5, 7}, false, false},   // shared lhs
      {{1, 5, 4}, {3, 7, 5}, true, true},
      {{2, 1, 3, 1}, {1, 4, 1, 2}, false, false}, // k = 1
      {{5, 9, 33}, {5, 33, 17}, false, false},
      {{8, 16, 32}, {8, 24, 32}, false, true},  // batches on threads
      {{2, 70, 64}, {2, 64, 80}, false, false}, // big GEMMs in order
  };
  for (const BmmCase &c : cases) {
    auto a = randomFloats(numElements(c.a), rng);
    auto b = randomFloats(numElements(c.b), rng);
    int64_t m = c.ta ? c.a.back() : c.a[c.a.size() - 2];
    int64_t k = c.ta ? c.a[c.a.size() - 2] : c.a.back();
    int64_t n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
    Shape ab(c.a.begin(), c.a.end() - 2), bb(c.b.begin(), c.b.end() - 2);
    Shape batch = broadcastShape(ab, bb), out = batch;
    out.push_back(m);
    out.push_back(n);
    bool ok;
    auto r = runF32(
        "batch_matmul",
        {HostTensor::fromF32(c.a, a), HostTensor::fromF32(c.b, b)}, {out},
        [&](plan::Instruction &i) {
          if (c.ta)
            setI(i, "transpose_lhs", 1);
          if (c.tb)
            setI(i, "transpose_rhs", 1);
        },
        &ok);
    ASSERT_TRUE(ok) << shapeToString(c.a) << " x " << shapeToString(c.b);
    std::vector<double> want(numElements(out));
    int64_t ar = c.a[c.a.size() - 2], ac = c.a.back();
    int64_t br = c.b[c.b.size() - 2], bc = c.b.back();
    for (int64_t bi = 0; bi < numElements(batch); ++bi) {
      Shape idx = unravel(bi, batch);
      // Matrix index of each operand under broadcasting.
      auto matOf = [&](const Shape &s) {
        int64_t off = 0;
        size_t shift = idx.size() - s.size();
        for (size_t d = 0; d < s.size(); ++d)
          off = off * s[d] + (s[d] == 1 ? 0 : idx[d + shift]);
        return off;
      };
      const float *pa = a.data() + matOf(ab) * ar * ac;
      const float *pb = b.data() + matOf(bb) * br * bc;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p)
            s += double(c.ta ? pa[p * ac + i] : pa[i * ac + p]) *
                 (c.tb ? pb[j * bc + p] : pb[p * bc + j]);
          want[(bi * m + i) * n + j] = s;
        }
    }
    EXPECT_TRUE(allClose(r[0], want, 1e-5, 1e-5))
        << shapeToString(c.a) << " x " << shapeToString(c.b);
  }
}

TEST(KernelMathTest, BatchMatmulRejectsMismatchedContraction) {
  auto r = runOp("batch_matmul",
                 {HostTensor(ElemType::F32, {2, 3, 4}),
                  HostTensor(ElemType::F32, {2, 5, 6})},
                 {{2, 3, 6}});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("contraction sizes differ"),
            std::string::npos)
      << r.status().message();
  auto b = runOp("batch_matmul",
                 {HostTensor(ElemType::F32, {2, 3, 4}),
                  HostTensor(ElemType::F32, {3, 4, 6})},
                 {{2, 3, 6}});
  ASSERT_FALSE(b.isOk());
  EXPECT_NE(b.status().message().find("do not broadcast"), std::string::npos);
}

TEST(KernelMathTest, LinearWithAndWithoutBias) {
  std::mt19937 rng(12);
  const int64_t k = 7, n = 5;
  Shape xs = {2, 3, k};
  for (int tw = 0; tw < 2; ++tw)
    for (int withBias = 0; withBias < 2; ++withBias) {
      auto x = randomFloats(numElements(xs), rng);
      auto w = randomFloats(k * n, rng), bias = randomFloats(n, rng);
      std::vector<HostTensor> ins = {
          HostTensor::fromF32(xs, x),
          HostTensor::fromF32(tw ? Shape{n, k} : Shape{k, n}, w)};
      if (withBias)
        ins.push_back(HostTensor::fromF32({n}, bias));
      bool ok;
      auto r = runF32(
          "linear", ins, {{2, 3, n}},
          [&](plan::Instruction &i) {
            if (tw)
              setI(i, "transpose_weight", 1);
          },
          &ok);
      ASSERT_TRUE(ok);
      std::vector<double> want(6 * n);
      for (int64_t row = 0; row < 6; ++row)
        for (int64_t j = 0; j < n; ++j) {
          double s = withBias ? bias[j] : 0.0;
          for (int64_t p = 0; p < k; ++p)
            s += double(x[row * k + p]) * (tw ? w[j * k + p] : w[p * n + j]);
          want[row * n + j] = s;
        }
      EXPECT_TRUE(allClose(r[0], want, 1e-5, 1e-5)) << tw << withBias;
    }
  auto bad =
      runOp("linear",
            {HostTensor(ElemType::F32, {3, 4}),
             HostTensor(ElemType::F32, {4, 2}), HostTensor(ElemType::F32, {3})},
            {{3, 2}});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("bias has shape [3], expected [2]"),
            std::string::npos)
      << bad.status().message();
}

TEST(KernelMathTest, PowMaxMinBroadcast) {
  std::mt19937 rng(13);
  std::vector<std::vector<Shape>> cases = {{{2, 3, 4}, {4}},
                                           {{3, 1}, {1, 5}},
                                           {{2, 1, 3}, {4, 1}},
                                           {{}, {3, 2}},
                                           {{64, 3, 200}, {3, 1}}};
  for (const char *op : {"pow", "max", "min"})
    for (const auto &c : cases) {
      Shape out = broadcastShape(c[0], c[1]);
      auto a = randomFloats(numElements(c[0]), rng, 0.1f, 2.0f);
      auto b = randomFloats(numElements(c[1]), rng, -2.0f, 2.0f);
      bool ok;
      auto r = runF32(
          op, {HostTensor::fromF32(c[0], a), HostTensor::fromF32(c[1], b)},
          {out}, {}, &ok);
      ASSERT_TRUE(ok);
      std::vector<double> want(numElements(out));
      std::string o = op;
      for (size_t i = 0; i < want.size(); ++i) {
        Shape idx = unravel(i, out);
        double x = bcastAt(a, c[0], idx), y = bcastAt(b, c[1], idx);
        want[i] = o == "pow"   ? std::pow(x, y)
                  : o == "max" ? std::max(x, y)
                               : std::min(x, y);
      }
      EXPECT_TRUE(allClose(r[0], want, 1e-6, 1e-5)) << op;
    }
}

TEST(KernelMathTest, ComparisonsGiveMasks) {
  // Broadcast, with ties; NaN compares false.
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {1, 2, 3, nan, 2, 0}, b = {2, 2, 1};
  const std::pair<const char *, std::vector<double>> cases[] = {
      {"equal", {0, 1, 0, 0, 1, 0}},
      {"less", {1, 0, 0, 0, 0, 1}},
      {"less_equal", {1, 1, 0, 0, 1, 1}},
  };
  for (const auto &[op, want] : cases) {
    bool ok;
    auto r = runF32(op, {HostTensor::fromF32({2, 3}, a), HostTensor::fromF32({3}, b)},
                    {{2, 3}}, {}, &ok);
    ASSERT_TRUE(ok) << op;
    EXPECT_TRUE(allClose(r[0], want, 0)) << op;
  }
}

TEST(KernelMathTest, ConvertToI64RoundsHeldIntegers) {
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  int32_t x = addBuffer(prog, "x", plan::CONSTANT, {4});
  setData(buffer(prog, x), {0.0f, 1.0f, 513.0f, 2.9999998f});
  int32_t y = addBuffer(prog, "y", plan::TEMPORARY, {4}, plan::I64);
  addInst(prog, "convert", {x}, {y});
  ASSERT_TRUE(validatePlan(p, "test").isOk());
  LocalCommunicator world;
  auto exec = Executor::create(p, world, "test");
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  ASSERT_TRUE((*exec)->runStep(0).isOk());
  HostTensor out = (*exec)->readBuffer(*(*exec)->findBuffer(y));
  ASSERT_EQ(out.type, ElemType::I64);
  EXPECT_EQ(std::vector<int64_t>(out.data<int64_t>(), out.data<int64_t>() + 4),
            (std::vector<int64_t>{0, 1, 513, 3}));
}

TEST(KernelMathTest, MaxAndMinPropagateNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char *op : {"max", "min"}) {
    bool ok;
    auto r = runF32(op,
                    {HostTensor::fromF32({3}, {nan, 1, 2}),
                     HostTensor::fromF32({3}, {0, nan, 1})},
                    {{3}}, {}, &ok);
    ASSERT_TRUE(ok);
    EXPECT_TRUE(std::isnan(r[0][0]));
    EXPECT_TRUE(std::isnan(r[0][1]));
  }
}

TEST(KernelMathTest, SelectBroadcastsAllThree) {
  std::mt19937 rng(14);
  Shape cs = {4, 1}, as = {1, 5}, bs = {}, out = {4, 5};
  std::vector<float> cond = {1, 0, 0.5f, 0};
  auto a = randomFloats(5, rng), b = randomFloats(1, rng);
  bool ok;
  auto r = runF32("select",
                  {HostTensor::fromF32(cs, cond), HostTensor::fromF32(as, a),
                   HostTensor::fromF32(bs, b)},
                  {out}, {}, &ok);
  ASSERT_TRUE(ok);
  std::vector<double> want(20);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      want[i * 5 + j] = cond[i] != 0 ? a[j] : b[0];
  EXPECT_TRUE(allClose(r[0], want, 0));
}

TEST(KernelMathTest, UnaryMathOps) {
  std::mt19937 rng(15);
  auto x = randomFloats(101, rng, 0.05f, 3.0f);
  for (const char *op :
       {"exp", "log", "sqrt", "rsqrt", "neg", "reciprocal", "erf", "sin",
        "cos", "trunc"}) {
    bool ok;
    auto r = runF32(op, {HostTensor::fromF32({101}, x)}, {{101}}, {}, &ok);
    ASSERT_TRUE(ok) << op;
    std::vector<double> want(101);
    std::string o = op;
    for (int i = 0; i < 101; ++i) {
      double v = x[i];
      want[i] = o == "exp"          ? std::exp(v)
                : o == "log"        ? std::log(v)
                : o == "sqrt"       ? std::sqrt(v)
                : o == "rsqrt"      ? 1 / std::sqrt(v)
                : o == "neg"        ? -v
                : o == "reciprocal" ? 1 / v
                : o == "sin"        ? std::sin(v)
                : o == "cos"        ? std::cos(v)
                : o == "trunc"      ? std::trunc(v)
                                    : std::erf(v);
    }
    EXPECT_TRUE(allClose(r[0], want, 1e-6, 1e-6)) << op;
  }
}

TEST(KernelMathTest, RoundF16) {
  // Exact float16 values stay; a tie goes to even; past 65504 is infinity;
  // below half the smallest subnormal (2^-24) is zero; NaN stays NaN.
  std::vector<float> x = {1.0009765625f, 1.00048828125f, 1.00146484375f,
                          -65504.0f,     65520.0f,       3e-8f,
                          2e-8f,         0.1f,           NAN};
  bool ok;
  auto r = runF32("round_f16", {HostTensor::fromF32({9}, x)}, {{9}}, {}, &ok);
  ASSERT_TRUE(ok);
  const std::vector<float> &y = r[0];
  EXPECT_EQ(y[0], 1.0009765625f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 1.001953125f);
  EXPECT_EQ(y[3], -65504.0f);
  EXPECT_TRUE(std::isinf(y[4]) && y[4] > 0);
  EXPECT_EQ(y[5], 1.0f / 16777216.0f);
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_EQ(y[7], 0.0999755859375f);
  EXPECT_TRUE(std::isnan(y[8]));
}

TEST(KernelMathTest, ConvertI64ToF32) {
  bool ok;
  auto r = runF32("convert", {HostTensor::fromI64({2, 2}, {-3, 0, 7, 1 << 20})},
                  {{2, 2}}, {}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(allClose(r[0], {-3, 0, 7, 1 << 20}, 0));
  auto bad = runOp("convert", {HostTensor::fromF32({2}, {1, 2})}, {{2}});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("input and output are both f32"),
            std::string::npos);
}

struct ReduceCase {
  Shape x;
  std::vector<int64_t> axes;
};

TEST(KernelMathTest, ReductionsOverAnyAxes) {
  std::mt19937 rng(16);
  std::vector<ReduceCase> cases = {
      {{2, 3, 4}, {2}},       {{2, 3, 4}, {0}},       {{2, 3, 4}, {1}},
      {{2, 3, 4}, {0, 2}},    {{2, 3, 4}, {0, 1, 2}}, {{5}, {0}},
      {{2, 1, 4, 3}, {1, 3}}, {{3, 4, 1, 5}, {0, 3}}, {{2, 3, 4}, {}},
      {{7, 1}, {1}},          {{300, 257}, {1}},      {{300, 257}, {0}},
      {{40, 30, 50}, {0, 2}}, {{40000}, {0}},         {{3, 5, 7, 2}, {1, 2}}};
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"})
    for (const ReduceCase &c : cases)
      for (int keep = 0; keep < 2; ++keep) {
        auto x = randomFloats(numElements(c.x), rng);
        Shape out, outKeep;
        for (size_t d = 0; d < c.x.size(); ++d) {
          bool red = std::find(c.axes.begin(), c.axes.end(), d) != c.axes.end();
          outKeep.push_back(red ? 1 : c.x[d]);
          if (!red)
            out.push_back(c.x[d]);
        }
        bool ok;
        auto r = runF32(
            op, {HostTensor::fromF32(c.x, x)}, {keep ? outKeep : out},
            [&](plan::Instruction &i) {
              setInts(i, "axes", c.axes);
              if (keep)
                setI(i, "keep_dims", 1);
            },
            &ok);
        ASSERT_TRUE(ok) << op << shapeToString(c.x);
        std::string o = op;
        std::vector<double> want(numElements(out),
                                 o == "reduce_max" ? -INFINITY : 0.0);
        double count = double(numElements(c.x)) / numElements(out);
        for (int64_t i = 0; i < numElements(c.x); ++i) {
          Shape idx = unravel(i, c.x);
          for (int64_t a : c.axes)
            idx[a] = 0;
          double &w = want[ravel(idx, outKeep)];
          w = o == "reduce_max" ? std::max(w, double(x[i])) : w + x[i];
        }
        if (o == "reduce_mean")
          for (double &w : want)
            w /= count;
        EXPECT_TRUE(allClose(r[0], want, 1e-5, 1e-5))
            << op << " " << shapeToString(c.x) << " axes "
            << shapeToString(c.axes);
      }
}

TEST(KernelMathTest, ReductionRejectsBadAxes) {
  auto r = runOp("reduce_sum", {HostTensor(ElemType::F32, {2, 3})}, {{}},
                 [](plan::Instruction &i) {
                   setInts(i, "axes", {1, 0});
                 });
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("sorted"), std::string::npos);
  auto s = runOp("reduce_mean", {HostTensor(ElemType::F32, {2, 3})}, {{3}},
                 [](plan::Instruction &i) { setInts(i, "axes", {1}); });
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.status().message().find("output has shape [3], expected [2]"),
            std::string::npos)
      << s.status().message();
}

} // namespace
