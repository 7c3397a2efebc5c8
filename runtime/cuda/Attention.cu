//===- Attention.cu - Flash-style attention and its gradient -----*- CUDA
//-*-===//
//
// Semantics of runtime/kernels/cpu/Attention.cpp, per batch entry (all
// leading dims): S = scale Q K^T, masked above the diagonal when causal
// (Sq = Sk), P = softmax(S) row-wise, O = P V. No GQA and no other masks:
// the CPU op has none. Compute is fp32 whatever the storage.
//
// Forward: a block owns 32 query rows; K/V tiles of 32 keys pass through
// shared memory and each row keeps a running maximum and sum (online
// softmax), so no score matrix ever reaches global memory. Causal blocks
// stop at their diagonal tile.
//
// Backward, deterministic (no atomics), in three kernels:
//  1. the forward kernel in "statistics" mode stores each query row's
//     logsumexp L and delta = rowsum(dO * O) (the plan's attention_grad has
//     no saved statistics, so they are recomputed here);
//  2. one block per key tile recomputes P = exp(S - L) and
//     dS = P * (dP - delta) tile by tile over the queries and accumulates
//     dV = P^T dO and dK = scale dS^T Q in registers;
//  3. one block per query tile does the same over the keys for
//     dQ = scale dS K.
// Recomputing P in both 2 and 3 costs more arithmetic than one kernel with
// atomic dQ updates, but the result does not depend on timing.
//
// Threads: 128 per block; thread t works on tile row t / 4 and, within the
// row, on columns c, c + 4, c + 8, ... (c = t % 4), so a row's four threads
// sit in one warp and reduce with two shuffles. Shared-memory rows are
// padded by one float so that both row-wise and column-wise reads of a tile
// are free of bank conflicts. Head dims up to 128 (registers hold a quarter
// row per thread; kernels are instantiated for <= 64 and <= 128).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaElem.cuh"

namespace loom::runtime::cuda {

namespace {

constexpr int kRows = 32;         // query rows per tile
constexpr int kCols = 32;         // key rows per tile
constexpr int kAttnThreads = 128; // 4 threads per tile row
constexpr int kPerThread = kCols / 4;

struct AttnArgs {
  int64_t sq, sk;
  int d, dv;
  float scale;
  bool causal;
};

/// Loads rows `[row0, row0 + kRows)` of a `[rows, cols]` matrix into a
/// `kRows x pitch` float tile; rows past the end become zeros. Consecutive
/// threads read consecutive elements.
template <typename T>
__device__ void loadTile(float *dst, int pitch, const T *__restrict__ src,
                         int64_t row0, int64_t rows, int cols) {
  for (int e = threadIdx.x; e < kRows * cols; e += blockDim.x) {
    int r = e / cols, c = e - r * cols;
    int64_t gr = row0 + r;
    dst[r * pitch + c] = gr < rows ? toFloat(src[gr * cols + c]) : 0.0f;
  }
}

/// `out[j] = dot(a, b + (c + 4 j) * pitch)` over `n` columns: one row of `a`
/// against this thread's rows of a tile.
__device__ __forceinline__ void dotRows(const float *a, const float *b,
                                        int pitch, int c, int n,
                                        float (&out)[kPerThread]) {
#pragma unroll
  for (int j = 0; j < kPerThread; ++j)
    out[j] = 0.0f;
  for (int x = 0; x < n; ++x) {
    float ax = a[x];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      out[j] += ax * b[(c + 4 * j) * pitch + x];
  }
}

/// Whether key `key` is hidden from query `query`.
__device__ __forceinline__ bool masked(const AttnArgs &a, int64_t query,
                                       int64_t key) {
  return query >= a.sq || key >= a.sk || (a.causal && key > query);
}

/// Forward. With `o` null ("statistics" mode, the backward's first pass) it
/// writes `lse[row] = max + log(sum)` and `delta[row] = dot(dO, O)` instead
/// of `O`.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kAttnThreads)
    attentionForwardKernel(const T *__restrict__ q, const T *__restrict__ k,
                           const T *__restrict__ v, T *__restrict__ o,
                           const T *__restrict__ dO, float *__restrict__ lse,
                           float *__restrict__ delta, AttnArgs a) {
  LOOM_DYNAMIC_SHARED(float, smem);
  const int pd = a.d + 1, pv = a.dv + 1, pp = kCols + 1;
  float *sQ = smem;            // kRows x pd
  float *sK = sQ + kRows * pd; // kCols x pd
  float *sV = sK + kCols * pd; // kCols x pv
  float *sP = sV + kCols * pv; // kRows x pp
  int64_t qTiles = (a.sq + kRows - 1) / kRows;
  int64_t bh = blockIdx.x / qTiles, q0 = (blockIdx.x % qTiles) * kRows;
  const int r = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int64_t row = q0 + r;
  const T *kb = k + bh * a.sk * a.d, *vb = v + bh * a.sk * a.dv;

  loadTile(sQ, pd, q + bh * a.sq * a.d, q0, a.sq, a.d);
  float m = -INFINITY, l = 0.0f;
  float acc[kMaxD / 4];
#pragma unroll
  for (int x = 0; x < kMaxD / 4; ++x)
    acc[x] = 0.0f;
  // Causal: tiles past the diagonal are all masked for this block's rows.
  int64_t kEnd = a.causal ? min(a.sk, q0 + kRows) : a.sk;
  for (int64_t k0 = 0; k0 < kEnd; k0 += kCols) {
    __syncthreads(); // the previous tile's readers are done
    loadTile(sK, pd, kb, k0, a.sk, a.d);
    loadTile(sV, pv, vb, k0, a.sk, a.dv);
    __syncthreads();
    float s[kPerThread];
    dotRows(sQ + r * pd, sK, pd, c, a.d, s);
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      s[j] = masked(a, row, k0 + c + 4 * j) ? -INFINITY : s[j] * a.scale;
      mx = fmaxf(mx, s[j]);
    }
    float mNew = fmaxf(m, quadMax(mx));
    // A row that has seen no visible key yet keeps everything at zero.
    float ref = mNew == -INFINITY ? 0.0f : mNew;
    float alpha = expf(m - ref), sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      float p = expf(s[j] - ref);
      sP[r * pp + c + 4 * j] = p;
      sum += p;
    }
    l = l * alpha + quadSum(sum);
    m = mNew;
    __syncwarp(); // the row's probabilities are written by its own warp
#pragma unroll
    for (int x = 0; x < kMaxD / 4; ++x)
      acc[x] *= alpha;
    for (int j = 0; j < kCols; ++j) {
      float p = sP[r * pp + j];
      const float *vr = sV + j * pv;
#pragma unroll
      for (int x = 0; x < kMaxD / 4; ++x)
        if (c + 4 * x < a.dv)
          acc[x] += p * vr[c + 4 * x];
    }
  }
  // No key at all (Sk = 0): O is 0, as the CPU kernel's empty GEMM.
  float inv = l > 0.0f ? 1.0f / l : 0.0f;
  int64_t at = (bh * a.sq + row) * a.dv;
  if (o) {
    if (row < a.sq)
#pragma unroll
      for (int x = 0; x < kMaxD / 4; ++x)
        if (c + 4 * x < a.dv)
          o[at + c + 4 * x] = fromFloat<T>(acc[x] * inv);
    return;
  }
  float dd = 0.0f;
  if (row < a.sq)
#pragma unroll
    for (int x = 0; x < kMaxD / 4; ++x)
      if (c + 4 * x < a.dv)
        dd += toFloat(dO[at + c + 4 * x]) * (acc[x] * inv);
  dd = quadSum(dd); // all four threads of the row take part
  if (row < a.sq && c == 0) {
    lse[bh * a.sq + row] = m + logf(l);
    delta[bh * a.sq + row] = dd;
  }
}

/// dK and dV of one tile of 32 keys, over all (visible) query tiles.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kAttnThreads)
    attentionGradKVKernel(const T *__restrict__ dO, const T *__restrict__ q,
                          const T *__restrict__ k, const T *__restrict__ v,
                          const float *__restrict__ lse,
                          const float *__restrict__ delta, T *__restrict__ dk,
                          T *__restrict__ dv, AttnArgs a) {
  LOOM_DYNAMIC_SHARED(float, smem);
  const int pd = a.d + 1, pv = a.dv + 1, pp = kRows + 1;
  float *sK = smem;            // kCols x pd
  float *sV = sK + kCols * pd; // kCols x pv
  float *sQ = sV + kCols * pv; // kRows x pd
  float *sO = sQ + kRows * pd; // kRows x pv (dO)
  float *sP = sO + kRows * pv; // kCols x pp, [key][query]
  float *sS = sP + kCols * pp; // kCols x pp, dS
  float *sL = sS + kCols * pp; // kRows
  float *sD = sL + kRows;      // kRows
  int64_t kTiles = (a.sk + kCols - 1) / kCols;
  int64_t bh = blockIdx.x / kTiles, k0 = (blockIdx.x % kTiles) * kCols;
  const int r = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int64_t key = k0 + r;
  const T *qb = q + bh * a.sq * a.d, *ob = dO + bh * a.sq * a.dv;
  const float *lb = lse + bh * a.sq, *db = delta + bh * a.sq;

  loadTile(sK, pd, k + bh * a.sk * a.d, k0, a.sk, a.d);
  loadTile(sV, pv, v + bh * a.sk * a.dv, k0, a.sk, a.dv);
  float accK[kMaxD / 4], accV[kMaxD / 4];
#pragma unroll
  for (int x = 0; x < kMaxD / 4; ++x)
    accK[x] = accV[x] = 0.0f;
  // Causal: queries before k0 see none of these keys (kRows == kCols, so
  // k0 is a query tile boundary).
  for (int64_t q0 = a.causal ? k0 : 0; q0 < a.sq; q0 += kRows) {
    __syncthreads();
    loadTile(sQ, pd, qb, q0, a.sq, a.d);
    loadTile(sO, pv, ob, q0, a.sq, a.dv);
    if (threadIdx.x < kRows) {
      int64_t i = q0 + threadIdx.x;
      sL[threadIdx.x] = i < a.sq ? lb[i] : 0.0f;
      sD[threadIdx.x] = i < a.sq ? db[i] : 0.0f;
    }
    __syncthreads();
    float s[kPerThread], dp[kPerThread];
    dotRows(sK + r * pd, sQ, pd, c, a.d, s);
    dotRows(sV + r * pv, sO, pv, c, a.dv, dp);
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      int i = c + 4 * j;
      float p = masked(a, q0 + i, key) ? 0.0f : expf(s[j] * a.scale - sL[i]);
      sP[r * pp + i] = p;
      sS[r * pp + i] = p * (dp[j] - sD[i]);
    }
    __syncwarp();
    for (int i = 0; i < kRows; ++i) {
      float p = sP[r * pp + i], ds = sS[r * pp + i];
      const float *qi = sQ + i * pd, *oi = sO + i * pv;
#pragma unroll
      for (int x = 0; x < kMaxD / 4; ++x) {
        if (c + 4 * x < a.dv)
          accV[x] += p * oi[c + 4 * x];
        if (c + 4 * x < a.d)
          accK[x] += ds * qi[c + 4 * x];
      }
    }
  }
  if (key >= a.sk)
    return;
#pragma unroll
  for (int x = 0; x < kMaxD / 4; ++x) {
    if (c + 4 * x < a.d)
      dk[(bh * a.sk + key) * a.d + c + 4 * x] = fromFloat<T>(accK[x] * a.scale);
    if (c + 4 * x < a.dv)
      dv[(bh * a.sk + key) * a.dv + c + 4 * x] = fromFloat<T>(accV[x]);
  }
}

/// dQ of one tile of 32 queries, over all (visible) key tiles.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kAttnThreads)
    attentionGradQKernel(const T *__restrict__ dO, const T *__restrict__ q,
                         const T *__restrict__ k, const T *__restrict__ v,
                         const float *__restrict__ lse,
                         const float *__restrict__ delta, T *__restrict__ dq,
                         AttnArgs a) {
  LOOM_DYNAMIC_SHARED(float, smem);
  const int pd = a.d + 1, pv = a.dv + 1, pp = kCols + 1;
  float *sQ = smem;            // kRows x pd
  float *sO = sQ + kRows * pd; // kRows x pv (dO)
  float *sK = sO + kRows * pv; // kCols x pd
  float *sV = sK + kCols * pd; // kCols x pv
  float *sS = sV + kCols * pv; // kRows x pp, dS
  int64_t qTiles = (a.sq + kRows - 1) / kRows;
  int64_t bh = blockIdx.x / qTiles, q0 = (blockIdx.x % qTiles) * kRows;
  const int r = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int64_t row = q0 + r;
  const T *kb = k + bh * a.sk * a.d, *vb = v + bh * a.sk * a.dv;

  loadTile(sQ, pd, q + bh * a.sq * a.d, q0, a.sq, a.d);
  loadTile(sO, pv, dO + bh * a.sq * a.dv, q0, a.sq, a.dv);
  float rowLse = row < a.sq ? lse[bh * a.sq + row] : 0.0f;
  float rowDelta = row < a.sq ? delta[bh * a.sq + row] : 0.0f;
  float acc[kMaxD / 4];
#pragma unroll
  for (int x = 0; x < kMaxD / 4; ++x)
    acc[x] = 0.0f;
  int64_t kEnd = a.causal ? min(a.sk, q0 + kRows) : a.sk;
  for (int64_t k0 = 0; k0 < kEnd; k0 += kCols) {
    __syncthreads();
    loadTile(sK, pd, kb, k0, a.sk, a.d);
    loadTile(sV, pv, vb, k0, a.sk, a.dv);
    __syncthreads();
    float s[kPerThread], dp[kPerThread];
    dotRows(sQ + r * pd, sK, pd, c, a.d, s);
    dotRows(sO + r * pv, sV, pv, c, a.dv, dp);
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      int jj = c + 4 * j;
      float p = masked(a, row, k0 + jj) ? 0.0f : expf(s[j] * a.scale - rowLse);
      sS[r * pp + jj] = p * (dp[j] - rowDelta);
    }
    __syncwarp();
    for (int j = 0; j < kCols; ++j) {
      float ds = sS[r * pp + j];
      const float *kj = sK + j * pd;
#pragma unroll
      for (int x = 0; x < kMaxD / 4; ++x)
        if (c + 4 * x < a.d)
          acc[x] += ds * kj[c + 4 * x];
    }
  }
  if (row >= a.sq)
    return;
#pragma unroll
  for (int x = 0; x < kMaxD / 4; ++x)
    if (c + 4 * x < a.d)
      dq[(bh * a.sq + row) * a.d + c + 4 * x] = fromFloat<T>(acc[x] * a.scale);
}

/// Dynamic shared memory of each kernel, in bytes.
size_t forwardSmem(const AttnArgs &a) {
  return sizeof(float) * ((kRows + kCols) * (a.d + 1) + kCols * (a.dv + 1) +
                          kRows * (kCols + 1));
}
size_t gradKVSmem(const AttnArgs &a) {
  return sizeof(float) * ((kRows + kCols) * (a.d + 1 + a.dv + 1) +
                          2 * kCols * (kRows + 1) + 2 * kRows);
}
size_t gradQSmem(const AttnArgs &a) {
  return sizeof(float) *
         ((kRows + kCols) * (a.d + 1 + a.dv + 1) + kRows * (kCols + 1));
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

namespace {

/// Launches with `bytes` of dynamic shared memory, which
/// `prepareAttentionKernels` allowed at bind.
template <typename Kernel, typename... Args>
Status launchWithSmem(Kernel kernel, int64_t blocks, size_t bytes,
                      cudaStream_t stream, const char *what, Args... args) {
  if (blocks > int64_t(INT32_MAX))
    return makeError("%s needs %lld blocks, more than one launch takes", what,
                     (long long)blocks);
  kernel<<<static_cast<unsigned>(blocks), kAttnThreads, bytes, stream>>>(
      args...);
  return launchCheck(what);
}

/// Allows the three kernels of one instantiation the dynamic shared memory
/// of its largest head dims (above the default 48 KiB past 64): the
/// attribute belongs to the kernel, so it is set once for the worst case
/// rather than per launch or per instruction.
template <typename T, int kMaxD>
Status allowSmem() {
  AttnArgs worst{0, 0, kMaxD, kMaxD, 0.0f, false};
  auto allow = [](auto kernel, size_t bytes) {
    return cudaCheck(cudaFuncSetAttribute(
                         kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bytes)),
                     "cudaFuncSetAttribute (attention shared memory)");
  };
  LOOM_RETURN_IF_ERROR(
      allow(attentionForwardKernel<T, kMaxD>, forwardSmem(worst)));
  LOOM_RETURN_IF_ERROR(
      allow(attentionGradKVKernel<T, kMaxD>, gradKVSmem(worst)));
  return allow(attentionGradQKernel<T, kMaxD>, gradQSmem(worst));
}

AttnArgs argsOf(const AttentionDims &d) {
  return {d.sq,    d.sk,    static_cast<int>(d.d), static_cast<int>(d.dv),
          d.scale, d.causal};
}

template <typename T, int kMaxD>
Status forward(const void *q, const void *k, const void *v, void *o,
               const AttentionDims &d, cudaStream_t stream) {
  AttnArgs a = argsOf(d);
  int64_t blocks = d.batch * ((d.sq + kRows - 1) / kRows);
  return launchWithSmem(
      attentionForwardKernel<T, kMaxD>, blocks, forwardSmem(a), stream,
      "attention kernel", static_cast<const T *>(q), static_cast<const T *>(k),
      static_cast<const T *>(v), static_cast<T *>(o),
      static_cast<const T *>(nullptr), static_cast<float *>(nullptr),
      static_cast<float *>(nullptr), a);
}

template <typename T, int kMaxD>
Status backward(const void *dO, const void *q, const void *k, const void *v,
                void *dq, void *dk, void *dv, const AttentionDims &d, float *ws,
                cudaStream_t stream) {
  AttnArgs a = argsOf(d);
  float *lse = ws, *delta = ws + d.batch * d.sq;
  auto cq = static_cast<const T *>(q), ck = static_cast<const T *>(k),
       cv = static_cast<const T *>(v), cO = static_cast<const T *>(dO);
  int64_t qBlocks = d.batch * ((d.sq + kRows - 1) / kRows);
  int64_t kBlocks = d.batch * ((d.sk + kCols - 1) / kCols);
  LOOM_RETURN_IF_ERROR(
      launchWithSmem(attentionForwardKernel<T, kMaxD>, qBlocks, forwardSmem(a),
                     stream, "attention_grad statistics kernel", cq, ck, cv,
                     static_cast<T *>(nullptr), cO, lse, delta, a));
  LOOM_RETURN_IF_ERROR(launchWithSmem(
      attentionGradKVKernel<T, kMaxD>, kBlocks, gradKVSmem(a), stream,
      "attention_grad dK/dV kernel", cO, cq, ck, cv,
      static_cast<const float *>(lse), static_cast<const float *>(delta),
      static_cast<T *>(dk), static_cast<T *>(dv), a));
  return launchWithSmem(attentionGradQKernel<T, kMaxD>, qBlocks, gradQSmem(a),
                        stream, "attention_grad dQ kernel", cO, cq, ck, cv,
                        static_cast<const float *>(lse),
                        static_cast<const float *>(delta), static_cast<T *>(dq),
                        a);
}

} // namespace

Status launchAttention(Elem e, const void *q, const void *k, const void *v,
                       void *o, const AttentionDims &a, cudaStream_t stream) {
  if (a.batch * a.sq * a.dv == 0)
    return Status::ok();
  bool small = a.d <= 64 && a.dv <= 64;
  if (e == Elem::BF16)
    return small ? forward<__nv_bfloat16, 64>(q, k, v, o, a, stream)
                 : forward<__nv_bfloat16, 128>(q, k, v, o, a, stream);
  return small ? forward<float, 64>(q, k, v, o, a, stream)
               : forward<float, 128>(q, k, v, o, a, stream);
}

Status prepareAttentionKernels(Elem e, const AttentionDims &a) {
  bool small = a.d <= 64 && a.dv <= 64;
  if (e == Elem::BF16)
    return small ? allowSmem<__nv_bfloat16, 64>()
                 : allowSmem<__nv_bfloat16, 128>();
  return small ? allowSmem<float, 64>() : allowSmem<float, 128>();
}

Status launchAttentionGrad(Elem e, const void *dO, const void *q, const void *k,
                           const void *v, void *dq, void *dk, void *dv,
                           const AttentionDims &a, float *workspace,
                           cudaStream_t stream) {
  if (a.batch == 0)
    return Status::ok();
  size_t el = e == Elem::BF16 ? 2 : 4;
  // No queries or no keys: every gradient is zero (the CPU's empty GEMMs).
  if (a.sq == 0 || a.sk == 0) {
    LOOM_RETURN_IF_ERROR(launchZero(dq, a.batch * a.sq * a.d * el, stream));
    LOOM_RETURN_IF_ERROR(launchZero(dk, a.batch * a.sk * a.d * el, stream));
    return launchZero(dv, a.batch * a.sk * a.dv * el, stream);
  }
  bool small = a.d <= 64 && a.dv <= 64;
  if (e == Elem::BF16)
    return small ? backward<__nv_bfloat16, 64>(dO, q, k, v, dq, dk, dv, a,
                                               workspace, stream)
                 : backward<__nv_bfloat16, 128>(dO, q, k, v, dq, dk, dv, a,
                                                workspace, stream);
  return small ? backward<float, 64>(dO, q, k, v, dq, dk, dv, a, workspace,
                                     stream)
               : backward<float, 128>(dO, q, k, v, dq, dk, dv, a, workspace,
                                      stream);
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
