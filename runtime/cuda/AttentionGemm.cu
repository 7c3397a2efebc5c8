//===- AttentionGemm.cu - Row kernels of the GEMM path of attention -*- CUDA
//-*-===//
//
// The GEMM path of attention (AttentionKernels.cpp) puts its FLOPs on the
// tensor cores through cuBLASLt strided-batched GEMMs and keeps the scores
// of one instruction in a workspace; these kernels are the element-wise
// steps between the GEMMs, fused per row:
//  - softmax: P = softmax(S) of each row of the f32 scores `S` (already
//    scaled by the GEMM), masked (causal) entries and nothing else exactly 0,
//    stored in the attention's storage type (bf16 P, as flash attention);
//  - softmax gradient: dS = P * (dP - rowsum(dP * P)) from P (storage type)
//    and the f32 dP, stored in the storage type; dS may overwrite P.
// One warp per row (4 rows a block); each lane takes groups of 4 columns
// (one 16-byte f32 load, two bf16 pairs) when a row's length is a multiple
// of 4, single elements otherwise. Row statistics are f32, reduced with
// butterfly shuffles so every lane has them. Causal rows read only their
// visible keys (`key <= query`, query = row % Sq, Sq = Sk).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaElem.cuh"

namespace loom::runtime::cuda {

namespace {

constexpr int kRowWarps = 4; // rows per block
constexpr int kRowThreads = 32 * kRowWarps;
constexpr int kGroup = 4; // consecutive columns a lane takes at once

struct RowArgs {
  int64_t rows, sq, sk;
  bool causal;
};

/// Elements `[j, j + 4)` of `row` (length `n`) as floats; one vector load
/// when `vec` (row length a multiple of 4, so the group is whole and
/// aligned), else element by element, with 0 past `n`.
__device__ __forceinline__ void loadGroup(const float *row, int64_t j,
                                          int64_t n, bool vec,
                                          float (&x)[kGroup]) {
  if (vec) {
    float4 v = *reinterpret_cast<const float4 *>(row + j);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    return;
  }
#pragma unroll
  for (int t = 0; t < kGroup; ++t)
    x[t] = j + t < n ? row[j + t] : 0.0f;
}
__device__ __forceinline__ void loadGroup(const __nv_bfloat16 *row, int64_t j,
                                          int64_t n, bool vec,
                                          float (&x)[kGroup]) {
  if (vec) {
    const __nv_bfloat162 *v = reinterpret_cast<const __nv_bfloat162 *>(row + j);
    __nv_bfloat162 a = v[0], b = v[1];
    x[0] = __bfloat162float(a.x), x[1] = __bfloat162float(a.y);
    x[2] = __bfloat162float(b.x), x[3] = __bfloat162float(b.y);
    return;
  }
#pragma unroll
  for (int t = 0; t < kGroup; ++t)
    x[t] = j + t < n ? __bfloat162float(row[j + t]) : 0.0f;
}

/// Stores `x` as elements `[j, j + 4)` of `row` (length `n`), the
/// counterpart of `loadGroup`.
__device__ __forceinline__ void storeGroup(float *row, int64_t j, int64_t n,
                                           bool vec, const float (&x)[kGroup]) {
  if (vec) {
    *reinterpret_cast<float4 *>(row + j) = make_float4(x[0], x[1], x[2], x[3]);
    return;
  }
#pragma unroll
  for (int t = 0; t < kGroup; ++t)
    if (j + t < n)
      row[j + t] = x[t];
}
__device__ __forceinline__ void storeGroup(__nv_bfloat16 *row, int64_t j,
                                           int64_t n, bool vec,
                                           const float (&x)[kGroup]) {
  if (vec) {
    __nv_bfloat162 *v = reinterpret_cast<__nv_bfloat162 *>(row + j);
    v[0] = __nv_bfloat162(fromFloat<__nv_bfloat16>(x[0]),
                          fromFloat<__nv_bfloat16>(x[1]));
    v[1] = __nv_bfloat162(fromFloat<__nv_bfloat16>(x[2]),
                          fromFloat<__nv_bfloat16>(x[3]));
    return;
  }
#pragma unroll
  for (int t = 0; t < kGroup; ++t)
    if (j + t < n)
      row[j + t] = fromFloat<__nv_bfloat16>(x[t]);
}

/// The row of this warp (may be past the end) and how many of its keys are
/// visible: all `sk`, or `query + 1` when causal.
struct RowPos {
  int64_t row, visible;
};
__device__ __forceinline__ RowPos rowPos(const RowArgs &a) {
  int64_t row = blockIdx.x * int64_t(kRowWarps) + threadIdx.x / 32;
  int64_t visible = a.causal ? min(a.sk, row % a.sq + 1) : a.sk;
  return {row, visible};
}

/// `p = softmax(s)` per row of `sk` scores, masked keys 0.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    attentionSoftmaxKernel(const float *__restrict__ s, T *__restrict__ p,
                           RowArgs a) {
  RowPos at = rowPos(a);
  if (at.row >= a.rows)
    return; // the whole warp
  const int lane = threadIdx.x & 31;
  const bool vec = a.sk % kGroup == 0;
  const float *sr = s + at.row * a.sk;
  T *pr = p + at.row * a.sk;
  const int64_t n = at.visible, step = 32 * kGroup;
  float x[kGroup];
  float mx = -INFINITY;
  for (int64_t j = kGroup * lane; j < n; j += step) {
    loadGroup(sr, j, a.sk, vec, x);
#pragma unroll
    for (int t = 0; t < kGroup; ++t)
      if (j + t < n)
        mx = fmaxf(mx, x[t]);
  }
  mx = warpMax(mx);
  float sum = 0.0f;
  for (int64_t j = kGroup * lane; j < n; j += step) {
    loadGroup(sr, j, a.sk, vec, x);
#pragma unroll
    for (int t = 0; t < kGroup; ++t)
      if (j + t < n)
        sum += expf(x[t] - mx);
  }
  const float inv = 1.0f / warpSum(sum);
  for (int64_t j = kGroup * lane; j < a.sk; j += step) {
    if (j < n)
      loadGroup(sr, j, a.sk, vec, x);
#pragma unroll
    for (int t = 0; t < kGroup; ++t)
      x[t] = j + t < n ? expf(x[t] - mx) * inv : 0.0f;
    storeGroup(pr, j, a.sk, vec, x);
  }
}

/// `ds = p * (dp - rowsum(dp * p))` per row, masked keys 0. `ds` may be
/// `p` (each element is read before the same lane writes it).
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    attentionSoftmaxGradKernel(const T *p, const float *__restrict__ dp, T *ds,
                               RowArgs a) {
  RowPos at = rowPos(a);
  if (at.row >= a.rows)
    return;
  const int lane = threadIdx.x & 31;
  const bool vec = a.sk % kGroup == 0;
  const T *pr = p + at.row * a.sk;
  const float *dpr = dp + at.row * a.sk;
  T *dsr = ds + at.row * a.sk;
  const int64_t n = at.visible, step = 32 * kGroup;
  float x[kGroup], y[kGroup];
  float dot = 0.0f;
  for (int64_t j = kGroup * lane; j < n; j += step) {
    loadGroup(pr, j, a.sk, vec, x);
    loadGroup(dpr, j, a.sk, vec, y);
#pragma unroll
    for (int t = 0; t < kGroup; ++t)
      if (j + t < n)
        dot += x[t] * y[t];
  }
  dot = warpSum(dot);
  for (int64_t j = kGroup * lane; j < a.sk; j += step) {
    if (j < n) {
      loadGroup(pr, j, a.sk, vec, x);
      loadGroup(dpr, j, a.sk, vec, y);
    }
#pragma unroll
    for (int t = 0; t < kGroup; ++t)
      x[t] = j + t < n ? x[t] * (y[t] - dot) : 0.0f;
    storeGroup(dsr, j, a.sk, vec, x);
  }
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

namespace {

StatusOr<unsigned> rowBlocks(int64_t rows, const char *what) {
  int64_t blocks = (rows + kRowWarps - 1) / kRowWarps;
  if (blocks > int64_t(INT32_MAX))
    return makeError("%s needs %lld blocks, more than one launch takes", what,
                     (long long)blocks);
  return static_cast<unsigned>(blocks);
}

} // namespace

Status launchAttentionSoftmax(Elem e, const float *s, void *p, int64_t rows,
                              int64_t sq, int64_t sk, bool causal,
                              cudaStream_t stream) {
  if (rows == 0 || sk == 0)
    return Status::ok();
  const char *what = "attention softmax kernel";
  LOOM_ASSIGN_OR_RETURN(unsigned blocks, rowBlocks(rows, what));
  RowArgs a{rows, sq, sk, causal};
  if (e == Elem::BF16)
    attentionSoftmaxKernel<<<blocks, kRowThreads, 0, stream>>>(
        s, static_cast<__nv_bfloat16 *>(p), a);
  else
    attentionSoftmaxKernel<<<blocks, kRowThreads, 0, stream>>>(
        s, static_cast<float *>(p), a);
  return launchCheck(what);
}

Status launchAttentionSoftmaxGrad(Elem e, const void *p, const float *dp,
                                  void *ds, int64_t rows, int64_t sq,
                                  int64_t sk, bool causal,
                                  cudaStream_t stream) {
  if (rows == 0 || sk == 0)
    return Status::ok();
  const char *what = "attention softmax gradient kernel";
  LOOM_ASSIGN_OR_RETURN(unsigned blocks, rowBlocks(rows, what));
  RowArgs a{rows, sq, sk, causal};
  if (e == Elem::BF16)
    attentionSoftmaxGradKernel<<<blocks, kRowThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(p), dp,
        static_cast<__nv_bfloat16 *>(ds), a);
  else
    attentionSoftmaxGradKernel<<<blocks, kRowThreads, 0, stream>>>(
        static_cast<const float *>(p), dp, static_cast<float *>(ds), a);
  return launchCheck(what);
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
