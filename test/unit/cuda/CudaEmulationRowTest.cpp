//===- CudaEmulationRowTest.cpp - Row kernels, emulated -----*- C++ -*-===//
//
// bf16 operands next to f32 ones in the element-wise, norm, softmax,
// loss and AdamW kernels, the reductions, the chunked and slab column sums, and
// the 16-byte-pack row kernels (layer/RMS norm, softmax, cross-entropy) with
// odd rows, misaligned rows and NaN.
//
// Built by the host compiler against test/unit/cuda/CudaHostEmulation.h
// (one host thread per CUDA thread) and compared with double-precision
// references or with the generic kernels; no device needed. LoomCudaTests
// checks the same kernels on a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaHostEmulation.h"

#include "runtime/cuda/Elementwise.cu"
#include "runtime/cuda/Loss.cu"
#include "runtime/cuda/Norm.cu"
#include "runtime/cuda/Reduce.cu"
#include "runtime/cuda/Softmax.cu"

#include "CudaEmulationUtil.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace loom::runtime::cuda {
namespace {

// --- reductions --------------------------------------------------------------

/// x [4, 37, 6] reduced over dims 0 and 2 by either reduction kernel.
bool reduceTest(ReduceKind kind, bool block, bool withNan) {
  std::vector<int64_t> xs{4, 37, 6};
  std::vector<float> x(numel(xs));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uf(-1, 1);
  for (auto &v : x)
    v = uf(rng);
  if (withNan)
    x[5 * 6 + 2] = NAN; // output 5
  SumToIndex ix;
  ix.keptRank = 1;
  ix.keptDims[0] = 37;
  ix.keptStrides[0] = 6;
  ix.redRank = 2;
  ix.redDims[0] = 4;
  ix.redStrides[0] = 37 * 6;
  ix.redDims[1] = 6;
  ix.redStrides[1] = 1;
  ix.reduced = 24;
  std::vector<float> y(37);
  FloatIn in{x.data(), Elem::F32};
  FloatOut out{y.data(), Elem::F32};
  auto launch = [&](auto kernel) {
    emu::launch(dim3(block ? 4 : 1), dim3(block ? 64 : 32), 0,
                [&] { kernel(in, out, 37, ix); });
  };
  if (kind == ReduceKind::Max) {
    if (block)
      launch(reduceBlockKernel<ReduceKind::Max>);
    else
      launch(reduceThreadKernel<ReduceKind::Max>);
  } else if (kind == ReduceKind::Mean) {
    if (block)
      launch(reduceBlockKernel<ReduceKind::Mean>);
    else
      launch(reduceThreadKernel<ReduceKind::Mean>);
  } else {
    if (block)
      launch(reduceBlockKernel<ReduceKind::Sum>);
    else
      launch(reduceThreadKernel<ReduceKind::Sum>);
  }
  bool ok = true;
  for (int j = 0; j < 37; ++j) {
    double acc = kind == ReduceKind::Max ? -INFINITY : 0;
    bool nan = false;
    for (int a = 0; a < 4; ++a)
      for (int c = 0; c < 6; ++c) {
        float v = x[(a * 37 + j) * 6 + c];
        nan |= std::isnan(v);
        acc = kind == ReduceKind::Max ? std::max<double>(acc, v) : acc + v;
      }
    if (kind == ReduceKind::Mean)
      acc /= 24;
    if (nan && kind == ReduceKind::Max)
      ok &= std::isnan(y[j]);
    else
      ok &= std::fabs(y[j] - acc) < 1e-5;
  }
  return ok;
}

TEST(CudaEmulation, Reductions) {
  for (ReduceKind k : {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max})
    for (bool block : {false, true}) {
      EXPECT_TRUE(reduceTest(k, block, false));
      if (k == ReduceKind::Max)
        EXPECT_TRUE(reduceTest(k, block, true));
    }
}

TEST(CudaEmulation, BinaryBf16WithF32Broadcast) {
  // c[4, 5, 6] (bf16) = a[4, 5, 6] (bf16) + b[5, 1] (f32): exactly the
  // rounded float sum.
  std::vector<float> a = randomValues(120, -2, 2, 1),
                     b = randomValues(5, -2, 2, 2);
  std::vector<Bf16> ab = bf16Of(a), c(120);
  BroadcastIndex ix;
  ix.rank = 3;
  int64_t dims[3] = {4, 5, 6}, sa[3] = {30, 6, 1}, sb[3] = {0, 1, 0};
  for (int d = 0; d < 3; ++d) {
    ix.dims[d] = dims[d];
    ix.strideA[d] = sa[d];
    ix.strideB[d] = sb[d];
  }
  emu::launch(2, 32, 0, [&] {
    binaryKernel<BinaryOp::Add>(BroadcastMode::General, {ab.data(), Elem::BF16},
                                {b.data(), Elem::F32}, {c.data(), Elem::BF16},
                                120, ix);
  });
  for (int64_t i = 0; i < 120; ++i)
    EXPECT_EQ(toFloat(c[i]), roundBf16(a[i] + b[(i / 6) % 5])) << i;
}

TEST(CudaEmulation, LayerNormBf16) {
  const int64_t rows = 70, cols = 77; // 3 row chunks for dscale, dbias
  std::vector<float> x = randomValues(rows * cols, -2, 2, 3),
                     dy = randomValues(rows * cols, -1, 1, 4),
                     scale = randomValues(cols, -1, 1, 5),
                     bias = randomValues(cols, -1, 1, 6);
  std::vector<Bf16> xb = bf16Of(x), dyb = bf16Of(dy), y(rows * cols),
                    dx(rows * cols);
  std::vector<float> dscale(cols), dbias(cols), stats(2 * rows);
  float eps = 1e-5f;
  emu::launch(2, 64, 0, [&] {
    layerNormKernel({xb.data(), Elem::BF16}, {scale.data(), Elem::F32},
                    {bias.data(), Elem::F32}, {y.data(), Elem::BF16}, rows,
                    cols, eps, false);
  });
  emu::launch(2, 64, 0, [&] {
    layerNormGradRowKernel({dyb.data(), Elem::BF16}, {xb.data(), Elem::BF16},
                           {scale.data(), Elem::F32}, {dx.data(), Elem::BF16},
                           rows, cols, eps, false, stats.data());
  });
  int64_t chunks = layerNormGradChunks(rows, cols);
  std::vector<double> partials(2 * chunks * cols);
  emu::launch(1, 64, 0, [&] {
    layerNormParamPartialKernel({dyb.data(), Elem::BF16},
                                {xb.data(), Elem::BF16}, stats.data(),
                                partials.data(), rows, cols, chunks);
  });
  emu::launch(dim3(3), dim3(kSlabCols, kSlabRows), 0, [&] {
    layerNormParamSlabFinishKernel(partials.data(), {dscale.data(), Elem::F32},
                                   {dbias.data(), Elem::F32}, cols, chunks);
  });
  std::vector<double> ds(cols, 0), db(cols, 0);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < cols; ++c)
      m += x[r * cols + c];
    m /= cols;
    for (int64_t c = 0; c < cols; ++c)
      v += (x[r * cols + c] - m) * (x[r * cols + c] - m);
    double rstd = 1 / std::sqrt(v / cols + eps), sg = 0, sgx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double xh = (x[r * cols + c] - m) * rstd, g = dy[r * cols + c] * scale[c];
      EXPECT_NEAR(toFloat(y[r * cols + c]), xh * scale[c] + bias[c], 2e-2);
      sg += g;
      sgx += g * xh;
      ds[c] += dy[r * cols + c] * xh;
      db[c] += dy[r * cols + c];
    }
    for (int64_t c = 0; c < cols; ++c) {
      double xh = (x[r * cols + c] - m) * rstd;
      double want =
          rstd * (dy[r * cols + c] * scale[c] - sg / cols - xh * sgx / cols);
      EXPECT_NEAR(toFloat(dx[r * cols + c]), want,
                  2e-2 * (1 + std::fabs(want)));
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_NEAR(dscale[c], ds[c], 1e-4);
    EXPECT_NEAR(dbias[c], db[c], 1e-4);
  }
}

TEST(CudaEmulation, SoftmaxAndCrossEntropyBf16) {
  const int64_t rows = 7, classes = 50;
  std::vector<float> x = randomValues(rows * classes, -4, 4, 7);
  std::vector<Bf16> xb = bf16Of(x), y(rows * classes), grad(rows * classes),
                    yc(rows * classes);
  std::vector<int64_t> target(rows);
  for (int64_t r = 0; r < rows; ++r)
    target[r] = (r * 13) % classes;
  std::vector<float> rowLoss(rows), loss(1);
  DataCheckRecord rec{};
  emu::launch(2, 64, 0, [&] {
    softmaxRowKernel({xb.data(), Elem::BF16}, {y.data(), Elem::BF16}, rows,
                     classes);
  });
  // The same values as [1, classes, rows] along the middle axis: the
  // column path (x is read transposed there).
  std::vector<Bf16> xt(rows * classes);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < classes; ++c)
      xt[c * rows + r] = xb[r * classes + c];
  emu::launch(1, 32, 0, [&] {
    softmaxColumnKernel({xt.data(), Elem::BF16}, {yc.data(), Elem::BF16}, 1,
                        classes, rows);
  });
  emu::launch(2, 64, 0, [&] {
    crossEntropyRowsVecKernel<Bf16>(xb.data(), target.data(), rowLoss.data(),
                                    rows, classes, 1, &rec);
  });
  emu::launch(1, 64, 0, [&] {
    finishSumKernel<float>(rowLoss.data(), rows, 1.0 / rows, loss.data());
  });
  emu::launch(2, 64, 0, [&] {
    crossEntropyGradKernel({xb.data(), Elem::BF16}, target.data(),
                           {grad.data(), Elem::BF16}, rows, classes, 1.0f / rows, 1,
                           &rec);
  });
  EXPECT_EQ(rec.check, 0);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      mx = std::max<double>(mx, x[r * classes + c]);
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(x[r * classes + c] - mx);
    for (int64_t c = 0; c < classes; ++c) {
      double p = std::exp(x[r * classes + c] - mx) / sum;
      EXPECT_NEAR(toFloat(y[r * classes + c]), p, 1e-2 * p + 1e-6);
      EXPECT_NEAR(toFloat(yc[c * rows + r]), p, 1e-2 * p + 1e-6);
      double g = (p - (c == target[r])) / rows;
      EXPECT_NEAR(toFloat(grad[r * classes + c]), g,
                  1e-2 * std::fabs(g) + 1e-6);
    }
    total += mx + std::log(sum) - x[r * classes + target[r]];
  }
  EXPECT_NEAR(loss[0], total / rows, 1e-5);
}

TEST(CudaEmulation, AdamWWithBf16Gradient) {
  const int64_t n = 300;
  std::vector<float> p = randomValues(n, -1, 1, 8),
                     g = randomValues(n, -1, 1, 9);
  std::vector<float> m(n, 0.1f), v(n, 0.01f), p0 = p;
  std::vector<Bf16> gb = bf16Of(g);
  AdamWArgs a{0.99999f, 0.1f, 0.999f, 0.001f, 1e-3f, 0.5f, 1e-8f};
  emu::launch(2, 64, 0, [&] {
    adamwKernel(p.data(), {gb.data(), Elem::BF16}, m.data(), v.data(), n, a);
  });
  for (int64_t i = 0; i < n; ++i) {
    float mi = 0.1f + a.w1 * (g[i] - 0.1f);
    float vi = 0.01f * a.b2 + a.w2 * g[i] * g[i];
    float want = p0[i] * a.decay -
                 a.stepSize * (mi / (std::sqrt(vi) / a.bc2Sqrt + a.eps));
    EXPECT_FLOAT_EQ(m[i], mi);
    EXPECT_FLOAT_EQ(v[i], vi);
    EXPECT_NEAR(p[i], want, 1e-6);
  }
}

/// The two-pass (chunked) reduction of bias gradients: x [rows, cols]
/// reduced over rows, as `launchReduce` runs it.
bool chunkedReduceTest(ReduceKind kind, int64_t rows, int64_t cols,
                       bool withNan) {
  std::vector<float> x = randomValues(rows * cols, -1, 1, int(rows + cols));
  if (withNan)
    x[(rows / 2) * cols + 3] = NAN;
  SumToIndex ix;
  ix.keptRank = 1;
  ix.keptDims[0] = cols;
  ix.keptStrides[0] = 1;
  ix.redRank = 1;
  ix.redDims[0] = rows;
  ix.redStrides[0] = cols;
  ix.reduced = rows;
  int64_t chunks = reduceChunks(cols, ix);
  if (chunks < 2)
    return false;
  std::vector<float> partials(chunks * cols), y(cols);
  FloatIn in{x.data(), Elem::F32};
  FloatOut out{y.data(), Elem::F32};
  auto run = [&](auto chunk, auto finish) {
    emu::launch(3, 64, 0,
                [&] { chunk(in, partials.data(), cols, chunks, ix); });
    emu::launch(1, 64, 0,
                [&] { finish(partials.data(), out, cols, chunks, rows); });
  };
  if (kind == ReduceKind::Sum)
    run(reduceChunkKernel<ReduceKind::Sum>,
        reduceFinishKernel<ReduceKind::Sum>);
  else if (kind == ReduceKind::Mean)
    run(reduceChunkKernel<ReduceKind::Mean>,
        reduceFinishKernel<ReduceKind::Mean>);
  else
    run(reduceChunkKernel<ReduceKind::Max>,
        reduceFinishKernel<ReduceKind::Max>);
  bool ok = true;
  for (int64_t c = 0; c < cols; ++c) {
    double acc = kind == ReduceKind::Max ? -INFINITY : 0;
    bool nan = false;
    for (int64_t r = 0; r < rows; ++r) {
      float v = x[r * cols + c];
      nan |= std::isnan(v);
      acc = kind == ReduceKind::Max ? std::max<double>(acc, v) : acc + v;
    }
    if (kind == ReduceKind::Mean)
      acc /= rows;
    if (nan && kind == ReduceKind::Max)
      ok &= std::isnan(y[c]);
    else
      ok &= std::fabs(y[c] - acc) < 1e-4;
  }
  return ok;
}

TEST(CudaEmulation, ChunkedReductions) {
  for (ReduceKind k : {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max}) {
    EXPECT_TRUE(chunkedReduceTest(k, 300, 40, false));
    EXPECT_TRUE(chunkedReduceTest(k, 1000, 7, false));
  }
  EXPECT_TRUE(chunkedReduceTest(ReduceKind::Max, 300, 40, true));
}

// --- templated reduction, norm, softmax and loss kernels (16-byte packs) ----

/// Storage `T` copies of `v` (rounded in `v` for bf16) at element `offset`
/// of a 16-byte aligned buffer (so rows start off a 16-byte boundary when
/// `offset` is not a multiple of the pack).
template <typename T> struct Stored {
  std::vector<Pack<T, kVec<T>>> buf;
  T *p;
  Stored(std::vector<float> &v, int64_t offset = 0)
      : buf((v.size() + offset) / kVec<T> + 2) {
    p = reinterpret_cast<T *>(buf.data()) + offset;
    for (size_t i = 0; i < v.size(); ++i) {
      p[i] = fromFloat<T>(v[i]);
      v[i] = toFloat(p[i]);
    }
  }
  Stored(int64_t n, int64_t offset = 0) : buf((n + offset) / kVec<T> + 2) {
    p = reinterpret_cast<T *>(buf.data()) + offset;
  }
  float at(int64_t i) const { return toFloat(p[i]); }
};

/// Column sums of a dense [rows, cols] by the slab kernels with pack width
/// `V` (1 or the storage's), against a double reference.
template <ReduceKind K, typename T, int V>
void slabReduceCheck(int64_t rows, int64_t cols, bool withNan) {
  std::vector<float> x = randomValues(rows * cols, -1, 1, int(rows * cols));
  if (withNan)
    x[(rows / 2) * cols + cols / 2] = NAN;
  Stored<T> xs(x);
  int64_t chunks = slabRowChunks(rows, cols);
  std::vector<float> partials(chunks * cols, NAN), y(cols, NAN);
  int64_t width = kSlabCols * V;
  emu::launch(dim3(unsigned((cols + width - 1) / width), unsigned(chunks)),
              dim3(kSlabCols, kSlabRows), 0, [&] {
                reduceRowsSlabKernel<K, T, V>(xs.p, partials.data(), rows, cols,
                                              chunks);
              });
  emu::launch(dim3(unsigned((cols + kSlabCols - 1) / kSlabCols)),
              dim3(kSlabCols, kSlabRows), 0, [&] {
                reduceRowsFinishKernel<K>(
                    partials.data(), {y.data(), Elem::F32}, cols, chunks, rows);
              });
  for (int64_t c = 0; c < cols; ++c) {
    double acc = K == ReduceKind::Max ? -INFINITY : 0;
    bool nan = false;
    for (int64_t r = 0; r < rows; ++r) {
      float v = x[r * cols + c];
      nan |= std::isnan(v);
      acc = K == ReduceKind::Max ? std::max<double>(acc, v) : acc + v;
    }
    if (K == ReduceKind::Mean)
      acc /= rows;
    if (nan && (K == ReduceKind::Max || withNan))
      EXPECT_TRUE(std::isnan(y[c])) << c;
    else
      EXPECT_NEAR(y[c], acc, 1e-4) << rows << "x" << cols << " col " << c;
  }
}

TEST(CudaEmulation, SlabColumnSums) {
  SumToIndex ix; // [3, 50, 64] -> [64]: dense rows
  ix.keptRank = 1;
  ix.keptDims[0] = 64;
  ix.keptStrides[0] = 1;
  ix.redRank = 2;
  ix.redDims[0] = 3;
  ix.redStrides[0] = 50 * 64;
  ix.redDims[1] = 50;
  ix.redStrides[1] = 64;
  ix.reduced = 150;
  EXPECT_TRUE(denseRows(64, ix));
  EXPECT_EQ(reduceChunks(64, ix), slabRowChunks(150, 64));
  ix.redStrides[0] = 51 * 64; // padded: not dense
  EXPECT_FALSE(denseRows(64, ix));
  slabReduceCheck<ReduceKind::Sum, float, 4>(300, 40, false);
  slabReduceCheck<ReduceKind::Sum, float, 1>(300, 37, false);
  slabReduceCheck<ReduceKind::Sum, Bf16, 8>(260, 264, false);
  slabReduceCheck<ReduceKind::Sum, Bf16, 1>(129, 13, false);
  slabReduceCheck<ReduceKind::Sum, Bf16, 8>(1, 24, false);
  slabReduceCheck<ReduceKind::Mean, Bf16, 8>(200, 16, false);
  slabReduceCheck<ReduceKind::Max, float, 4>(300, 40, false);
  slabReduceCheck<ReduceKind::Max, float, 4>(300, 40, true);
  slabReduceCheck<ReduceKind::Sum, Bf16, 8>(140, 16, true);
}

/// Layer norm (or RMS norm) forward and backward by the warp kernels with
/// `M` packs a lane, rows of `T`, parameters of `P`, against double.
template <typename T, typename P, int M>
void warpLayerNormCheck(int64_t rows, int64_t cols, bool rms, bool withBias) {
  std::vector<float> x = randomValues(rows * cols, -2, 2, int(cols)),
                     dy = randomValues(rows * cols, -1, 1, int(cols) + 1),
                     scale = randomValues(cols, -1, 1, int(cols) + 2),
                     bias = randomValues(cols, -1, 1, int(cols) + 3);
  Stored<T> xs(x), dys(dy), y(rows * cols), dx(rows * cols);
  Stored<P> ss(scale), bs(bias);
  float eps = 1e-5f;
  std::vector<float> stats(2 * rows);
  unsigned grid = unsigned((rows + 1) / 2);
  emu::launch(grid, 64, 0, [&] {
    layerNormWarpKernel<T, P, M>(xs.p, ss.p, withBias ? bs.p : nullptr, y.p,
                                 rows, cols, eps, rms);
  });
  emu::launch(grid, 64, 0, [&] {
    layerNormGradWarpKernel<T, P, M>(dys.p, xs.p, ss.p, dx.p, rows, cols, eps,
                                     rms, stats.data());
  });
  int64_t chunks = layerNormGradChunks(rows, cols);
  std::vector<double> partials(2 * chunks * cols);
  std::vector<float> dscale(cols), dbias(cols);
  constexpr int V = kVec<T>;
  emu::launch(dim3(unsigned((cols + kSlabCols * V - 1) / (kSlabCols * V)),
                   unsigned(chunks)),
              dim3(kSlabCols, kSlabRows), 0, [&] {
                layerNormParamSlabKernel<T, V>(dys.p, xs.p, stats.data(),
                                               partials.data(), rows, cols,
                                               chunks);
              });
  emu::launch(dim3(unsigned((cols + kSlabCols - 1) / kSlabCols)),
              dim3(kSlabCols, kSlabRows), 0, [&] {
                layerNormParamSlabFinishKernel(
                    partials.data(), {dscale.data(), Elem::F32},
                    {dbias.data(), Elem::F32}, cols, chunks);
              });
  double tol = std::is_same_v<T, float> ? 1e-5 : 2e-2;
  std::vector<double> ds(cols, 0), db(cols, 0);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    if (!rms) {
      for (int64_t c = 0; c < cols; ++c)
        m += x[r * cols + c];
      m /= cols;
    }
    for (int64_t c = 0; c < cols; ++c)
      v += (x[r * cols + c] - m) * (x[r * cols + c] - m);
    double rstd = 1 / std::sqrt(v / cols + eps), sg = 0, sgx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double xh = (x[r * cols + c] - m) * rstd, g = dy[r * cols + c] * scale[c];
      double want = xh * scale[c] + (withBias ? bias[c] : 0);
      EXPECT_NEAR(y.at(r * cols + c), want, tol * (1 + std::fabs(want)));
      sg += g;
      sgx += g * xh;
      ds[c] += dy[r * cols + c] * xh;
      db[c] += dy[r * cols + c];
    }
    for (int64_t c = 0; c < cols; ++c) {
      double xh = (x[r * cols + c] - m) * rstd;
      double want = rstd * (dy[r * cols + c] * scale[c] -
                            (rms ? 0 : sg / cols) - xh * sgx / cols);
      EXPECT_NEAR(dx.at(r * cols + c), want, tol * (1 + std::fabs(want)))
          << r << " " << c;
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_NEAR(dscale[c], ds[c], 1e-4 * (1 + std::fabs(ds[c])));
    EXPECT_NEAR(dbias[c], db[c], 1e-4 * (1 + std::fabs(db[c])));
  }
}

TEST(CudaEmulation, LayerNormWarpKernels) {
  warpLayerNormCheck<Bf16, float, 4>(5, 776, false, true); // 97 packs
  warpLayerNormCheck<Bf16, float, 4>(3, 8, false, false);  // one pack
  warpLayerNormCheck<Bf16, Bf16, 8>(3, 1600, false, true);
  warpLayerNormCheck<float, float, 4>(7, 300, false, true);
  warpLayerNormCheck<float, float, 4>(4, 300, true, false);
  warpLayerNormCheck<float, Bf16, 8>(2, 1024, false, true);
  warpLayerNormCheck<Bf16, float, 4>(130, 64, false, true); // 2 row chunks
}

/// Softmax, its gradient and cross-entropy (loss and gradient) by the
/// packed row kernels over rows of `classes` of `T` starting `offset`
/// elements past a 16-byte boundary, against double.
template <typename T>
void packedRowsCheck(int64_t rows, int64_t classes, int64_t offset,
                     int threads) {
  std::vector<float> x = randomValues(rows * classes, -4, 4, int(classes)),
                     dy = randomValues(rows * classes, -1, 1, 5);
  Stored<T> xs(x, offset), dys(dy, offset), y(rows * classes, offset),
      grad(rows * classes, offset), dx(rows * classes, offset);
  std::vector<int64_t> target(rows);
  for (int64_t r = 0; r < rows; ++r)
    target[r] = (r * 7919 + classes - 1) % classes;
  std::vector<float> rowLoss(rows);
  DataCheckRecord rec{};
  emu::launch(unsigned(rows), threads, 0,
              [&] { softmaxRowVecKernel<T>(xs.p, y.p, rows, classes); });
  // The gradient of softmax, with `y` rounded to the storage as given.
  std::vector<float> yv(rows * classes);
  for (int64_t i = 0; i < rows * classes; ++i)
    yv[i] = y.at(i);
  emu::launch(unsigned(rows), threads, 0, [&] {
    softmaxGradRowVecKernel<T>(dys.p, y.p, dx.p, rows, classes);
  });
  emu::launch(unsigned(rows), threads, 0, [&] {
    crossEntropyRowsVecKernel<T>(xs.p, target.data(), rowLoss.data(), rows,
                                 classes, 1, &rec);
  });
  emu::launch(unsigned(rows), threads, 0, [&] {
    crossEntropyGradVecKernel<T>(xs.p, target.data(), grad.p, rows, classes,
                                 1.0f / rows, 1, &rec);
  });
  EXPECT_EQ(rec.check, 0);
  double rel = std::is_same_v<T, float> ? 1e-5 : 1e-2;
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x.data() + r * classes;
    double mx = -INFINITY, sum = 0, sdy = 0;
    for (int64_t c = 0; c < classes; ++c)
      mx = std::max<double>(mx, xr[c]);
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(xr[c] - mx);
    for (int64_t c = 0; c < classes; ++c)
      sdy += double(dy[r * classes + c]) * yv[r * classes + c];
    for (int64_t c = 0; c < classes; ++c) {
      int64_t i = r * classes + c;
      double p = std::exp(xr[c] - mx) / sum;
      EXPECT_NEAR(y.at(i), p, rel * p + 1e-7) << r << " " << c;
      double g = (p - (c == target[r])) / rows;
      EXPECT_NEAR(grad.at(i), g, rel * std::fabs(g) + 1e-7) << r << " " << c;
      double d = yv[i] * (dy[i] - sdy);
      EXPECT_NEAR(dx.at(i), d, rel * std::fabs(d) + 1e-6) << r << " " << c;
    }
    double loss = mx + std::log(sum) - xr[target[r]];
    EXPECT_NEAR(rowLoss[r], loss, 1e-5 * (1 + std::fabs(loss))) << r;
  }
}

TEST(CudaEmulation, PackedRowKernels) {
  packedRowsCheck<Bf16>(5, 1001, 0, 64);  // odd rows: heads and tails
  packedRowsCheck<Bf16>(3, 1001, 3, 32);  // the buffer off a boundary
  packedRowsCheck<Bf16>(2, 5, 1, 32);     // shorter than a pack
  packedRowsCheck<float>(4, 1030, 0, 64); // f32 packs of 4
  packedRowsCheck<float>(3, 7, 2, 32);
  packedRowsCheck<Bf16>(2, 50257, 0, 512); // the GPT-2 vocabulary
}

TEST(CudaEmulation, PackedCrossEntropyBadTarget) {
  std::vector<float> x = randomValues(3 * 20, -1, 1, 4);
  Stored<Bf16> xs(x);
  std::vector<int64_t> target{0, 25, 3};
  std::vector<float> rowLoss(3);
  DataCheckRecord rec{};
  emu::launch(3, 32, 0, [&] {
    crossEntropyRowsVecKernel<Bf16>(xs.p, target.data(), rowLoss.data(), 3, 20,
                                    9, &rec);
  });
  EXPECT_EQ(rec.check, 9);
  EXPECT_EQ(rec.position, 1);
  EXPECT_EQ(rec.value, 25);
  EXPECT_EQ(rec.limit, 20);
  EXPECT_EQ(rowLoss[1], 0.0f);
}

TEST(CudaEmulation, PackedRowKernelsPropagateNan) {
  // A NaN alone in a row's scalar head, one inside a pack, a row of
  // -inf and NaN only: the losses and probabilities of those rows are NaN.
  const int64_t rows = 4, classes = 37;
  std::vector<float> x = randomValues(rows * classes, -1, 1, 11);
  x[0 * classes + 0] = NAN;
  x[1 * classes + 20] = NAN;
  for (int64_t c = 0; c < classes; ++c)
    x[2 * classes + c] = c == 30 ? NAN : -INFINITY;
  Stored<Bf16> xs(x, 5), y(rows * classes, 5);
  std::vector<int64_t> target{1, 2, 3, 4};
  std::vector<float> rowLoss(rows);
  DataCheckRecord rec{};
  emu::launch(unsigned(rows), 32, 0, [&] {
    crossEntropyRowsVecKernel<Bf16>(xs.p, target.data(), rowLoss.data(), rows,
                                    classes, 1, &rec);
  });
  emu::launch(unsigned(rows), 32, 0,
              [&] { softmaxRowVecKernel<Bf16>(xs.p, y.p, rows, classes); });
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_TRUE(std::isnan(rowLoss[r])) << r;
    EXPECT_TRUE(std::isnan(y.at(r * classes + 5))) << r;
  }
  EXPECT_FALSE(std::isnan(rowLoss[3]));
  EXPECT_FALSE(std::isnan(y.at(3 * classes + 5)));
}

/// Row 0 holds a pack `{-inf x (V-1), NaN}` that thread 0 meets before any
/// finite value, then a finite pack (the second half of the row); row 1 is
/// finite. The NaN must survive the finite values that follow it.
template <typename T> void nanBesideNegInfCheck() {
  constexpr int V = kVec<T>;
  const int64_t rows = 2, classes = 64 * V; // thread 0: packs 0 and 32
  std::vector<float> x = randomValues(rows * classes, -1, 1, 13);
  for (int64_t c = 0; c < classes / 2; ++c)
    x[c] = c == V - 1 ? NAN : -INFINITY;
  Stored<T> xs(x), y(rows * classes), g(rows * classes);
  std::vector<int64_t> target{classes - 1, 3};
  std::vector<float> rowLoss(rows);
  DataCheckRecord rec{};
  emu::launch(unsigned(rows), 32, 0, [&] {
    crossEntropyRowsVecKernel<T>(xs.p, target.data(), rowLoss.data(), rows,
                                 classes, 1, &rec);
  });
  emu::launch(unsigned(rows), 32, 0, [&] {
    crossEntropyGradVecKernel<T>(xs.p, target.data(), g.p, rows, classes,
                                 1.0f / rows, 1, &rec);
  });
  emu::launch(unsigned(rows), 32, 0,
              [&] { softmaxRowVecKernel<T>(xs.p, y.p, rows, classes); });
  EXPECT_EQ(rec.check, 0);
  EXPECT_TRUE(std::isnan(rowLoss[0]));
  EXPECT_FALSE(std::isnan(rowLoss[1]));
  for (int64_t c : {int64_t(0), classes / 2, classes - 1}) {
    EXPECT_TRUE(std::isnan(y.at(c))) << c;
    EXPECT_TRUE(std::isnan(g.at(c))) << c;
    EXPECT_FALSE(std::isnan(y.at(classes + c))) << c;
    EXPECT_FALSE(std::isnan(g.at(classes + c))) << c;
  }
}

TEST(CudaEmulation, PackedRowKernelsKeepNanBesideNegativeInfinity) {
  nanBesideNegInfCheck<Bf16>();
  nanBesideNegInfCheck<float>();
}

} // namespace
} // namespace loom::runtime::cuda
