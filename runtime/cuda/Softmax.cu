//===- Softmax.cu - CUDA softmax and its gradient -----------------*- CUDA
//-*-===//
//
// softmax and softmax_grad over `[outer, dim, inner]`. Contiguous rows
// (`inner == 1`) with one storage for every operand take the templated
// kernels: one block per row sized to the row, 16-byte packs (the unaligned
// head and tail scalar), softmax's maximum and sum in one pass (`MaxSum`),
// then a second pass over the row that writes (the grid keeps the rows in
// flight within L2, so that pass reads from L2). Mixed
// storage falls back to the per-element `FloatIn` row kernels; `inner > 1`
// to one thread per column (coalesced across the `inner` columns).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/RowVec.cuh"

#include <cmath>

namespace loom::runtime::cuda {

namespace {

template <typename T>
__global__ void softmaxRowVecKernel(const T *x, T *y, int64_t rows,
                                    int64_t dim) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = x + r * dim;
    T *out = y + r * dim;
    MaxSum a;
    forRow(row, dim, [&](int64_t, const auto &v) { addMaxSum(a, v); });
    a = blockMaxSum(a);
    float mx = a.m, inv = 1.0f / a.s;
    forRow(row, dim, [&](int64_t c, const auto &v) {
      constexpr int n = sizeof(v) / sizeof(float);
      float o[n];
#pragma unroll
      for (int j = 0; j < n; ++j)
        o[j] = expf(v[j] - mx) * inv;
      if constexpr (n == 1)
        out[c] = fromFloat<T>(o[0]);
      else
        storePack<T, n>(out + c, o);
    });
  }
}

/// `dx = y * (dy - sum(dy * y))`; `dy`, `y` and `dx` share their offset
/// from a 16-byte boundary (and may be one buffer: each element is read and
/// written by one thread).
template <typename T>
__global__ void softmaxGradRowVecKernel(const T *dy, const T *y, T *dx,
                                        int64_t rows, int64_t dim) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *dyRow = dy + r * dim, *yRow = y + r * dim;
    T *out = dx + r * dim;
    float s = 0;
    forRow(yRow, dim, [&](int64_t c, const auto &v) {
      constexpr int n = sizeof(v) / sizeof(float);
      float g[n];
      if constexpr (n == 1)
        g[0] = toFloat(dyRow[c]);
      else
        loadPack<T, n>(dyRow + c, g);
#pragma unroll
      for (int j = 0; j < n; ++j)
        s += g[j] * v[j];
    });
    s = blockSum(s);
    forRow(yRow, dim, [&](int64_t c, const auto &v) {
      constexpr int n = sizeof(v) / sizeof(float);
      float g[n];
      if constexpr (n == 1)
        g[0] = toFloat(dyRow[c]);
      else
        loadPack<T, n>(dyRow + c, g);
#pragma unroll
      for (int j = 0; j < n; ++j)
        g[j] = v[j] * (g[j] - s);
      if constexpr (n == 1)
        out[c] = fromFloat<T>(g[0]);
      else
        storePack<T, n>(out + c, g);
    });
  }
}

/// inner == 1, any storage: one block per contiguous row.
__global__ void softmaxRowKernel(FloatIn x, FloatOut y, int64_t rows,
                                 int64_t dim) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t row = r * dim;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      mx = fmaxf(mx, load(x, row + c));
    mx = blockMax(mx);
    float s = 0;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      s += expf(load(x, row + c) - mx);
    s = blockSum(s);
    float inv = 1.0f / s;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      store(y, row + c, expf(load(x, row + c) - mx) * inv);
  }
}

/// inner > 1: one thread per (outer, inner) column, striding by `inner`.
__global__ void softmaxColumnKernel(FloatIn x, FloatOut y, int64_t outer,
                                    int64_t dim, int64_t inner) {
  LOOM_GRID_STRIDE(j, outer * inner) {
    int64_t base = (j / inner) * dim * inner + j % inner;
    float mx = -INFINITY;
    for (int64_t c = 0; c < dim; ++c)
      mx = fmaxf(mx, load(x, base + c * inner));
    float s = 0;
    for (int64_t c = 0; c < dim; ++c)
      s += expf(load(x, base + c * inner) - mx);
    float inv = 1.0f / s;
    for (int64_t c = 0; c < dim; ++c)
      store(y, base + c * inner, expf(load(x, base + c * inner) - mx) * inv);
  }
}

__global__ void softmaxGradRowKernel(FloatIn dy, FloatIn y, FloatOut dx,
                                     int64_t rows, int64_t dim) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t row = r * dim;
    float s = 0;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      s += load(dy, row + c) * load(y, row + c);
    s = blockSum(s);
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      store(dx, row + c, load(y, row + c) * (load(dy, row + c) - s));
  }
}

__global__ void softmaxGradColumnKernel(FloatIn dy, FloatIn y, FloatOut dx,
                                        int64_t outer, int64_t dim,
                                        int64_t inner) {
  LOOM_GRID_STRIDE(j, outer * inner) {
    int64_t base = (j / inner) * dim * inner + j % inner;
    float s = 0;
    for (int64_t c = 0; c < dim; ++c)
      s += load(dy, base + c * inner) * load(y, base + c * inner);
    for (int64_t c = 0; c < dim; ++c) {
      int64_t i = base + c * inner;
      store(dx, i, load(y, i) * (load(dy, i) - s));
    }
  }
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchSoftmax(FloatIn x, FloatOut y, int64_t outer, int64_t dim,
                     int64_t inner, cudaStream_t stream) {
  if (outer * dim * inner == 0)
    return Status::ok();
  bool vec = x.e == y.e && sameAlignment(x.p, y.p);
  if (inner == 1 && vec && x.e == Elem::BF16)
    softmaxRowVecKernel<<<rereadBlocks(outer, 2 * dim),
                          rowBlockThreads<__nv_bfloat16>(dim), 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(x.p),
        static_cast<__nv_bfloat16 *>(y.p), outer, dim);
  else if (inner == 1 && vec)
    softmaxRowVecKernel<<<rereadBlocks(outer, 4 * dim),
                          rowBlockThreads<float>(dim), 0, stream>>>(
        static_cast<const float *>(x.p), static_cast<float *>(y.p), outer, dim);
  else if (inner == 1)
    softmaxRowKernel<<<capBlocks(outer), kThreads, 0, stream>>>(x, y, outer,
                                                                dim);
  else
    softmaxColumnKernel<<<blocksFor(outer * inner), kThreads, 0, stream>>>(
        x, y, outer, dim, inner);
  return launchCheck("softmax kernel");
}

Status launchSoftmaxGrad(FloatIn dy, FloatIn y, FloatOut dx, int64_t outer,
                         int64_t dim, int64_t inner, cudaStream_t stream) {
  if (outer * dim * inner == 0)
    return Status::ok();
  bool vec = dy.e == y.e && dx.e == y.e && sameAlignment(dy.p, y.p) &&
             sameAlignment(dx.p, y.p);
  if (inner == 1 && vec && y.e == Elem::BF16)
    softmaxGradRowVecKernel<<<rereadBlocks(outer, 4 * dim),
                              rowBlockThreads<__nv_bfloat16>(dim), 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(dy.p),
        static_cast<const __nv_bfloat16 *>(y.p),
        static_cast<__nv_bfloat16 *>(dx.p), outer, dim);
  else if (inner == 1 && vec)
    softmaxGradRowVecKernel<<<rereadBlocks(outer, 8 * dim),
                              rowBlockThreads<float>(dim), 0, stream>>>(
        static_cast<const float *>(dy.p), static_cast<const float *>(y.p),
        static_cast<float *>(dx.p), outer, dim);
  else if (inner == 1)
    softmaxGradRowKernel<<<capBlocks(outer), kThreads, 0, stream>>>(dy, y, dx,
                                                                    outer, dim);
  else
    softmaxGradColumnKernel<<<blocksFor(outer * inner), kThreads, 0, stream>>>(
        dy, y, dx, outer, dim, inner);
  return launchCheck("softmax_grad kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
