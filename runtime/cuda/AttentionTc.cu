//===- AttentionTc.cu - Tensor-core flash attention and its gradient -*- CUDA
//-*-===//
//
// The "tc" algorithm of attention (AttentionKernels.cpp), FlashAttention-2
// style on mma.sync tensor-core instructions: bf16 storage, bf16 operands,
// f32 accumulation, head dims D = Dv = 64 or 128. Semantics as
// Attention.cu (the CPU op's): S = scale Q K^T, causal mask above the
// diagonal (Sq = Sk), P = softmax(S), O = P V.
//
// Forward: a block of 4 warps owns 64 query rows, 16 per warp. Key/value
// tiles of 64 rows stream through shared memory with cp.async, double
// buffered. Each warp computes its 16 x 64 scores with
// mma.m16n8k16 into registers and runs the online softmax on the
// accumulator fragments directly (base-2 exponentials on scores prescaled
// by scale * log2(e)); the probabilities are rounded to bf16 in registers
// and reused as the A operand of P V (the m16n8 accumulator layout of two
// adjacent n-tiles is the m16k16 A layout). Causal blocks stop at their
// diagonal tile and only the diagonal and the ragged last tile are masked.
//
// Backward, deterministic (no atomics), in three kernels:
//  1. the forward kernel in statistics mode writes each query row's
//     base-2 logsumexp L2 = max + log2(sum) and delta = rowsum(dO * O) (O
//     in f32, never rounded) to a workspace of 2 * batch * Sq floats;
//  2. one block per 64 keys (16 per warp) loops over query tiles, recomputes
//     P^T = exp2(S^T - L2) and dS^T = P^T (dP^T - delta) in registers and
//     accumulates dV = P^T dO and dK = scale dS^T Q;
//  3. one block per 64 queries loops over key tiles for dQ = scale dS K.
//
// Operands reach the tensor cores through ldmatrix from shared-memory
// tiles whose rows are padded by 8 elements (16 bytes), so the eight 16-byte
// rows of each 8x8 matrix fall into distinct bank groups. The instructions
// and the fragment layouts of the PTX ISA (m16n8k16, bf16) are in
// MmaBf16.cuh, next to the helpers that depend on them. Causal grids start
// with their longest tiles, so the short ones fill the tail. P and dS are
// rounded to bf16 as mma operands (as the gemm path's P and dS); every sum
// is f32.
//
// Per warp and tile at D = 64: forward 64 mma and 36 ldmatrix.x4, dK/dV 128
// and 72, dQ 96 and 56. With every warp reading whole K/V (or Q/dO) tiles,
// shared-memory bandwidth (512 bytes an ldmatrix.x4) rather than the tensor
// cores is the expected limit.
//
// Under LOOM_CUDA_HOST_EMULATION (test/unit/cuda/CudaEmulation*Test.cpp)
// mma.sync, ldmatrix and cp.async are host functions with the same fragment
// semantics (MmaBf16.cuh), so the emulation checks the fragment indexing,
// tiling, masking and softmax; the launchers are left out.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaElem.cuh"
#include "runtime/cuda/MmaBf16.cuh"

#include <cuda_bf16.h>

namespace loom::runtime::cuda {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kTcWarps = 4;
constexpr int kTcThreads = 32 * kTcWarps;
constexpr int kTcTile = 64; // query rows of a forward / dQ block, keys of a
                            // key tile and of a dK/dV block
constexpr int kTcPad = 8;   // elements of padding per shared-memory row
constexpr float kLog2e = 1.4426950408889634f;

struct TcArgs {
  int64_t batch, sq, sk;
  float scale;     // the attribute, for dQ and dK
  float scaleLog2; // scale * log2(e), for the base-2 softmax
  bool causal;
};

// --- Tiles through cp.async -----------------------------------------------

/// Starts copying rows `[row0, row0 + kRows)` of a `[rows, D]` bf16 matrix
/// into `dst` (pitch D + kTcPad) in 16-byte pieces; rows past the end
/// become zeros (a zero-byte source).
template <int D, int kRows>
__device__ __forceinline__ void loadTileAsync(bf16 *dst,
                                              const bf16 *__restrict__ src,
                                              int64_t row0, int64_t rows) {
  constexpr int p = D + kTcPad, vecs = D / 8;
#pragma unroll
  for (int e = threadIdx.x; e < kRows * vecs; e += kTcThreads) {
    int r = e / vecs, c = (e % vecs) * 8;
    bool in = row0 + r < rows;
    copyAsync16(dst + r * p + c, in ? src + (row0 + r) * D + c : src, in);
  }
}
__device__ __forceinline__ int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
/// Tiles of `kTcTile` rows over `rows`, on the host.
inline int64_t tilesOf(int64_t rows) { return (rows + kTcTile - 1) / kTcTile; }

// --- Forward --------------------------------------------------------------

/// Forward. With `kStats` it writes `lse[row]` (base 2) and
/// `delta[row] = dot(dO, O)` instead of O (the backward's first pass).
template <int D, bool kStats>
__global__ void __launch_bounds__(kTcThreads)
    tcForwardKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                    const bf16 *__restrict__ v, bf16 *__restrict__ o,
                    const bf16 *__restrict__ dO, float *__restrict__ lse,
                    float *__restrict__ delta, TcArgs a) {
  constexpr int p = D + kTcPad, tile = kTcTile * p;
  LOOM_DYNAMIC_SHARED(bf16, smem);
  bf16 *sQ = smem, *sK = sQ + tile, *sV = sK + 2 * tile; // K, V: 2 buffers
  const int64_t qTiles = ceilDiv(a.sq, kTcTile);
  const int64_t bh = blockIdx.x % a.batch;
  const int64_t q0 = (qTiles - 1 - blockIdx.x / a.batch) * kTcTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2,
            t = lane & 3;
  const bf16 *qb = q + bh * a.sq * D, *kb = k + bh * a.sk * D,
             *vb = v + bh * a.sk * D;
  const int64_t kEnd = a.causal ? min(a.sk, q0 + kTcTile) : a.sk;
  const int64_t nTiles = ceilDiv(kEnd, kTcTile);
  const int64_t row0 = q0 + warp * 16 + g; // and row0 + 8
  const bf16 *wQ = sQ + warp * 16 * p;

  loadTileAsync<D, kTcTile>(sQ, qb, q0, a.sq);
  loadTileAsync<D, kTcTile>(sK, kb, 0, a.sk);
  loadTileAsync<D, kTcTile>(sV, vb, 0, a.sk);
  commitAsync();

  float acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      acc[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int64_t j = 0; j < nTiles; ++j) {
    const int buf = j & 1;
    if (j + 1 < nTiles) {
      loadTileAsync<D, kTcTile>(sK + (buf ^ 1) * tile, kb, (j + 1) * kTcTile,
                                a.sk);
      loadTileAsync<D, kTcTile>(sV + (buf ^ 1) * tile, vb, (j + 1) * kTcTile,
                                a.sk);
    }
    commitAsync();  // possibly empty: one group per iteration
    waitAsync<1>(); // all but the prefetch: Q and tile j are here
    __syncthreads();
    const bf16 *tK = sK + buf * tile, *tV = sV + buf * tile;
    const int64_t k0 = j * kTcTile;

    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4];
      loadA(qa, wQ + kk * 16, p);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t b[4];
        loadBn(b, tK + np * 16 * p + kk * 16, p);
        mma(s[2 * np], qa, b[0], b[1]);
        mma(s[2 * np + 1], qa, b[2], b[3]);
      }
    }

    // Ragged last tile or causal diagonal: mask element by element.
    const bool edge =
        k0 + kTcTile > a.sk || (a.causal && k0 + kTcTile - 1 > q0);
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e] * a.scaleLog2;
        if (edge) {
          int64_t key = k0 + n * 8 + 2 * t + (e & 1);
          int64_t row = row0 + (e >> 1) * 8;
          if (key >= a.sk || (a.causal && key > row))
            x = -INFINITY;
        }
        s[n][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    float ref[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float mNew = fmaxf(m[i], quadMax(mx[i]));
      // A row that has seen no visible key yet keeps everything at zero.
      ref[i] = mNew == -INFINITY ? 0.0f : mNew;
      float alpha = fastExp2(m[i] - ref[i]);
      m[i] = mNew;
      l[i] *= alpha;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        acc[n][2 * i] *= alpha;
        acc[n][2 * i + 1] *= alpha;
      }
    }
    // Per-thread partial row sums; the quad's are added at the end.
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float pr = fastExp2(s[n][e] - ref[e >> 1]);
        s[n][e] = pr;
        l[e >> 1] += pr;
      }

#pragma unroll
    for (int kk = 0; kk < 4; ++kk) { // 16 keys a step
      uint32_t pa[4];
      accToA(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        loadBk(b, tV + kk * 16 * p + dp * 16, p);
        mma(acc[2 * dp], pa, b[0], b[1]);
        mma(acc[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads(); // before the next prefetch overwrites buffer buf ^ 1
  }

  float inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] = quadSum(l[i]);
    // No key at all cannot happen (Sk > 0 is launched only); keep 0 safe.
    inv[i] = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
  }
  if constexpr (!kStats) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int64_t row = row0 + 8 * i;
      if (row >= a.sq)
        continue;
      bf16 *out = o + (bh * a.sq + row) * D + 2 * t;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<uint32_t *>(out + n * 8) =
            bf16Pair(acc[n][2 * i] * inv[i], acc[n][2 * i + 1] * inv[i]);
    }
  } else {
    float dd[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int64_t row = row0 + 8 * i;
      if (row >= a.sq)
        continue;
      const bf16 *go = dO + (bh * a.sq + row) * D + 2 * t;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        __nv_bfloat162 x =
            *reinterpret_cast<const __nv_bfloat162 *>(go + n * 8);
        dd[i] += __bfloat162float(x.x) * (acc[n][2 * i] * inv[i]) +
                 __bfloat162float(x.y) * (acc[n][2 * i + 1] * inv[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      dd[i] = quadSum(dd[i]); // the whole quad takes part
      int64_t row = row0 + 8 * i;
      if (t == 0 && row < a.sq) {
        lse[bh * a.sq + row] = m[i] + log2f(l[i]);
        delta[bh * a.sq + row] = dd[i];
      }
    }
  }
}

// --- dQ -------------------------------------------------------------------

/// dQ of one tile of 64 queries over all (visible) key tiles.
template <int D>
__global__ void __launch_bounds__(kTcThreads)
    tcGradQKernel(const bf16 *__restrict__ dO, const bf16 *__restrict__ q,
                  const bf16 *__restrict__ k, const bf16 *__restrict__ v,
                  const float *__restrict__ lse,
                  const float *__restrict__ delta, bf16 *__restrict__ dq,
                  TcArgs a) {
  constexpr int p = D + kTcPad, tile = kTcTile * p;
  LOOM_DYNAMIC_SHARED(bf16, smem);
  bf16 *sQ = smem, *sO = sQ + tile, *sK = sO + tile, *sV = sK + 2 * tile;
  const int64_t qTiles = ceilDiv(a.sq, kTcTile);
  const int64_t bh = blockIdx.x % a.batch;
  const int64_t q0 = (qTiles - 1 - blockIdx.x / a.batch) * kTcTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2,
            t = lane & 3;
  const bf16 *kb = k + bh * a.sk * D, *vb = v + bh * a.sk * D;
  const int64_t kEnd = a.causal ? min(a.sk, q0 + kTcTile) : a.sk;
  const int64_t nTiles = ceilDiv(kEnd, kTcTile);
  const int64_t row0 = q0 + warp * 16 + g;
  const bf16 *wQ = sQ + warp * 16 * p, *wO = sO + warp * 16 * p;

  loadTileAsync<D, kTcTile>(sQ, q + bh * a.sq * D, q0, a.sq);
  loadTileAsync<D, kTcTile>(sO, dO + bh * a.sq * D, q0, a.sq);
  loadTileAsync<D, kTcTile>(sK, kb, 0, a.sk);
  loadTileAsync<D, kTcTile>(sV, vb, 0, a.sk);
  commitAsync();
  float rowL[2], rowD[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int64_t row = row0 + 8 * i;
    rowL[i] = row < a.sq ? lse[bh * a.sq + row] : 0.0f;
    rowD[i] = row < a.sq ? delta[bh * a.sq + row] : 0.0f;
  }
  float acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      acc[n][e] = 0.0f;

  for (int64_t j = 0; j < nTiles; ++j) {
    const int buf = j & 1;
    if (j + 1 < nTiles) {
      loadTileAsync<D, kTcTile>(sK + (buf ^ 1) * tile, kb, (j + 1) * kTcTile,
                                a.sk);
      loadTileAsync<D, kTcTile>(sV + (buf ^ 1) * tile, vb, (j + 1) * kTcTile,
                                a.sk);
    }
    commitAsync();
    waitAsync<1>();
    __syncthreads();
    const bf16 *tK = sK + buf * tile, *tV = sV + buf * tile;
    const int64_t k0 = j * kTcTile;

    float s[8][4], dp[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4], oa[4];
      loadA(qa, wQ + kk * 16, p);
      loadA(oa, wO + kk * 16, p);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t b[4];
        loadBn(b, tK + np * 16 * p + kk * 16, p); // S = Q K^T
        mma(s[2 * np], qa, b[0], b[1]);
        mma(s[2 * np + 1], qa, b[2], b[3]);
        loadBn(b, tV + np * 16 * p + kk * 16, p); // dP = dO V^T
        mma(dp[2 * np], oa, b[0], b[1]);
        mma(dp[2 * np + 1], oa, b[2], b[3]);
      }
    }
    const bool edge = k0 + kTcTile > a.sk || q0 + kTcTile > a.sq ||
                      (a.causal && k0 + kTcTile - 1 > q0);
    // dS = P (dP - delta), kept in s.
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int i = e >> 1;
        float pr = fastExp2(s[n][e] * a.scaleLog2 - rowL[i]);
        if (edge) {
          int64_t key = k0 + n * 8 + 2 * t + (e & 1), row = row0 + 8 * i;
          if (key >= a.sk || row >= a.sq || (a.causal && key > row))
            pr = 0.0f;
        }
        s[n][e] = pr * (dp[n][e] - rowD[i]);
      }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) { // dQ += dS K, 16 keys a step
      uint32_t da[4];
      accToA(da, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t b[4];
        loadBk(b, tK + kk * 16 * p + dn * 16, p);
        mma(acc[2 * dn], da, b[0], b[1]);
        mma(acc[2 * dn + 1], da, b[2], b[3]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int64_t row = row0 + 8 * i;
    if (row >= a.sq)
      continue;
    bf16 *out = dq + (bh * a.sq + row) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<uint32_t *>(out + n * 8) =
          bf16Pair(acc[n][2 * i] * a.scale, acc[n][2 * i + 1] * a.scale);
  }
}

// --- dK, dV ---------------------------------------------------------------

/// dK and dV of one tile of 64 keys (16 per warp) over all (visible) query
/// tiles of `kBq` rows. Works on transposed scores: S^T = K Q^T, whose
/// accumulator rows are this warp's keys.
template <int D, int kBq>
__global__ void __launch_bounds__(kTcThreads)
    tcGradKVKernel(const bf16 *__restrict__ dO, const bf16 *__restrict__ q,
                   const bf16 *__restrict__ k, const bf16 *__restrict__ v,
                   const float *__restrict__ lse,
                   const float *__restrict__ delta, bf16 *__restrict__ dk,
                   bf16 *__restrict__ dv, TcArgs a) {
  constexpr int p = D + kTcPad, kvTile = kTcTile * p, qTile = kBq * p;
  constexpr int kN = kBq / 8; // n8 tiles of queries
  LOOM_DYNAMIC_SHARED(bf16, smem);
  bf16 *sK = smem, *sV = sK + kvTile, *sQ = sV + kvTile,
       *sO = sQ + 2 * qTile;                             // Q, dO: 2 buffers
  float *sL = reinterpret_cast<float *>(sO + 2 * qTile), // 2 x kBq
      *sD = sL + 2 * kBq;                                // 2 x kBq
  const int64_t bh = blockIdx.x % a.batch;
  const int64_t k0 = (blockIdx.x / a.batch) * kTcTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2,
            t = lane & 3;
  const bf16 *qb = q + bh * a.sq * D, *ob = dO + bh * a.sq * D;
  const float *lb = lse + bh * a.sq, *db = delta + bh * a.sq;
  // Causal: queries before k0 see none of these keys (k0 is a multiple of
  // kBq, so the first visible tile starts at k0).
  const int64_t qStart = a.causal ? k0 : 0;
  const int64_t nTiles = ceilDiv(a.sq - qStart, kBq);
  const int64_t key0 = k0 + warp * 16 + g; // and key0 + 8
  const bf16 *wK = sK + warp * 16 * p, *wV = sV + warp * 16 * p;

  auto loadQTile = [&](int buf, int64_t qq0) {
    loadTileAsync<D, kBq>(sQ + buf * qTile, qb, qq0, a.sq);
    loadTileAsync<D, kBq>(sO + buf * qTile, ob, qq0, a.sq);
    // Row statistics with plain loads: visible after the next barrier.
    for (int r = threadIdx.x; r < kBq; r += kTcThreads) {
      int64_t i = qq0 + r;
      sL[buf * kBq + r] = i < a.sq ? lb[i] : 0.0f;
      sD[buf * kBq + r] = i < a.sq ? db[i] : 0.0f;
    }
  };
  loadTileAsync<D, kTcTile>(sK, k + bh * a.sk * D, k0, a.sk);
  loadTileAsync<D, kTcTile>(sV, v + bh * a.sk * D, k0, a.sk);
  if (nTiles > 0)
    loadQTile(0, qStart);
  commitAsync();

  float accK[D / 8][4], accV[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      accK[n][e] = accV[n][e] = 0.0f;

  for (int64_t j = 0; j < nTiles; ++j) {
    const int buf = j & 1;
    const int64_t qq0 = qStart + j * kBq;
    if (j + 1 < nTiles)
      loadQTile(buf ^ 1, qq0 + kBq);
    commitAsync();
    waitAsync<1>();
    __syncthreads();
    const bf16 *tQ = sQ + buf * qTile, *tO = sO + buf * qTile;
    const float *tL = sL + buf * kBq, *tD = sD + buf * kBq;

    float s[kN][4], dp[kN][4];
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ka[4], va[4];
      loadA(ka, wK + kk * 16, p);
      loadA(va, wV + kk * 16, p);
#pragma unroll
      for (int np = 0; np < kN / 2; ++np) {
        uint32_t b[4];
        loadBn(b, tQ + np * 16 * p + kk * 16, p); // S^T = K Q^T
        mma(s[2 * np], ka, b[0], b[1]);
        mma(s[2 * np + 1], ka, b[2], b[3]);
        loadBn(b, tO + np * 16 * p + kk * 16, p); // dP^T = V dO^T
        mma(dp[2 * np], va, b[0], b[1]);
        mma(dp[2 * np + 1], va, b[2], b[3]);
      }
    }
    const bool edge = qq0 + kBq > a.sq || k0 + kTcTile > a.sk ||
                      (a.causal && qq0 < k0 + kTcTile);
    // P^T in s, dS^T = P^T (dP^T - delta) in dp.
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int col = n * 8 + 2 * t + (e & 1);
        float pr = fastExp2(s[n][e] * a.scaleLog2 - tL[col]);
        if (edge) {
          int64_t query = qq0 + col, key = key0 + 8 * (e >> 1);
          if (query >= a.sq || key >= a.sk || (a.causal && key > query))
            pr = 0.0f;
        }
        s[n][e] = pr;
        dp[n][e] = pr * (dp[n][e] - tD[col]);
      }
#pragma unroll
    for (int kk = 0; kk < kBq / 16; ++kk) { // 16 queries a step
      uint32_t pa[4], da[4];
      accToA(pa, s[2 * kk], s[2 * kk + 1]);
      accToA(da, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t b[4];
        loadBk(b, tO + kk * 16 * p + dn * 16, p); // dV += P^T dO
        mma(accV[2 * dn], pa, b[0], b[1]);
        mma(accV[2 * dn + 1], pa, b[2], b[3]);
        loadBk(b, tQ + kk * 16 * p + dn * 16, p); // dK += dS^T Q
        mma(accK[2 * dn], da, b[0], b[1]);
        mma(accK[2 * dn + 1], da, b[2], b[3]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int64_t key = key0 + 8 * i;
    if (key >= a.sk)
      continue;
    bf16 *outK = dk + (bh * a.sk + key) * D + 2 * t,
         *outV = dv + (bh * a.sk + key) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<uint32_t *>(outK + n * 8) =
          bf16Pair(accK[n][2 * i] * a.scale, accK[n][2 * i + 1] * a.scale);
      *reinterpret_cast<uint32_t *>(outV + n * 8) =
          bf16Pair(accV[n][2 * i], accV[n][2 * i + 1]);
    }
  }
}

TcArgs tcArgsOf(const AttentionDims &d) {
  return {d.batch, d.sq, d.sk, d.scale, d.scale * kLog2e, d.causal};
}

/// Query rows per dK/dV tile: 64 at D = 64; 32 at D = 128 keeps the two
/// 16 x 128 f32 accumulators and the scores within the register file.
template <int D> constexpr int tcGradKVRows() { return D == 64 ? 64 : 32; }

/// Dynamic shared memory of each kernel, in bytes.
template <int D> constexpr size_t tcForwardSmem() {
  return sizeof(bf16) * 5 * kTcTile * (D + kTcPad);
}
template <int D> constexpr size_t tcGradQSmem() {
  return sizeof(bf16) * 6 * kTcTile * (D + kTcPad);
}
template <int D> constexpr size_t tcGradKVSmem() {
  return sizeof(bf16) * (2 * kTcTile + 4 * tcGradKVRows<D>()) * (D + kTcPad) +
         sizeof(float) * 4 * tcGradKVRows<D>();
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION

namespace {

Status launchCheckedBlocks(int64_t blocks, const char *what) {
  if (blocks > int64_t(INT32_MAX))
    return makeError("%s needs %lld blocks, more than one launch takes", what,
                     (long long)blocks);
  return Status::ok();
}

template <int D> Status allowSmem() {
  auto allow = [](auto kernel, size_t bytes) {
    return cudaCheck(cudaFuncSetAttribute(
                         kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bytes)),
                     "cudaFuncSetAttribute (tc attention shared memory)");
  };
  LOOM_RETURN_IF_ERROR(allow(tcForwardKernel<D, false>, tcForwardSmem<D>()));
  LOOM_RETURN_IF_ERROR(allow(tcForwardKernel<D, true>, tcForwardSmem<D>()));
  LOOM_RETURN_IF_ERROR(allow(tcGradQKernel<D>, tcGradQSmem<D>()));
  return allow(tcGradKVKernel<D, tcGradKVRows<D>()>, tcGradKVSmem<D>());
}

template <int D>
Status forward(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *o,
               const AttentionDims &d, cudaStream_t stream) {
  int64_t blocks = d.batch * tilesOf(d.sq);
  LOOM_RETURN_IF_ERROR(launchCheckedBlocks(blocks, "tc attention kernel"));
  tcForwardKernel<D, false>
      <<<static_cast<unsigned>(blocks), kTcThreads, tcForwardSmem<D>(),
         stream>>>(q, k, v, o, nullptr, nullptr, nullptr, tcArgsOf(d));
  return launchCheck("tc attention kernel");
}

template <int D>
Status backward(const bf16 *dO, const bf16 *q, const bf16 *k, const bf16 *v,
                bf16 *dq, bf16 *dk, bf16 *dv, const AttentionDims &d, float *ws,
                cudaStream_t stream) {
  TcArgs a = tcArgsOf(d);
  float *lse = ws, *delta = ws + d.batch * d.sq;
  int64_t qBlocks = d.batch * tilesOf(d.sq);
  int64_t kBlocks = d.batch * tilesOf(d.sk);
  LOOM_RETURN_IF_ERROR(launchCheckedBlocks(qBlocks, "tc attention_grad"));
  LOOM_RETURN_IF_ERROR(launchCheckedBlocks(kBlocks, "tc attention_grad"));
  tcForwardKernel<D, true>
      <<<static_cast<unsigned>(qBlocks), kTcThreads, tcForwardSmem<D>(),
         stream>>>(q, k, v, nullptr, dO, lse, delta, a);
  LOOM_RETURN_IF_ERROR(launchCheck("tc attention_grad statistics kernel"));
  tcGradKVKernel<D, tcGradKVRows<D>()>
      <<<static_cast<unsigned>(kBlocks), kTcThreads, tcGradKVSmem<D>(),
         stream>>>(dO, q, k, v, lse, delta, dk, dv, a);
  LOOM_RETURN_IF_ERROR(launchCheck("tc attention_grad dK/dV kernel"));
  tcGradQKernel<D>
      <<<static_cast<unsigned>(qBlocks), kTcThreads, tcGradQSmem<D>(),
         stream>>>(dO, q, k, v, lse, delta, dq, a);
  return launchCheck("tc attention_grad dQ kernel");
}

} // namespace

Status prepareTcAttentionKernels(const AttentionDims &a) {
  return a.d == 64 ? allowSmem<64>() : allowSmem<128>();
}

Status launchTcAttention(const void *q, const void *k, const void *v, void *o,
                         const AttentionDims &a, cudaStream_t stream) {
  if (a.batch * a.sq == 0)
    return Status::ok();
  if (a.sk == 0) // O = 0, as the CPU kernel's empty GEMM
    return launchZero(o, a.batch * a.sq * a.dv * int64_t(sizeof(bf16)), stream);
  auto cq = static_cast<const bf16 *>(q), ck = static_cast<const bf16 *>(k),
       cv = static_cast<const bf16 *>(v);
  auto out = static_cast<bf16 *>(o);
  return a.d == 64 ? forward<64>(cq, ck, cv, out, a, stream)
                   : forward<128>(cq, ck, cv, out, a, stream);
}

Status launchTcAttentionGrad(const void *dO, const void *q, const void *k,
                             const void *v, void *dq, void *dk, void *dv,
                             const AttentionDims &a, float *workspace,
                             cudaStream_t stream) {
  if (a.batch == 0)
    return Status::ok();
  int64_t el = sizeof(bf16);
  // No queries or no keys: every gradient is zero (the CPU's empty GEMMs).
  if (a.sq == 0 || a.sk == 0) {
    LOOM_RETURN_IF_ERROR(launchZero(dq, a.batch * a.sq * a.d * el, stream));
    LOOM_RETURN_IF_ERROR(launchZero(dk, a.batch * a.sk * a.d * el, stream));
    return launchZero(dv, a.batch * a.sk * a.dv * el, stream);
  }
  auto cO = static_cast<const bf16 *>(dO), cq = static_cast<const bf16 *>(q),
       ck = static_cast<const bf16 *>(k), cv = static_cast<const bf16 *>(v);
  auto gq = static_cast<bf16 *>(dq), gk = static_cast<bf16 *>(dk),
       gv = static_cast<bf16 *>(dv);
  return a.d == 64
             ? backward<64>(cO, cq, ck, cv, gq, gk, gv, a, workspace, stream)
             : backward<128>(cO, cq, ck, cv, gq, gk, gv, a, workspace, stream);
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
