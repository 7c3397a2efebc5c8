//===- CudaEmulationLayoutTest.cpp - Layout kernels, emulated --*- C++ -*-===//
//-*-===//
//
// Transposes, gathers, the element-wise pack kernels, the
// chunked strided copy and the padded-GEMM copy of runtime/cuda/: each fast
// path against a reference or, bit for bit, the generic kernel it replaces.
//
// Built by the host compiler against test/unit/cuda/CudaHostEmulation.h
// (one host thread per CUDA thread) and compared with double-precision
// references or with the generic kernels; no device needed. LoomCudaTests
// checks the same kernels on a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaHostEmulation.h"

#include "runtime/cuda/Elementwise.cu"
#include "runtime/cuda/Gather.cu"
#include "runtime/cuda/Layout.cu"
#include "runtime/cuda/LayoutPlan.h"
#include "runtime/cuda/PaddedCopy.cu"

#include "CudaEmulationUtil.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace loom::runtime::cuda {
namespace {

// --- layout and gather -------------------------------------------------------

/// A transpose of `xs` by `perm` as `bindTranspose` plans and launches it,
/// against direct indexing.
bool transposeTest(std::vector<int64_t> xs, std::vector<int64_t> perm,
                   bool useU32) {
  int64_t n = numel(xs);
  std::vector<float> x(n);
  std::iota(x.begin(), x.end(), 0.0f);
  std::vector<float> y(n, -1), want(n);
  std::vector<int64_t> xStride = denseStrides(xs), ys;
  for (int64_t p : perm)
    ys.push_back(xs[p]);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (int d = static_cast<int>(ys.size()) - 1; d >= 0; --d) {
      off += (rem % ys[d]) * xStride[perm[d]];
      rem /= ys[d];
    }
    want[i] = x[off];
  }
  StatusOr<TransposePlan> plan = planTranspose(xs, perm);
  if (!plan.isOk())
    return false;
  FloatIn in{x.data(), Elem::F32};
  FloatOut out{y.data(), Elem::F32};
  const TransposePlan &p = *plan;
  if (p.tiled) {
    int64_t tiles = ((p.a + 31) / 32) * ((p.b + 31) / 32);
    emu::launch(
        dim3(tiles, std::min<int64_t>(p.batch, 3)), dim3(32, 8), 0, [&] {
          transpose2dKernel(in, out, p.batch, p.a, p.b, p.ldSrc, p.index);
        });
    // The typed form (one storage on both sides) writes the same.
    std::vector<float> yTyped(n, -1);
    emu::launch(
        dim3(tiles, std::min<int64_t>(p.batch, 3)), dim3(32, 8), 0, [&] {
          transpose2dKernel(static_cast<const float *>(x.data()), yTyped.data(),
                            p.batch, p.a, p.b, p.ldSrc, p.index);
        });
    if (yTyped != want)
      return false;
  } else if (useU32) {
    emu::launch(2, 64, 0, [&] {
      stridedCopyKernel<uint32_t>(in, out, uint32_t(n), p.index);
    });
  } else {
    emu::launch(2, 64, 0,
                [&] { stridedCopyKernel<int64_t>(in, out, n, p.index); });
  }
  return y == want;
}

/// gather_grad's key and run kernels (a host stable sort standing in for
/// CUB's radix sort), and gather with one bad index.
bool gatherGradTest(int64_t pre, int64_t dim, int64_t post, int64_t count) {
  std::mt19937 rng(count);
  std::uniform_int_distribution<int64_t> ui(-dim, dim - 1);
  std::uniform_real_distribution<float> uf(-1, 1);
  std::vector<int64_t> idx(count);
  for (auto &v : idx)
    v = ui(rng);
  std::vector<float> dy(pre * count * post);
  for (auto &v : dy)
    v = uf(rng);
  std::vector<float> want(pre * dim * post, 0), got(pre * dim * post, 0);
  for (int64_t p = 0; p < pre; ++p)
    for (int64_t i = 0; i < count; ++i) {
      int64_t r = idx[i] < 0 ? idx[i] + dim : idx[i];
      for (int64_t q = 0; q < post; ++q)
        want[(p * dim + r) * post + q] += dy[(p * count + i) * post + q];
    }
  std::vector<int32_t> keys(count), pos(count);
  DataCheckRecord rec{};
  emu::launch(dim3(2), dim3(64), 0, [&] {
    gatherKeysKernel(idx.data(), count, dim, keys.data(), pos.data(), 1, &rec);
  });
  // cub's stable radix sort, emulated.
  std::vector<int32_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return keys[a] < keys[b]; });
  std::vector<int32_t> sk(count), sp(count);
  for (int64_t i = 0; i < count; ++i) {
    sk[i] = keys[order[i]];
    sp[i] = pos[order[i]];
  }
  GatherDims g{pre, dim, post, count};
  emu::launch(dim3(5), dim3(32), 0, [&] {
    gatherGradRunsKernel(FloatIn{dy.data(), Elem::F32},
                         FloatOut{got.data(), Elem::F32}, sk.data(), sp.data(),
                         g);
  });
  bool ok = got == want && rec.check == 0;
  // gather with one bad index
  std::vector<float> data(pre * dim * post);
  for (auto &v : data)
    v = uf(rng);
  std::vector<float> y(pre * count * post);
  idx[count / 2] = dim + 5;
  emu::launch(dim3(3), dim3(64), 0, [&] {
    gatherKernel(FloatIn{data.data(), Elem::F32}, idx.data(),
                 FloatOut{y.data(), Elem::F32}, g, 7, &rec);
  });
  bool ok2 = rec.check == 7 && rec.position == count / 2 &&
             rec.value == dim + 5 && rec.limit == dim;
  for (int64_t p = 0; p < pre && ok2; ++p)
    for (int64_t i = 0; i < count; ++i) {
      if (i == count / 2)
        continue;
      int64_t r = idx[i] < 0 ? idx[i] + dim : idx[i];
      for (int64_t q = 0; q < post; ++q)
        ok2 &= y[(p * count + i) * post + q] == data[(p * dim + r) * post + q];
    }
  return ok && ok2;
}

TEST(CudaEmulation, TransposePaths) {
  for (bool u32 : {true, false}) {
    EXPECT_TRUE(transposeTest({33, 65}, {1, 0}, u32));
    EXPECT_TRUE(transposeTest({2, 3, 45, 70}, {0, 1, 3, 2}, u32));
    EXPECT_TRUE(transposeTest({4, 6, 8}, {1, 2, 0}, u32));
    EXPECT_TRUE(transposeTest({2, 37, 3, 16}, {0, 2, 1, 3}, u32));
    EXPECT_TRUE(transposeTest({3, 4, 5}, {2, 0, 1}, u32));
    EXPECT_TRUE(transposeTest({5, 1, 7}, {2, 1, 0}, u32));
    EXPECT_TRUE(transposeTest({1, 9}, {1, 0}, u32));
    EXPECT_TRUE(transposeTest({2, 3, 4, 5}, {3, 1, 0, 2}, u32));
    EXPECT_TRUE(transposeTest({40, 3, 50}, {2, 1, 0}, u32));
  }
}

TEST(CudaEmulation, GatherAndGatherGrad) {
  EXPECT_TRUE(gatherGradTest(1, 10, 24, 21));
  EXPECT_TRUE(gatherGradTest(1, 1000, 8, 4096));
  EXPECT_TRUE(gatherGradTest(4, 5, 3, 6));
}

/// gather_elements and its gradient against a host loop, with repeated,
/// negative and one bad index (recorded; its element 0, its gradient
/// skipped).
bool gatherElementsTest(int64_t outer, int64_t dim, int64_t count,
                        int64_t inner) {
  std::mt19937 rng(static_cast<unsigned>(outer * 131 + dim * 7 + count));
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f);
  std::uniform_int_distribution<int64_t> pick(-dim, dim - 1);
  ElementsDims g{outer, dim, count, inner};
  int64_t n = outer * count * inner;
  std::vector<float> data(outer * dim * inner), dy(n);
  for (auto &v : data)
    v = uf(rng);
  for (auto &v : dy)
    v = uf(rng);
  std::vector<int64_t> idx(n);
  for (auto &v : idx)
    v = pick(rng);
  int64_t badAt = n / 2;
  idx[badAt] = dim + 3;
  std::vector<float> y(n), dx(outer * dim * inner, 0.0f);
  DataCheckRecord rec{};
  emu::launch(dim3(3), dim3(32), 0, [&] {
    gatherElementsKernel(FloatIn{data.data(), Elem::F32}, idx.data(),
                         FloatOut{y.data(), Elem::F32}, g, 5, &rec);
  });
  bool ok = rec.check == 5 && rec.position == badAt && rec.value == dim + 3;
  emu::launch(dim3(2), dim3(32), 0, [&] {
    gatherElementsGradKernel(FloatIn{dy.data(), Elem::F32}, idx.data(),
                             FloatOut{dx.data(), Elem::F32},
                             FloatIn{dx.data(), Elem::F32}, g, 5, &rec);
  });
  std::vector<float> wantDx(dx.size(), 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t j = 0; j < count; ++j) {
        int64_t t = (o * count + j) * inner + i;
        int64_t r = idx[t] < 0 ? idx[t] + dim : idx[t];
        if (t == badAt) {
          ok &= y[t] == 0.0f;
          continue;
        }
        ok &= y[t] == data[(o * dim + r) * inner + i];
        wantDx[(o * dim + r) * inner + i] += dy[t];
      }
  return ok && dx == wantDx;
}

/// scatter_nd (after the copy) and gather_nd against host loops, with
/// repeated rows and one bad index (recorded, its row skipped / zeros).
bool scatterNdTest(int64_t rows, int mode) {
  std::mt19937 rng(static_cast<unsigned>(rows * 3 + mode));
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f);
  NdDims g;
  g.k = 2;
  g.rows = rows;
  g.slice = 3;
  g.dims[0] = 4;
  g.dims[1] = 5;
  std::uniform_int_distribution<int64_t> pick0(-4, 3), pick1(-5, 4);
  std::vector<int64_t> idx(rows * 2);
  for (int64_t r = 0; r < rows; ++r) {
    idx[2 * r] = pick0(rng);
    idx[2 * r + 1] = pick1(rng);
  }
  idx[1] = 9; // row 0 is bad
  std::vector<float> y(4 * 5 * 3), upd(rows * 3);
  for (auto &v : y)
    v = uf(rng);
  for (auto &v : upd)
    v = uf(rng);
  std::vector<float> want = y, data = y;
  DataCheckRecord rec{};
  emu::launch(dim3(2), dim3(2), 0, [&] {
    scatterNdKernel(idx.data(), FloatIn{upd.data(), Elem::F32},
                    FloatOut{y.data(), Elem::F32}, FloatIn{y.data(), Elem::F32},
                    g, mode, 3, &rec);
  });
  bool ok = rec.check == 3 && rec.position == 1 && rec.value == 9;
  for (int64_t r = 1; r < rows; ++r) {
    int64_t a = (idx[2 * r] + 4) % 4, b = (idx[2 * r + 1] + 5) % 5;
    for (int64_t e = 0; e < 3; ++e) {
      float &w = want[(a * 5 + b) * 3 + e];
      float u = upd[r * 3 + e];
      w = mode == 0 ? u : mode == 1 ? w + u : w * u;
    }
  }
  ok &= y == want;
  std::vector<float> got(rows * 3);
  emu::launch(dim3(2), dim3(8), 0, [&] {
    gatherNdKernel(FloatIn{data.data(), Elem::F32}, idx.data(),
                   FloatOut{got.data(), Elem::F32}, g, 3, &rec);
  });
  for (int64_t r = 0; r < rows; ++r) {
    int64_t a = (idx[2 * r] + 4) % 4, b = (idx[2 * r + 1] + 5) % 5;
    for (int64_t e = 0; e < 3; ++e)
      ok &= got[r * 3 + e] == (r == 0 ? 0.0f : data[(a * 5 + b) * 3 + e]);
  }
  return ok;
}

TEST(CudaEmulation, ScatterNdAndGatherNd) {
  for (int mode : {0, 1, 2}) {
    EXPECT_TRUE(scatterNdTest(9, mode)) << mode;
    EXPECT_TRUE(scatterNdTest(40, mode)) << mode;
  }
}

TEST(CudaEmulation, GatherElementsAndItsGrad) {
  EXPECT_TRUE(gatherElementsTest(1, 10, 4, 1));
  EXPECT_TRUE(gatherElementsTest(3, 4, 9, 5));
  EXPECT_TRUE(gatherElementsTest(2, 7, 1, 33));
}

// --- element-wise pack kernels and the chunked strided copy ----------------
//
// Each fast path against the generic kernel it replaces, bit for bit: sizes
// that are not multiples of 8, odd innermost dims, misaligned pointers,
// bf16 and f32, every broadcast form.

TEST(CudaEmulation, FastDivMatchesDivision) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> un(0, (1u << 31) - 1);
  std::vector<uint32_t> divisors{
      1,        2,       3,     5,     7,        8,
      12,       37,      64,    768,   1000,     1024,
      2304,     50257,   65535, 65536, 1u << 20, (1u << 31) - 1,
      1u << 30, 3u << 29};
  for (int k = 0; k < 200; ++k)
    divisors.push_back(1 + un(rng) % 100000);
  for (uint32_t d : divisors) {
    FastDiv f(d);
    std::vector<uint32_t> ns{
        0,         1,    d - 1, d, d + 1, (1u << 31) - 1, (1u << 31) - 2,
        2 * d - 1, 2 * d};
    for (int k = 0; k < 500; ++k)
      ns.push_back(un(rng));
    for (uint32_t n : ns) {
      if (n >= (1u << 31))
        continue;
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    }
  }
}

/// The pack kernel of `op` with storage `T` on operands of `na` / `nb`
/// elements broadcast to `n` as `mode` / `index` describe, against the
/// generic kernel; `aOff` shifts `a` by that many elements (misaligned).
template <typename T, BinaryOp Op>
void checkBinaryPack(BroadcastMode mode, const BroadcastIndex &index, int64_t n,
                     int64_t na, int64_t nb, bool expectPack,
                     int64_t aOff = 0) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " na=" << na << " nb=" << nb
                                    << " bf16=" << (sizeof(T) == 2)
                                    << " op=" << int(Op) << " off=" << aOff);
  std::vector<float> fa = randomValues(na + aOff, -2, 2, 5),
                     fb = randomValues(nb, 0.5, 2, 6);
  std::vector<T> a(na + aOff + 8), b(nb + 8), got(n + 8), want(n + 8);
  for (int64_t i = 0; i < na + aOff; ++i)
    a[i] = fromFloat<T>(fa[i]);
  for (int64_t i = 0; i < nb; ++i)
    b[i] = fromFloat<T>(fb[i]);
  FloatIn ia{a.data() + aOff, elemOf<T>()}, ib{b.data(), elemOf<T>()};
  BinaryPack p =
      planBinaryPack(mode, ia, ib, {got.data(), elemOf<T>()}, n, index);
  ASSERT_EQ(p.ok, expectPack);
  emu::launch(2, 64, 0, [&] {
    binaryKernel<Op>(mode, ia, ib, {want.data(), elemOf<T>()}, n, index);
  });
  if (!p.ok)
    return;
  const T *pa = a.data() + aOff, *pb = b.data();
  emu::launch(2, 32, 0, [&] {
    if (p.b == Arg::Row)
      binaryPackKernel<Op, T, Arg::Full, Arg::Row>(pa, pb, got.data(), n,
                                                   p.cols);
    else if (p.a == Arg::Row)
      binaryPackKernel<Op, T, Arg::Row, Arg::Full>(pa, pb, got.data(), n,
                                                   p.cols);
    else if (p.b == Arg::Scalar)
      binaryPackKernel<Op, T, Arg::Full, Arg::Scalar>(pa, pb, got.data(), n,
                                                      p.cols);
    else if (p.a == Arg::Scalar)
      binaryPackKernel<Op, T, Arg::Scalar, Arg::Full>(pa, pb, got.data(), n,
                                                      p.cols);
    else
      binaryPackKernel<Op, T, Arg::Full, Arg::Full>(pa, pb, got.data(), n,
                                                    p.cols);
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(toFloat(got[i]), toFloat(want[i])) << i;
}

/// A broadcast index over `dims` with the given strides.
BroadcastIndex bcast(std::vector<int64_t> dims, std::vector<int64_t> sa,
                     std::vector<int64_t> sb) {
  BroadcastIndex ix;
  ix.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    ix.dims[d] = dims[d];
    ix.strideA[d] = sa[d];
    ix.strideB[d] = sb[d];
  }
  return ix;
}

template <typename T> void binaryPackCases() {
  BroadcastIndex none;
  // Same shape, a multiple of 8 and not (the tail).
  checkBinaryPack<T, BinaryOp::Add>(BroadcastMode::Same, none, 64, 64, 64,
                                    true);
  checkBinaryPack<T, BinaryOp::Sub>(BroadcastMode::Same, none, 203, 203, 203,
                                    true);
  checkBinaryPack<T, BinaryOp::Div>(BroadcastMode::Same, none, 5, 5, 5, true);
  // A misaligned operand falls back to the generic kernel.
  checkBinaryPack<T, BinaryOp::Add>(BroadcastMode::Same, none, 64, 64, 64,
                                    false, 1);
  // Scalars on either side.
  checkBinaryPack<T, BinaryOp::Mul>(BroadcastMode::ScalarB, none, 77, 77, 1,
                                    true);
  checkBinaryPack<T, BinaryOp::Sub>(BroadcastMode::ScalarA, none, 77, 1, 77,
                                    true);
  // Bias rows: [3, 5, 16] + [16], max with [5, 16], [16] - [3, 5, 16].
  checkBinaryPack<T, BinaryOp::Add>(BroadcastMode::General,
                                    bcast({3, 5, 16}, {80, 16, 1}, {0, 0, 1}),
                                    240, 240, 16, true);
  checkBinaryPack<T, BinaryOp::Max>(BroadcastMode::General,
                                    bcast({3, 5, 16}, {80, 16, 1}, {0, 16, 1}),
                                    240, 240, 80, true);
  checkBinaryPack<T, BinaryOp::Sub>(BroadcastMode::General,
                                    bcast({3, 5, 16}, {0, 0, 1}, {80, 16, 1}),
                                    240, 16, 240, true);
  // A row of [5, 16] over a leading dim, with a size-1 dim in between.
  checkBinaryPack<T, BinaryOp::Div>(
      BroadcastMode::General,
      bcast({3, 1, 5, 16}, {80, 80, 16, 1}, {0, 7, 16, 1}), 240, 240, 80, true);
  // Rows not a multiple of 8, and a column broadcast: generic.
  checkBinaryPack<T, BinaryOp::Add>(BroadcastMode::General,
                                    bcast({4, 5, 6}, {30, 6, 1}, {0, 0, 1}),
                                    120, 120, 6, false);
  checkBinaryPack<T, BinaryOp::Add>(BroadcastMode::General,
                                    bcast({4, 16}, {16, 1}, {1, 0}), 64, 64, 4,
                                    false);
}

TEST(CudaEmulation, BinaryPackPaths) {
  binaryPackCases<float>();
  binaryPackCases<Bf16>();
  // Mixed storages stay on the generic kernel.
  std::vector<Bf16> a(16), c(16);
  std::vector<float> b(16);
  BroadcastIndex none;
  EXPECT_FALSE(planBinaryPack(BroadcastMode::Same, {a.data(), Elem::BF16},
                              {b.data(), Elem::F32}, {c.data(), Elem::BF16}, 16,
                              none)
                   .ok);
}

template <typename T, UnaryOp Op> void checkUnaryPack(int64_t n, float lo) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " op=" << int(Op)
                                    << " bf16=" << (sizeof(T) == 2));
  std::vector<float> fx = randomValues(n, lo, 3, 8);
  std::vector<T> x(n + 8), got(n + 8), want(n + 8);
  for (int64_t i = 0; i < n; ++i)
    x[i] = fromFloat<T>(fx[i]);
  emu::launch(2, 64, 0, [&] {
    unaryKernel<Op>({x.data(), elemOf<T>()}, {want.data(), elemOf<T>()}, n);
  });
  emu::launch(2, 32, 0, [&] { unaryPackKernel<Op>(x.data(), got.data(), n); });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(toFloat(got[i]), toFloat(want[i])) << i;
}

template <typename T, UnaryGradOp Op> void checkUnaryGradPack(int64_t n) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " op=" << int(Op)
                                    << " bf16=" << (sizeof(T) == 2));
  std::vector<float> fd = randomValues(n, -1, 1, 9),
                     fv = randomValues(n, -3, 3, 10);
  std::vector<T> dy(n + 8), v(n + 8), got(n + 8), want(n + 8);
  for (int64_t i = 0; i < n; ++i) {
    dy[i] = fromFloat<T>(fd[i]);
    v[i] = fromFloat<T>(fv[i]);
  }
  emu::launch(2, 64, 0, [&] {
    unaryGradKernel<Op>({dy.data(), elemOf<T>()}, {v.data(), elemOf<T>()},
                        {want.data(), elemOf<T>()}, n);
  });
  emu::launch(2, 32, 0, [&] {
    unaryGradPackKernel<Op>(dy.data(), v.data(), got.data(), n);
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(toFloat(got[i]), toFloat(want[i])) << i;
}

template <typename T> void unaryPackCases() {
  for (int64_t n : {3, 8, 61, 200}) {
    checkUnaryPack<T, UnaryOp::Gelu>(n, -3);
    checkUnaryPack<T, UnaryOp::GeluTanh>(n, -3);
    checkUnaryPack<T, UnaryOp::Relu>(n, -3);
    checkUnaryPack<T, UnaryOp::Log>(n, 0.1f);
    checkUnaryGradPack<T, UnaryGradOp::Gelu>(n);
    checkUnaryGradPack<T, UnaryGradOp::GeluTanh>(n);
    checkUnaryGradPack<T, UnaryGradOp::Tanh>(n);
  }
}

TEST(CudaEmulation, UnaryPackPaths) {
  unaryPackCases<float>();
  unaryPackCases<Bf16>();
}

TEST(CudaEmulation, ScaleAndConvertPacks) {
  for (int64_t n : {5, 64, 203}) {
    std::vector<float> x = randomValues(n, -100, 100, 12), y(n), want(n);
    emu::launch(2, 32, 0,
                [&] { scalePackKernel<float>(x.data(), y.data(), n, 0.125f); });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(y[i], x[i] * 0.125f);
    std::vector<Bf16> h(n), hWant(n);
    emu::launch(2, 32, 0,
                [&] { convertPackKernel<float, Bf16>(x.data(), h.data(), n); });
    emu::launch(2, 64, 0, [&] {
      convertKernel(nullptr, {x.data(), Elem::F32}, {hWant.data(), Elem::BF16},
                    n);
    });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(toFloat(h[i]), toFloat(hWant[i])) << i;
    emu::launch(2, 32, 0,
                [&] { convertPackKernel<Bf16, float>(h.data(), y.data(), n); });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(y[i], toFloat(h[i])) << i;
    std::vector<Bf16> hs(n);
    emu::launch(2, 32, 0,
                [&] { scalePackKernel<Bf16>(h.data(), hs.data(), n, 3.0f); });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(toFloat(hs[i]), roundBf16(toFloat(h[i]) * 3.0f)) << i;
  }
}

/// `launchStridedCopy`'s choice on host threads: the chunk kernel when
/// `planChunkCopy` takes the copy, else the element kernel. Returns the
/// chunk bytes (0: element kernel).
int runStridedCopy(FloatIn src, FloatOut dst, int64_t n, const CopyIndex &ix) {
  ChunkCopy c;
  if (src.e != dst.e ||
      !planChunkCopy(src.p, dst.p, elemBytes(src.e), n, ix, c)) {
    emu::launch(2, 64, 0, [&] { stridedCopyKernel<int64_t>(src, dst, n, ix); });
    return 0;
  }
  emu::launch(2, 64, 0, [&] {
    switch (c.chunkBytes) {
    case 16:
      chunkCopyKernel(static_cast<const uint4 *>(src.p),
                      static_cast<uint4 *>(dst.p), c);
      break;
    case 8:
      chunkCopyKernel(static_cast<const uint2 *>(src.p),
                      static_cast<uint2 *>(dst.p), c);
      break;
    case 4:
      chunkCopyKernel(static_cast<const uint32_t *>(src.p),
                      static_cast<uint32_t *>(dst.p), c);
      break;
    default:
      chunkCopyKernel(static_cast<const uint16_t *>(src.p),
                      static_cast<uint16_t *>(dst.p), c);
    }
  });
  return c.chunkBytes;
}

/// A copy over `dims` with source / destination strides, from `src` +
/// `srcOff` into a destination of `dstSize` elements + `dstOff`, chunked
/// vs the element kernel; expects chunks of `chunkBytes`.
template <typename T>
void checkChunkCopy(std::vector<int64_t> dims, std::vector<int64_t> ss,
                    std::vector<int64_t> ds, int64_t srcSize, int64_t dstSize,
                    int expectChunk, int64_t srcOff = 0, int64_t dstOff = 0) {
  SCOPED_TRACE(::testing::Message()
               << "bf16=" << (sizeof(T) == 2) << " rank=" << dims.size()
               << " inner=" << dims.back() << " srcOff=" << srcOff
               << " dstOff=" << dstOff);
  CopyIndex ix;
  ix.rank = static_cast<int>(dims.size());
  int64_t n = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    ix.dims[k] = dims[k];
    ix.srcStride[k] = ss[k];
    ix.dstStride[k] = ds[k];
    n *= dims[k];
  }
  // 16-byte aligned storage, then the offsets.
  std::vector<uint4> srcBuf((srcSize + srcOff) * sizeof(T) / 16 + 1),
      gotBuf((dstSize + dstOff) * sizeof(T) / 16 + 1), wantBuf(gotBuf.size());
  T *src = reinterpret_cast<T *>(srcBuf.data()) + srcOff;
  T *got = reinterpret_cast<T *>(gotBuf.data()) + dstOff;
  T *want = reinterpret_cast<T *>(wantBuf.data()) + dstOff;
  for (int64_t i = 0; i < srcSize; ++i)
    src[i] = fromFloat<T>(float(i % 1000) + 0.5f);
  for (int64_t i = 0; i < dstSize; ++i)
    got[i] = want[i] = fromFloat<T>(-1.0f);
  int chunk = runStridedCopy({src, elemOf<T>()}, {got, elemOf<T>()}, n, ix);
  EXPECT_EQ(chunk, expectChunk);
  emu::launch(2, 64, 0, [&] {
    stridedCopyKernel<int64_t>({src, elemOf<T>()}, {want, elemOf<T>()}, n, ix);
  });
  for (int64_t i = 0; i < dstSize; ++i)
    ASSERT_EQ(toFloat(got[i]), toFloat(want[i])) << i;
}

TEST(CudaEmulation, ChunkCopyPaths) {
  // The head transpose [B, S, H, D] -> [B, H, S, D]: D = 16 moves in 16-byte
  // chunks (bf16 and f32), D = 4 in bf16 in 8, D = 5 element by element.
  auto head = [](int64_t b, int64_t s, int64_t h, int64_t d) {
    return std::vector<std::vector<int64_t>>{
        {b, h, s, d}, {s * h * d, d, h * d, 1}, {h * s * d, s * d, d, 1}};
  };
  struct Head {
    int64_t d;
    int bf16Chunk, f32Chunk;
  };
  for (Head c :
       {Head{16, 16, 16}, Head{4, 8, 16}, Head{5, 2, 4}, Head{2, 4, 8}}) {
    auto v = head(2, 7, 3, c.d);
    int64_t n = 2 * 7 * 3 * c.d;
    checkChunkCopy<Bf16>(v[0], v[1], v[2], n, n, c.bf16Chunk);
    checkChunkCopy<float>(v[0], v[1], v[2], n, n, c.f32Chunk);
  }
  // The q/k/v split: a window of the last dim of [2, 5, 48] (k: offset 16
  // elements), with a misaligned window start (offset 3) and destination.
  checkChunkCopy<Bf16>({10, 16}, {48, 1}, {16, 1}, 480, 160, 16, 16);
  checkChunkCopy<Bf16>({10, 16}, {48, 1}, {16, 1}, 480, 160, 2, 3);
  checkChunkCopy<float>({10, 16}, {48, 1}, {16, 1}, 480, 160, 4, 3);
  checkChunkCopy<float>({10, 16}, {48, 1}, {16, 1}, 480, 160, 8, 2, 2);
  // slice_grad's scatter back into the window.
  checkChunkCopy<Bf16>({10, 16}, {16, 1}, {48, 1}, 160, 480, 16, 0, 32);
  checkChunkCopy<Bf16>({10, 24}, {24, 1}, {48, 1}, 240, 480, 16, 0, 8);
  // Strided slices (step 2 on the inner dim), expand (a stride-0 dim,
  // innermost and outer), a concat part, a plain transpose.
  checkChunkCopy<Bf16>({3, 7, 3}, {84, 6, 2}, {21, 3, 1}, 420, 63, 2);
  checkChunkCopy<float>({4, 3, 5}, {5, 0, 1}, {15, 5, 1}, 20, 60, 4);
  checkChunkCopy<Bf16>({4, 3, 16}, {16, 0, 1}, {48, 16, 1}, 64, 192, 16);
  checkChunkCopy<Bf16>({6, 9}, {0, 1}, {9, 1}, 9, 54, 2);
  checkChunkCopy<float>({2, 12}, {12, 1}, {32, 1}, 24, 64, 16, 0, 8);
  checkChunkCopy<float>({9, 7}, {1, 9}, {7, 1}, 63, 63, 4);
  // A single element, and a copy the dims merge into one run.
  checkChunkCopy<Bf16>({1, 1}, {5, 1}, {1, 1}, 1, 1, 2);
  checkChunkCopy<Bf16>({4, 6, 8}, {48, 8, 1}, {48, 8, 1}, 192, 192, 16);
  // Storages differ: the element kernel converts.
  {
    std::vector<float> x = randomValues(40, -2, 2, 3);
    std::vector<Bf16> y(40);
    CopyIndex ix;
    ix.rank = 1;
    ix.dims[0] = 40;
    ix.srcStride[0] = ix.dstStride[0] = 1;
    EXPECT_EQ(
        runStridedCopy({x.data(), Elem::F32}, {y.data(), Elem::BF16}, 40, ix),
        0);
    for (int i = 0; i < 40; ++i)
      EXPECT_EQ(toFloat(y[i]), roundBf16(x[i]));
  }
}

/// slice_grad of a window of whole rows in one pass, against zeros plus
/// the window; `off` shifts both pointers (misaligned).
template <typename T>
void checkPadRows(int64_t rows, int64_t rowLen, int64_t start, int64_t len,
                  int64_t off, int expectChunk) {
  SCOPED_TRACE(::testing::Message()
               << "bf16=" << (sizeof(T) == 2) << " rowLen=" << rowLen
               << " start=" << start << " len=" << len << " off=" << off);
  std::vector<uint4> dyBuf((rows * len + off) * sizeof(T) / 16 + 1),
      dxBuf((rows * rowLen + off) * sizeof(T) / 16 + 1);
  T *dy = reinterpret_cast<T *>(dyBuf.data()) + off;
  T *dx = reinterpret_cast<T *>(dxBuf.data()) + off;
  for (int64_t i = 0; i < rows * len; ++i)
    dy[i] = fromFloat<T>(float(i) + 1.0f);
  for (int64_t i = 0; i < rows * rowLen; ++i)
    dx[i] = fromFloat<T>(-7.0f);
  PadRows p;
  ASSERT_TRUE(planPadRows(dy, dx, sizeof(T), rows, rowLen, start, len, p));
  EXPECT_EQ(p.chunkBytes, expectChunk);
  emu::launch(2, 64, 0, [&] {
    switch (p.chunkBytes) {
    case 16:
      padRowsKernel(reinterpret_cast<const uint4 *>(dy),
                    reinterpret_cast<uint4 *>(dx), p);
      break;
    case 8:
      padRowsKernel(reinterpret_cast<const uint2 *>(dy),
                    reinterpret_cast<uint2 *>(dx), p);
      break;
    case 4:
      padRowsKernel(reinterpret_cast<const uint32_t *>(dy),
                    reinterpret_cast<uint32_t *>(dx), p);
      break;
    default:
      padRowsKernel(reinterpret_cast<const uint16_t *>(dy),
                    reinterpret_cast<uint16_t *>(dx), p);
    }
  });
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < rowLen; ++c) {
      float want = c >= start && c < start + len
                       ? float(r * len + c - start) + 1.0f
                       : 0.0f;
      ASSERT_EQ(toFloat(dx[r * rowLen + c]), want) << r << ", " << c;
    }
}

TEST(CudaEmulation, PadRowsForSliceGrad) {
  // The q/k/v split [rows, 3 x 16]: q, k, v windows, aligned and not.
  checkPadRows<Bf16>(5, 48, 0, 16, 0, 16);
  checkPadRows<Bf16>(5, 48, 16, 16, 0, 16);
  checkPadRows<Bf16>(5, 48, 32, 16, 0, 16);
  checkPadRows<Bf16>(5, 48, 4, 16, 0, 8);
  checkPadRows<Bf16>(5, 48, 3, 16, 0, 2);
  checkPadRows<Bf16>(5, 48, 16, 16, 1, 2);
  checkPadRows<float>(5, 48, 16, 16, 0, 16);
  checkPadRows<float>(5, 48, 3, 16, 0, 4);
  checkPadRows<float>(5, 48, 16, 16, 2, 8);
  // Odd widths, one row, a single element.
  checkPadRows<Bf16>(7, 13, 5, 7, 0, 2);
  checkPadRows<float>(1, 100, 37, 50, 0, 4);
  checkPadRows<Bf16>(1, 9, 8, 1, 0, 2);
}

TEST(CudaEmulation, FillRowsPack) {
  // The bias fill before a GEMM: bf16 or f32 rows into bf16 or f32 output.
  std::vector<float> row = randomValues(24, -2, 2, 4);
  std::vector<Bf16> rowH = bf16Of(row);
  std::vector<Bf16> outH(5 * 24);
  std::vector<float> outF(5 * 24);
  emu::launch(2, 32, 0, [&] {
    fillRowsPackKernel(outH.data(), row.data(), int64_t(5 * 24), int64_t(24));
  });
  for (int i = 0; i < 5 * 24; ++i)
    ASSERT_EQ(toFloat(outH[i]), row[i % 24]) << i;
  emu::launch(2, 32, 0, [&] {
    fillRowsPackKernel(outF.data(), rowH.data(), int64_t(5 * 24), int64_t(24));
  });
  for (int i = 0; i < 5 * 24; ++i)
    ASSERT_EQ(outF[i], row[i % 24]) << i;
}

// --- padded copy (padded GEMMs)
// ----------------------------------------------

/// `count` dense `[sr, sc]` matrices into dense `[dr, dc]` ones with
/// `gridRows` row blocks (fewer than the rows: blocks stride over rows):
/// every destination element is written, the source's where it has one and
/// zero in the pad.
template <typename T>
bool paddedCopyTest(int64_t count, int64_t sr, int64_t sc, int64_t dr,
                    int64_t dc, unsigned gridRows) {
  std::vector<T> src(count * sr * sc), dst(count * dr * dc, T(0xABCD));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<T>(i * 2654435761u + 1);
  unsigned chunks = static_cast<unsigned>((dc + kThreads * kCopyUnroll - 1) /
                                          (kThreads * kCopyUnroll));
  emu::launch(dim3(gridRows, chunks), dim3(kThreads), 0, [&] {
    paddedCopyKernel<T>(dst.data(), dc, dr, src.data(), sc, sr, count);
  });
  for (int64_t e = 0; e < count; ++e)
    for (int64_t r = 0; r < dr; ++r)
      for (int64_t c = 0; c < dc; ++c) {
        T want = r < sr && c < sc ? src[(e * sr + r) * sc + c] : T(0);
        if (dst[(e * dr + r) * dc + c] != want)
          return false;
      }
  return true;
}

TEST(CudaEmulation, PaddedCopyZeroFillsThePad) {
  // bf16 rows of 7 into rows of 64 (pad columns); rows of 2051 into 2112
  // (two column blocks, blocks striding over rows); f32 [3, 4099] into
  // [5, 4160] (pad rows too); two matrices with pad rows each; and back out
  // (the destination smaller: the pad is dropped).
  EXPECT_TRUE(paddedCopyTest<uint16_t>(1, 5, 7, 5, 64, 5));
  EXPECT_TRUE(paddedCopyTest<uint16_t>(1, 6, 2051, 6, 2112, 4));
  EXPECT_TRUE(paddedCopyTest<uint32_t>(1, 3, 4099, 5, 4160, 2));
  EXPECT_TRUE(paddedCopyTest<uint32_t>(2, 3, 9, 64, 64, 7));
  EXPECT_TRUE(paddedCopyTest<uint16_t>(2, 64, 64, 3, 9, 5));
  EXPECT_TRUE(paddedCopyTest<uint16_t>(1, 6, 2112, 6, 2051, 3));
}

} // namespace
} // namespace loom::runtime::cuda
