//===- CudaEmulationTest.cpp - CUDA kernels run on host threads --*- C++
//-*-===//
//
// The attention (flash, GEMM path and tensor-core kernels, the last with
// mma.sync, ldmatrix and cp.async emulated per their PTX fragment layouts),
// layout, gather, reduction, norm, loss, element-wise and padded-GEMM copy
// kernels of runtime/cuda/ (the element-wise ones with bf16 operands next
// to f32 ones),
// built by the host compiler against test/unit/cuda/CudaHostEmulation.h and
// compared with double-precision references. These run everywhere (no
// device needed): they check the kernels' indexing, tiling, causal masking,
// online softmax and backward recomputation; the tests of LoomCudaTests
// check the same kernels on a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaHostEmulation.h"

#include "runtime/cuda/Attention.cu"
#include "runtime/cuda/AttentionGemm.cu"
#include "runtime/cuda/AttentionTc.cu"
#include "runtime/cuda/Elementwise.cu"
#include "runtime/cuda/Gather.cu"
#include "runtime/cuda/Layout.cu"
#include "runtime/cuda/LayoutPlan.h"
#include "runtime/cuda/Loss.cu"
#include "runtime/cuda/Norm.cu"
#include "runtime/cuda/PaddedCopy.cu"
#include "runtime/cuda/Reduce.cu"
#include "runtime/cuda/Softmax.cu"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace loom::runtime::cuda {
namespace {

namespace emu = ::loom::runtime::test::emu;

// --- attention ---------------------------------------------------------------

struct Cfg {
  int64_t b, sq, sk, d, dv;
  bool causal;
};

/// Naive attention and its gradient in double.
void reference(const Cfg &c, float scale, const std::vector<float> &q,
               const std::vector<float> &k, const std::vector<float> &v,
               const std::vector<float> &dO, std::vector<double> &o,
               std::vector<double> &dq, std::vector<double> &dk,
               std::vector<double> &dv) {
  o.assign(c.b * c.sq * c.dv, 0);
  dq.assign(c.b * c.sq * c.d, 0);
  dk.assign(c.b * c.sk * c.d, 0);
  dv.assign(c.b * c.sk * c.dv, 0);
  for (int64_t b = 0; b < c.b; ++b) {
    std::vector<double> P(c.sq * c.sk), dP(c.sq * c.sk);
    for (int64_t i = 0; i < c.sq; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < c.sk; ++j) {
        double s = 0;
        for (int64_t x = 0; x < c.d; ++x)
          s +=
              (double)q[(b * c.sq + i) * c.d + x] * k[(b * c.sk + j) * c.d + x];
        s *= scale;
        if (c.causal && j > i)
          s = -INFINITY;
        P[i * c.sk + j] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (int64_t j = 0; j < c.sk; ++j) {
        P[i * c.sk + j] = std::exp(P[i * c.sk + j] - mx);
        sum += P[i * c.sk + j];
      }
      for (int64_t j = 0; j < c.sk; ++j)
        P[i * c.sk + j] /= sum;
      for (int64_t x = 0; x < c.dv; ++x) {
        double a = 0;
        for (int64_t j = 0; j < c.sk; ++j)
          a += P[i * c.sk + j] * v[(b * c.sk + j) * c.dv + x];
        o[(b * c.sq + i) * c.dv + x] = a;
      }
    }
    for (int64_t i = 0; i < c.sq; ++i) {
      double rs = 0;
      for (int64_t j = 0; j < c.sk; ++j) {
        double a = 0;
        for (int64_t x = 0; x < c.dv; ++x)
          a += (double)dO[(b * c.sq + i) * c.dv + x] *
               v[(b * c.sk + j) * c.dv + x];
        dP[i * c.sk + j] = a;
        rs += a * P[i * c.sk + j];
      }
      for (int64_t j = 0; j < c.sk; ++j)
        dP[i * c.sk + j] = P[i * c.sk + j] * (dP[i * c.sk + j] - rs);
    }
    for (int64_t i = 0; i < c.sq; ++i)
      for (int64_t j = 0; j < c.sk; ++j) {
        double p = P[i * c.sk + j], ds = dP[i * c.sk + j];
        for (int64_t x = 0; x < c.dv; ++x)
          dv[(b * c.sk + j) * c.dv + x] += p * dO[(b * c.sq + i) * c.dv + x];
        for (int64_t x = 0; x < c.d; ++x) {
          dq[(b * c.sq + i) * c.d + x] +=
              scale * ds * k[(b * c.sk + j) * c.d + x];
          dk[(b * c.sk + j) * c.d + x] +=
              scale * ds * q[(b * c.sq + i) * c.d + x];
        }
      }
  }
}

template <typename T>
double maxError(const std::vector<T> &got, const std::vector<double> &want) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i)
    e = std::max(e, std::fabs(double(toFloat(got[i])) - want[i]));
  return e;
}

/// Runs the forward kernel, the statistics pass and both gradient kernels
/// as `launchAttention` / `launchAttentionGrad` do, with tolerance `tol` on
/// the output and `5 tol` on the gradients.
template <typename T, int kMaxD> void checkAttention(const Cfg &c, double tol) {
  SCOPED_TRACE(::testing::Message()
               << "b=" << c.b << " sq=" << c.sq << " sk=" << c.sk
               << " d=" << c.d << " dv=" << c.dv << " causal=" << c.causal
               << " maxD=" << kMaxD << " bf16=" << (sizeof(T) == 2));
  std::mt19937 rng(c.sq * 131 + c.d);
  std::uniform_real_distribution<float> u(-2, 2);
  auto rnd = [&](int64_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = u(rng);
    return v;
  };
  std::vector<float> q = rnd(c.b * c.sq * c.d), k = rnd(c.b * c.sk * c.d),
                     v = rnd(c.b * c.sk * c.dv), dO = rnd(c.b * c.sq * c.dv);
  // Stored as T; the reference sees the stored values.
  auto stored = [](std::vector<float> &x) {
    std::vector<T> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      y[i] = fromFloat<T>(x[i]);
      x[i] = toFloat(y[i]);
    }
    return y;
  };
  std::vector<T> tq = stored(q), tk = stored(k), tv = stored(v),
                 tO = stored(dO);
  float scale = 1.0f / std::sqrt(float(c.d));
  std::vector<double> o, dq, dk, dv;
  reference(c, scale, q, k, v, dO, o, dq, dk, dv);
  AttnArgs a{c.sq, c.sk, int(c.d), int(c.dv), scale, c.causal};
  std::vector<T> go(o.size()), gdq(dq.size()), gdk(dk.size()), gdv(dv.size());
  std::vector<float> lse(c.b * c.sq), delta(c.b * c.sq);
  unsigned qBlocks = c.b * ((c.sq + kRows - 1) / kRows);
  unsigned kBlocks = c.b * ((c.sk + kCols - 1) / kCols);
  size_t smem = std::max({forwardSmem(a), gradKVSmem(a), gradQSmem(a)});
  emu::launch(qBlocks, kAttnThreads, smem, [&] {
    attentionForwardKernel<T, kMaxD>(tq.data(), tk.data(), tv.data(), go.data(),
                                     nullptr, nullptr, nullptr, a);
  });
  emu::launch(qBlocks, kAttnThreads, smem, [&] {
    attentionForwardKernel<T, kMaxD>(tq.data(), tk.data(), tv.data(), nullptr,
                                     tO.data(), lse.data(), delta.data(), a);
  });
  emu::launch(kBlocks, kAttnThreads, smem, [&] {
    attentionGradKVKernel<T, kMaxD>(tO.data(), tq.data(), tk.data(), tv.data(),
                                    lse.data(), delta.data(), gdk.data(),
                                    gdv.data(), a);
  });
  emu::launch(qBlocks, kAttnThreads, smem, [&] {
    attentionGradQKernel<T, kMaxD>(tO.data(), tq.data(), tk.data(), tv.data(),
                                   lse.data(), delta.data(), gdq.data(), a);
  });
  EXPECT_LT(maxError(go, o), tol);
  EXPECT_LT(maxError(gdq, dq), 5 * tol);
  EXPECT_LT(maxError(gdk, dk), 5 * tol);
  EXPECT_LT(maxError(gdv, dv), 5 * tol);
}

TEST(CudaEmulation, AttentionCausal) {
  checkAttention<float, 64>({3, 37, 37, 64, 64, true}, 1e-5);
  checkAttention<float, 64>({1, 1, 1, 64, 64, true}, 1e-5);
  checkAttention<float, 64>({1, 33, 33, 32, 32, true}, 1e-5);
  checkAttention<float, 64>({1, 64, 64, 16, 16, true}, 1e-5);
  checkAttention<float, 128>({1, 70, 70, 128, 128, true}, 1e-5);
}

TEST(CudaEmulation, AttentionNonCausal) {
  checkAttention<float, 64>({2, 37, 37, 64, 64, false}, 1e-5);
  checkAttention<float, 64>({1, 20, 45, 32, 32, false}, 1e-5);
  checkAttention<float, 64>({1, 70, 5, 32, 48, false}, 1e-5);
  checkAttention<float, 128>({1, 40, 33, 96, 128, false}, 1e-5);
}

TEST(CudaEmulation, AttentionBf16) {
  checkAttention<__nv_bfloat16, 64>({2, 37, 37, 64, 64, true}, 2e-2);
  checkAttention<__nv_bfloat16, 128>({1, 40, 33, 96, 128, false}, 2e-2);
}

// --- attention, tensor-core kernels -----------------------------------------

/// Runs the tensor-core kernels as `launchTcAttention` /
/// `launchTcAttentionGrad` do (bf16 operands, D = Dv), with tolerance `tol`
/// on the output and `2 tol` on the gradients.
template <int D> void checkTcAttention(const Cfg &c, double tol) {
  SCOPED_TRACE(::testing::Message()
               << "tc b=" << c.b << " sq=" << c.sq << " sk=" << c.sk
               << " d=" << D << " causal=" << c.causal);
  ASSERT_EQ(c.d, D);
  ASSERT_EQ(c.dv, D);
  std::mt19937 rng(c.sq * 977 + c.sk);
  std::uniform_real_distribution<float> u(-2, 2);
  auto stored = [&](int64_t n) { // bf16 values, and what the reference sees
    std::vector<float> x(n);
    std::vector<__nv_bfloat16> y(n);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = fromFloat<__nv_bfloat16>(u(rng));
      x[i] = toFloat(y[i]);
    }
    return std::make_pair(x, y);
  };
  auto [q, tq] = stored(c.b * c.sq * D);
  auto [k, tk] = stored(c.b * c.sk * D);
  auto [v, tv] = stored(c.b * c.sk * D);
  auto [dO, tO] = stored(c.b * c.sq * D);
  float scale = 1.0f / std::sqrt(float(D));
  std::vector<double> o, dq, dk, dv;
  reference(c, scale, q, k, v, dO, o, dq, dk, dv);
  TcArgs a{c.b, c.sq, c.sk, scale, scale * kLog2e, c.causal};
  std::vector<__nv_bfloat16> go(o.size()), gdq(dq.size()), gdk(dk.size()),
      gdv(dv.size());
  std::vector<float> lse(c.b * c.sq), delta(c.b * c.sq);
  unsigned qBlocks = c.b * tilesOf(c.sq), kBlocks = c.b * tilesOf(c.sk);
  size_t smem =
      std::max({tcForwardSmem<D>(), tcGradQSmem<D>(), tcGradKVSmem<D>()});
  emu::launch(qBlocks, kTcThreads, smem, [&] {
    tcForwardKernel<D, false>(tq.data(), tk.data(), tv.data(), go.data(),
                              nullptr, nullptr, nullptr, a);
  });
  emu::launch(qBlocks, kTcThreads, smem, [&] {
    tcForwardKernel<D, true>(tq.data(), tk.data(), tv.data(), nullptr,
                             tO.data(), lse.data(), delta.data(), a);
  });
  emu::launch(kBlocks, kTcThreads, smem, [&] {
    tcGradKVKernel<D, tcGradKVRows<D>()>(tO.data(), tq.data(), tk.data(),
                                         tv.data(), lse.data(), delta.data(),
                                         gdk.data(), gdv.data(), a);
  });
  emu::launch(qBlocks, kTcThreads, smem, [&] {
    tcGradQKernel<D>(tO.data(), tq.data(), tk.data(), tv.data(), lse.data(),
                     delta.data(), gdq.data(), a);
  });
  EXPECT_LT(maxError(go, o), tol);
  EXPECT_LT(maxError(gdq, dq), 2 * tol);
  EXPECT_LT(maxError(gdk, dk), 2 * tol);
  EXPECT_LT(maxError(gdv, dv), 2 * tol);
  std::printf("tc emulation b=%lld sq=%lld sk=%lld d=%d causal=%d: max error "
              "O %.4f dQ %.4f dK %.4f dV %.4f\n",
              (long long)c.b, (long long)c.sq, (long long)c.sk, D, c.causal,
              maxError(go, o), maxError(gdq, dq), maxError(gdk, dk),
              maxError(gdv, dv));
}

TEST(CudaEmulation, TcAttentionCausal) {
  checkTcAttention<64>({1, 37, 37, 64, 64, true}, 2e-2);
  checkTcAttention<64>({1, 1, 1, 64, 64, true}, 2e-2);
  checkTcAttention<64>({1, 130, 130, 64, 64, true}, 2e-2);
  checkTcAttention<128>({1, 70, 70, 128, 128, true}, 2e-2);
}

TEST(CudaEmulation, TcAttentionNonCausal) {
  checkTcAttention<64>({1, 33, 130, 64, 64, false}, 2e-2);
  checkTcAttention<64>({2, 17, 5, 64, 64, false}, 2e-2);
  checkTcAttention<128>({1, 45, 17, 128, 128, false}, 2e-2);
}

// --- attention, GEMM path ----------------------------------------------------

/// `c[i] = alpha op(a[i]) op(b[i])` for each of `batch` row-major `m x n`
/// products over `k`, rounded to `Out` on store: what the strided-batched
/// cuBLASLt GEMMs of the GEMM path compute (fp32 accumulation).
template <typename In, typename Out>
void hostGemm(int64_t batch, int64_t m, int64_t n, int64_t k, const In *a,
              bool ta, const In *b, bool tb, Out *c, float alpha) {
  for (int64_t bi = 0; bi < batch; ++bi) {
    const In *ab = a + bi * m * k, *bb = b + bi * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t x = 0; x < k; ++x)
          acc += toFloat(ta ? ab[x * m + i] : ab[i * k + x]) *
                 toFloat(tb ? bb[j * k + x] : bb[x * n + j]);
        c[(bi * m + i) * n + j] = fromFloat<Out>(alpha * acc);
      }
  }
}

/// The GEMM path as AttentionKernels.cpp runs it (host GEMMs in place of
/// cuBLASLt, the row kernels emulated, dS written over P in the same
/// workspace), forward and gradient, against the double reference.
template <typename T> void checkGemmAttention(const Cfg &c, double tol) {
  SCOPED_TRACE(::testing::Message()
               << "b=" << c.b << " sq=" << c.sq << " sk=" << c.sk
               << " d=" << c.d << " dv=" << c.dv << " causal=" << c.causal
               << " bf16=" << (sizeof(T) == 2));
  std::mt19937 rng(c.sq * 977 + c.sk + c.d);
  std::uniform_real_distribution<float> u(-2, 2);
  auto rnd = [&](int64_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = u(rng);
    return v;
  };
  std::vector<float> q = rnd(c.b * c.sq * c.d), k = rnd(c.b * c.sk * c.d),
                     v = rnd(c.b * c.sk * c.dv), dO = rnd(c.b * c.sq * c.dv);
  auto stored = [](std::vector<float> &x) {
    std::vector<T> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      y[i] = fromFloat<T>(x[i]);
      x[i] = toFloat(y[i]);
    }
    return y;
  };
  std::vector<T> tq = stored(q), tk = stored(k), tv = stored(v),
                 tO = stored(dO);
  float scale = 1.0f / std::sqrt(float(c.d));
  std::vector<double> o, dq, dk, dv;
  reference(c, scale, q, k, v, dO, o, dq, dk, dv);

  int64_t rows = c.b * c.sq;
  RowArgs ra{rows, c.sq, c.sk, c.causal};
  unsigned blocks = (rows + kRowWarps - 1) / kRowWarps;
  std::vector<float> scores(rows * c.sk); // S, then dP
  std::vector<T> probs(rows * c.sk);      // P, then dS
  std::vector<T> go(o.size()), gdq(dq.size()), gdk(dk.size()), gdv(dv.size());
  hostGemm(c.b, c.sq, c.sk, c.d, tq.data(), false, tk.data(), true,
           scores.data(), scale);
  emu::launch(blocks, kRowThreads, 0, [&] {
    attentionSoftmaxKernel<T>(scores.data(), probs.data(), ra);
  });
  // Masked probabilities are exactly 0; each row sums to 1.
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < c.sk; ++j) {
      float pj = toFloat(probs[r * c.sk + j]);
      if (c.causal && j > r % c.sq)
        ASSERT_EQ(pj, 0.0f) << "row " << r << " key " << j;
      sum += pj;
    }
    ASSERT_NEAR(sum, 1.0, sizeof(T) == 2 ? 2e-2 : 1e-5) << "row " << r;
  }
  hostGemm(c.b, c.sq, c.dv, c.sk, probs.data(), false, tv.data(), false,
           go.data(), 1.0f);
  hostGemm(c.b, c.sk, c.dv, c.sq, probs.data(), true, tO.data(), false,
           gdv.data(), 1.0f);
  hostGemm(c.b, c.sq, c.sk, c.dv, tO.data(), false, tv.data(), true,
           scores.data(), 1.0f);
  emu::launch(blocks, kRowThreads, 0, [&] {
    attentionSoftmaxGradKernel<T>(probs.data(), scores.data(), probs.data(),
                                  ra);
  });
  if (c.causal)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = r % c.sq + 1; j < c.sk; ++j)
        ASSERT_EQ(toFloat(probs[r * c.sk + j]), 0.0f) << "dS row " << r;
  hostGemm(c.b, c.sq, c.d, c.sk, probs.data(), false, tk.data(), false,
           gdq.data(), scale);
  hostGemm(c.b, c.sk, c.d, c.sq, probs.data(), true, tq.data(), false,
           gdk.data(), scale);
  EXPECT_LT(maxError(go, o), tol);
  EXPECT_LT(maxError(gdq, dq), 5 * tol);
  EXPECT_LT(maxError(gdk, dk), 5 * tol);
  EXPECT_LT(maxError(gdv, dv), 5 * tol);
}

TEST(CudaEmulation, GemmAttentionCausal) {
  checkGemmAttention<float>({3, 37, 37, 64, 64, true}, 1e-5);
  checkGemmAttention<float>({1, 1, 1, 64, 64, true}, 1e-5);
  checkGemmAttention<float>({2, 64, 64, 32, 32, true}, 1e-5);   // vectorised
  checkGemmAttention<float>({1, 130, 130, 16, 16, true}, 1e-5); // 2 steps
  checkGemmAttention<float>({1, 132, 132, 16, 16, true}, 1e-5);
}

TEST(CudaEmulation, GemmAttentionNonCausal) {
  checkGemmAttention<float>({2, 37, 37, 64, 64, false}, 1e-5);
  checkGemmAttention<float>({1, 20, 45, 32, 32, false}, 1e-5);
  checkGemmAttention<float>({1, 70, 5, 32, 48, false}, 1e-5); // Dv != D
  checkGemmAttention<float>({1, 3, 260, 8, 8, false}, 1e-5);
  checkGemmAttention<float>({1, 9, 33, 160, 192, false}, 1e-5); // D > 128
}

TEST(CudaEmulation, GemmAttentionBf16) {
  checkGemmAttention<__nv_bfloat16>({2, 37, 37, 64, 64, true}, 2e-2);
  checkGemmAttention<__nv_bfloat16>({1, 64, 64, 64, 64, true}, 2e-2);
  checkGemmAttention<__nv_bfloat16>({1, 40, 33, 96, 128, false}, 2e-2);
}

// --- layout, gather, reduce --------------------------------------------------

int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (auto d : s)
    n *= d;
  return n;
}

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

TEST(CudaEmulation, Reductions) {
  for (ReduceKind k : {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max})
    for (bool block : {false, true}) {
      EXPECT_TRUE(reduceTest(k, block, false));
      if (k == ReduceKind::Max)
        EXPECT_TRUE(reduceTest(k, block, true));
    }
}

// --- bf16 operands in the element-wise, norm and loss kernels ---------------

using Bf16 = __nv_bfloat16;

/// The `Elem` tag of a storage type.
template <typename T> constexpr Elem elemOf() {
  return sizeof(T) == 2 ? Elem::BF16 : Elem::F32;
}

float roundBf16(float v) { return toFloat(fromFloat<Bf16>(v)); }

std::vector<Bf16> bf16Of(std::vector<float> &v) {
  std::vector<Bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = fromFloat<Bf16>(v[i]);
    v[i] = toFloat(out[i]);
  }
  return out;
}

std::vector<float> randomValues(int64_t n, float lo, float hi, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(rng);
  return v;
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
                           {grad.data(), Elem::BF16}, rows, classes, 1, &rec);
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
    crossEntropyGradVecKernel<T>(xs.p, target.data(), grad.p, rows, classes, 1,
                                 &rec);
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
    crossEntropyGradVecKernel<T>(xs.p, target.data(), g.p, rows, classes, 1,
                                 &rec);
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
