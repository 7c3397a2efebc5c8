//===- CudaEmulationAttentionTest.cpp - Attention, emulated --*- C++ -*-===//
//-*-===//
//
// The three attention algorithms of runtime/cuda/: flash (Attention.cu),
// the GEMM path's row kernels (AttentionGemm.cu, host GEMMs between them)
// and the tensor-core kernels (AttentionTc.cu, with mma.sync, ldmatrix and
// cp.async emulated per their PTX fragment layouts in MmaBf16.cuh): causal
// masking, tiling, the online softmax and the backward recomputation.
//
// Built by the host compiler against test/unit/cuda/CudaHostEmulation.h
// (one host thread per CUDA thread) and compared with double-precision
// references or with the generic kernels; no device needed. LoomCudaTests
// checks the same kernels on a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaHostEmulation.h"

#include "runtime/cuda/Attention.cu"
#include "runtime/cuda/AttentionGemm.cu"
#include "runtime/cuda/AttentionTc.cu"

#include "CudaEmulationUtil.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace loom::runtime::cuda {
namespace {

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

} // namespace
} // namespace loom::runtime::cuda
