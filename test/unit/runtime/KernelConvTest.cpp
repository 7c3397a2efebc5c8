//===- KernelConvTest.cpp - conv2d and max_pool2d vs naive loops ----------===//
//
// Convolutions over random geometries (groups, strides, dilations,
// asymmetric padding, odd sizes, the 1x1 direct path, batches that take the
// threaded path) against a direct 7-loop reference; the gradients also
// against finite differences of the forward kernel.
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

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, groups;
  int64_t sh, sw, dh, dw;
  std::vector<int64_t> pads; // top, left, bottom, right

  int64_t oh() const {
    return (h + pads[0] + pads[2] - dh * (kh - 1) - 1) / sh + 1;
  }
  int64_t ow() const {
    return (w + pads[1] + pads[3] - dw * (kw - 1) - 1) / sw + 1;
  }
  Shape xs() const { return {n, c, h, w}; }
  Shape ws() const { return {o, c / groups, kh, kw}; }
  Shape ys() const { return {n, o, oh(), ow()}; }
  AttrFn attrs() const {
    ConvCase k = *this;
    return [k](plan::Instruction &i) {
      setInts(i, "strides", {k.sh, k.sw});
      setInts(i, "pads", k.pads);
      setInts(i, "dilations", {k.dh, k.dw});
      setI(i, "groups", k.groups);
    };
  }
};

std::string describe(const ConvCase &k) {
  return "x" + shapeToString(k.xs()) + " w" + shapeToString(k.ws()) +
         " groups " + std::to_string(k.groups) + " strides " +
         std::to_string(k.sh) + "," + std::to_string(k.sw) + " dil " +
         std::to_string(k.dh) + "," + std::to_string(k.dw) + " pads " +
         shapeToString(k.pads);
}

/// Calls `f(xIndex, wIndex, yIndex)` for every multiply of the convolution.
template <typename F> void forEachTap(const ConvCase &k, F f) {
  int64_t cg = k.c / k.groups, og = k.o / k.groups;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t oy = 0; oy < k.oh(); ++oy)
        for (int64_t ox = 0; ox < k.ow(); ++ox)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                int64_t iy = oy * k.sh - k.pads[0] + i * k.dh;
                int64_t ix = ox * k.sw - k.pads[1] + j * k.dw;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w)
                  continue;
                int64_t ci = (o / og) * cg + c;
                f(((n * k.c + ci) * k.h + iy) * k.w + ix,
                  ((o * cg + c) * k.kh + i) * k.kw + j,
                  ((n * k.o + o) * k.oh() + oy) * k.ow() + ox);
              }
}

/// Cases of both layouts: a product an image (one image, groups, more than
/// kConvStackedColumns columns) and one stacked product for the batch.
std::vector<ConvCase> convCases() {
  return {
      {1, 1, 5, 5, 1, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}},
      {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}},
      {2, 4, 9, 8, 6, 3, 2, 2, 2, 1, 1, 1, {1, 0, 2, 1}},   // groups, asym
      {1, 3, 11, 10, 2, 3, 3, 1, 2, 3, 2, 1, {2, 1, 0, 2}}, // dilation
      {3, 6, 5, 7, 6, 3, 3, 6, 1, 2, 1, 2, {1, 2, 1, 2}},   // depthwise
      {4, 5, 6, 5, 7, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}},   // 1x1 direct
      {2, 4, 6, 6, 4, 1, 1, 2, 2, 2, 1, 1, {0, 0, 0, 0}},   // 1x1 strided
      {5, 2, 13, 9, 3, 5, 4, 1, 3, 2, 1, 1, {2, 1, 2, 3}},
      {2, 3, 4, 4, 2, 4, 4, 1, 1, 1, 1, 1, {3, 3, 3, 3}},   // mostly padding
      {4, 8, 16, 15, 8, 3, 3, 2, 1, 1, 1, 1, {1, 1, 1, 1}}, // images on threads
      {3, 8, 12, 12, 16, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}}, // direct, threads
      // Small images run one stacked product for the batch
      // (runtime/ConvLayout.h): 1x1 images as in ResNet's last stage.
      {3, 8, 1, 1, 5, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}},
  };
}

TEST(KernelConvTest, Conv2dMatchesDirectLoops) {
  std::mt19937 rng(41);
  for (const ConvCase &k : convCases()) {
    auto x = randomFloats(numElements(k.xs()), rng);
    auto w = randomFloats(numElements(k.ws()), rng);
    bool ok;
    std::string err;
    auto r =
        runF32("conv2d",
               {HostTensor::fromF32(k.xs(), x), HostTensor::fromF32(k.ws(), w)},
               {k.ys()}, k.attrs(), &ok, &err);
    ASSERT_TRUE(ok) << describe(k) << ": " << err;
    std::vector<double> want(numElements(k.ys()), 0.0);
    forEachTap(k, [&](int64_t xi, int64_t wi, int64_t yi) {
      want[yi] += double(x[xi]) * w[wi];
    });
    EXPECT_TRUE(allClose(r[0], want, 1e-5, 1e-5)) << describe(k);
  }
}

TEST(KernelConvTest, ConvGradsMatchDirectLoops) {
  std::mt19937 rng(42);
  for (const ConvCase &k : convCases()) {
    auto x = randomFloats(numElements(k.xs()), rng);
    auto w = randomFloats(numElements(k.ws()), rng);
    auto dy = randomFloats(numElements(k.ys()), rng);
    bool ok;
    std::string err;
    auto gi = runF32(
        "conv2d_grad_input",
        {HostTensor::fromF32(k.ys(), dy), HostTensor::fromF32(k.ws(), w)},
        {k.xs()}, k.attrs(), &ok, &err);
    ASSERT_TRUE(ok) << describe(k) << ": " << err;
    auto gf = runF32(
        "conv2d_grad_filter",
        {HostTensor::fromF32(k.ys(), dy), HostTensor::fromF32(k.xs(), x)},
        {k.ws()}, k.attrs(), &ok, &err);
    ASSERT_TRUE(ok) << describe(k) << ": " << err;
    std::vector<double> dx(x.size(), 0.0), dw(w.size(), 0.0);
    forEachTap(k, [&](int64_t xi, int64_t wi, int64_t yi) {
      dx[xi] += double(dy[yi]) * w[wi];
      dw[wi] += double(dy[yi]) * x[xi];
    });
    EXPECT_TRUE(allClose(gi[0], dx, 1e-5, 1e-5)) << describe(k);
    EXPECT_TRUE(allClose(gf[0], dw, 1e-4, 1e-5)) << describe(k);
  }
}

TEST(KernelConvTest, ConvGradsMatchFiniteDifferences) {
  std::mt19937 rng(43);
  ConvCase k{2, 4, 5, 4, 4, 3, 2, 2, 2, 1, 1, 2, {1, 2, 0, 1}};
  auto x = randomFloats(numElements(k.xs()), rng);
  auto w = randomFloats(numElements(k.ws()), rng);
  auto dy = randomFloats(numElements(k.ys()), rng);
  auto forward = [&](const std::vector<float> &xv,
                     const std::vector<float> &wv) {
    bool ok;
    auto r = runF32(
        "conv2d",
        {HostTensor::fromF32(k.xs(), xv), HostTensor::fromF32(k.ws(), wv)},
        {k.ys()}, k.attrs(), &ok);
    EXPECT_TRUE(ok);
    return ok ? dot(dy, r[0]) : 0.0;
  };
  bool ok;
  auto gi =
      runF32("conv2d_grad_input",
             {HostTensor::fromF32(k.ys(), dy), HostTensor::fromF32(k.ws(), w)},
             {k.xs()}, k.attrs(), &ok);
  ASSERT_TRUE(ok);
  auto gf =
      runF32("conv2d_grad_filter",
             {HostTensor::fromF32(k.ys(), dy), HostTensor::fromF32(k.xs(), x)},
             {k.ws()}, k.attrs(), &ok);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(allClose(
      gi[0],
      numericGrad([&](const std::vector<float> &v) { return forward(v, w); }, x,
                  1e-2),
      2e-3, 1e-3));
  EXPECT_TRUE(allClose(
      gf[0],
      numericGrad([&](const std::vector<float> &v) { return forward(x, v); }, w,
                  1e-2),
      2e-3, 1e-3));
}

TEST(KernelConvTest, Conv2dRejectsBadGeometry) {
  ConvCase k{1, 4, 5, 5, 2, 3, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}};
  auto r = runOp("conv2d",
                 {HostTensor(ElemType::F32, {1, 4, 5, 5}),
                  HostTensor(ElemType::F32, {2, 2, 3, 3})},
                 {{1, 2, 3, 3}}, k.attrs());
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("do not match filter"), std::string::npos)
      << r.status().message();
  ConvCase ok{1, 1, 5, 5, 1, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}};
  auto s = runOp("conv2d",
                 {HostTensor(ElemType::F32, {1, 1, 5, 5}),
                  HostTensor(ElemType::F32, {1, 1, 3, 3})},
                 {{1, 1, 5, 5}}, ok.attrs());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.status().message().find("expected [1, 1, 3, 3]"),
            std::string::npos)
      << s.status().message();
}

struct PoolCase {
  Shape x;
  int64_t kh, kw, sh, sw;
  std::vector<int64_t> pads;
};

TEST(KernelConvTest, MaxPoolAndGradRouteToTheFirstMaximum) {
  std::mt19937 rng(44);
  std::vector<PoolCase> cases = {
      {{1, 1, 4, 4}, 2, 2, 2, 2, {0, 0, 0, 0}},
      {{2, 3, 7, 6}, 3, 3, 2, 2, {1, 1, 1, 1}},
      {{1, 2, 5, 9}, 3, 2, 1, 3, {2, 0, 1, 1}},
      {{3, 2, 8, 8}, 3, 3, 1, 1, {1, 1, 1, 1}}, // overlapping windows
      {{4, 16, 20, 20}, 2, 2, 2, 2, {0, 0, 0, 0}}};
  for (const PoolCase &c : cases) {
    int64_t oh = (c.x[2] + c.pads[0] + c.pads[2] - c.kh) / c.sh + 1;
    int64_t ow = (c.x[3] + c.pads[1] + c.pads[3] - c.kw) / c.sw + 1;
    Shape ys = {c.x[0], c.x[1], oh, ow};
    // Values on a coarse grid so windows hold ties: the first one wins.
    auto x = randomFloats(numElements(c.x), rng, -3, 3);
    for (float &v : x)
      v = std::round(v);
    AttrFn attrs = [&](plan::Instruction &i) {
      setInts(i, "kernel", {c.kh, c.kw});
      setInts(i, "strides", {c.sh, c.sw});
      setInts(i, "pads", c.pads);
    };
    bool ok;
    auto r =
        runF32("max_pool2d", {HostTensor::fromF32(c.x, x)}, {ys}, attrs, &ok);
    ASSERT_TRUE(ok);
    auto dy = randomFloats(numElements(ys), rng);
    auto g = runF32("max_pool2d_grad",
                    {HostTensor::fromF32(ys, dy), HostTensor::fromF32(c.x, x)},
                    {c.x}, attrs, &ok);
    ASSERT_TRUE(ok);
    std::vector<double> want(numElements(ys)), dx(x.size(), 0.0);
    for (int64_t p = 0; p < c.x[0] * c.x[1]; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double best = -INFINITY;
          int64_t arg = -1;
          for (int64_t i = 0; i < c.kh; ++i)
            for (int64_t j = 0; j < c.kw; ++j) {
              int64_t iy = oy * c.sh - c.pads[0] + i;
              int64_t ix = ox * c.sw - c.pads[1] + j;
              if (iy < 0 || iy >= c.x[2] || ix < 0 || ix >= c.x[3])
                continue;
              int64_t xi = (p * c.x[2] + iy) * c.x[3] + ix;
              if (arg < 0 || x[xi] > best) {
                best = x[xi];
                arg = xi;
              }
            }
          int64_t yi = (p * oh + oy) * ow + ox;
          want[yi] = best;
          dx[arg] += dy[yi];
        }
    EXPECT_TRUE(allClose(r[0], want, 0)) << shapeToString(c.x);
    EXPECT_TRUE(allClose(g[0], dx, 1e-6)) << shapeToString(c.x);
  }
  auto bad = runOp("max_pool2d", {HostTensor(ElemType::F32, {1, 1, 4, 4})},
                   {{1, 1, 3, 3}}, [](plan::Instruction &i) {
                     setInts(i, "kernel", {2, 2});
                     setInts(i, "strides", {2, 2});
                     setInts(i, "pads", {2, 0, 0, 0});
                   });
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("smaller than the kernel"),
            std::string::npos);
}

} // namespace
