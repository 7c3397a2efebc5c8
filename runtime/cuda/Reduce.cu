//===- Reduce.cu - CUDA kernels that reduce ------------------------*- CUDA
//-*-===//
//
// sum_to, the losses (cross_entropy, mse) and their gradient, softmax and
// layer/RMS norm with their gradients. Reductions are deterministic: a fixed
// tree inside a block and, where a result spans blocks, per-block partials
// summed by one block in a second kernel (no atomics on values).
//
// Block-wide helpers assume `blockDim.x == kThreads` (a multiple of 32) and
// that every thread of the block calls them (they synchronise).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaLaunch.h"

#include <cmath>

namespace loom::runtime::cuda {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 65535;

unsigned capBlocks(int64_t n) {
  return static_cast<unsigned>(n < kMaxBlocks ? (n > 0 ? n : 1) : kMaxBlocks);
}

template <typename T> __device__ __forceinline__ T warpSum(T v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

/// Sum over the block; every thread gets the result.
template <typename T> __device__ T blockSum(T v) {
  __shared__ T partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpSum(v);
  __syncthreads(); // a previous call's readers are done with `partial`
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x >> 5) ? partial[lane] : T(0);
    v = warpSum(v);
    if (lane == 0)
      partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

/// Maximum over the block; every thread gets the result.
__device__ float blockMax(float v) {
  __shared__ float partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x >> 5) ? partial[lane] : -INFINITY;
    v = warpMax(v);
    if (lane == 0)
      partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

__device__ void reportCheck(DataCheckRecord *rec, int check, long long pos,
                            long long value, long long limit) {
  if (atomicCAS(&rec->check, 0, check) == 0) {
    rec->position = pos;
    rec->value = value;
    rec->limit = limit;
  }
}

// --- sum_to ----------------------------------------------------------------

__device__ __forceinline__ int64_t keptBase(const SumToIndex &ix, int64_t j) {
  int64_t off = 0;
  for (int d = ix.keptRank - 1; d >= 0; --d) {
    off += (j % ix.keptDims[d]) * ix.keptStrides[d];
    j /= ix.keptDims[d];
  }
  return off;
}

__device__ __forceinline__ int64_t reducedOffset(const SumToIndex &ix,
                                                 int64_t k) {
  int64_t off = 0;
  for (int d = ix.redRank - 1; d >= 0; --d) {
    off += (k % ix.redDims[d]) * ix.redStrides[d];
    k /= ix.redDims[d];
  }
  return off;
}

/// One thread per output: coalesced when the kept dims are innermost (bias
/// gradients).
__global__ void sumToThreadKernel(const float *__restrict__ x,
                                  float *__restrict__ y, int64_t ny,
                                  SumToIndex ix) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < ny;
       j += int64_t(gridDim.x) * blockDim.x) {
    const float *base = x + keptBase(ix, j);
    float s = 0;
    for (int64_t k = 0; k < ix.reduced; ++k)
      s += base[reducedOffset(ix, k)];
    y[j] = s;
  }
}

/// One block per output: few outputs, each a long sum.
__global__ void sumToBlockKernel(const float *__restrict__ x,
                                 float *__restrict__ y, int64_t ny,
                                 SumToIndex ix) {
  for (int64_t j = blockIdx.x; j < ny; j += gridDim.x) {
    const float *base = x + keptBase(ix, j);
    float s = 0;
    for (int64_t k = threadIdx.x; k < ix.reduced; k += blockDim.x)
      s += base[reducedOffset(ix, k)];
    s = blockSum(s);
    if (threadIdx.x == 0)
      y[j] = s;
  }
}

// --- losses ------------------------------------------------------------------

__global__ void crossEntropyRowsKernel(const float *__restrict__ logits,
                                       const int64_t *__restrict__ target,
                                       float *__restrict__ rowLoss,
                                       int64_t rows, int64_t classes, int check,
                                       DataCheckRecord *rec) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *row = logits + r * classes;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      mx = fmaxf(mx, row[c]);
    mx = blockMax(mx);
    float s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += expf(row[c] - mx);
    s = blockSum(s);
    if (threadIdx.x == 0) {
      int64_t t = target[r];
      if (t < 0 || t >= classes) {
        reportCheck(rec, check, r, t, classes);
        rowLoss[r] = 0;
      } else {
        rowLoss[r] = mx + logf(s) - row[t];
      }
    }
  }
}

/// `out[0] = sum(values[0, n)) * scale`, in one block, accumulated in double.
template <typename T>
__global__ void finishSumKernel(const T *__restrict__ values, int64_t n,
                                double scale, float *__restrict__ out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += static_cast<double>(values[i]);
  s = blockSum(s);
  if (threadIdx.x == 0)
    out[0] = static_cast<float>(s * scale);
}

__global__ void crossEntropyGradKernel(const float *__restrict__ logits,
                                       const int64_t *__restrict__ target,
                                       float *__restrict__ grad, int64_t rows,
                                       int64_t classes, int check,
                                       DataCheckRecord *rec) {
  float invRows = 1.0f / static_cast<float>(rows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *row = logits + r * classes;
    float *g = grad + r * classes;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      mx = fmaxf(mx, row[c]);
    mx = blockMax(mx);
    float s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += expf(row[c] - mx);
    s = blockSum(s);
    int64_t t = target[r];
    bool valid = t >= 0 && t < classes;
    if (!valid && threadIdx.x == 0)
      reportCheck(rec, check, r, t, classes);
    float k = invRows / s;
    // g = (softmax - onehot) / rows
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      float p = expf(row[c] - mx);
      g[c] = c == t ? (p / s - 1.0f) * invRows : p * k;
    }
  }
}

__global__ void msePartialKernel(const float *__restrict__ pred,
                                 const float *__restrict__ target, int64_t n,
                                 double *__restrict__ partials) {
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    double d = static_cast<double>(pred[i]) - target[i];
    s += d * d;
  }
  s = blockSum(s);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = s;
}

// --- softmax -----------------------------------------------------------------

/// inner == 1: one block per contiguous row.
__global__ void softmaxRowKernel(const float *__restrict__ x,
                                 float *__restrict__ y, int64_t rows,
                                 int64_t dim) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *px = x + r * dim;
    float *py = y + r * dim;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      mx = fmaxf(mx, px[c]);
    mx = blockMax(mx);
    float s = 0;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      s += expf(px[c] - mx);
    s = blockSum(s);
    float inv = 1.0f / s;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      py[c] = expf(px[c] - mx) * inv;
  }
}

/// inner > 1: one thread per (outer, inner) column, striding by `inner`.
__global__ void softmaxColumnKernel(const float *__restrict__ x,
                                    float *__restrict__ y, int64_t outer,
                                    int64_t dim, int64_t inner) {
  int64_t cols = outer * inner;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < cols;
       j += int64_t(gridDim.x) * blockDim.x) {
    int64_t base = (j / inner) * dim * inner + j % inner;
    float mx = -INFINITY;
    for (int64_t c = 0; c < dim; ++c)
      mx = fmaxf(mx, x[base + c * inner]);
    float s = 0;
    for (int64_t c = 0; c < dim; ++c)
      s += expf(x[base + c * inner] - mx);
    float inv = 1.0f / s;
    for (int64_t c = 0; c < dim; ++c)
      y[base + c * inner] = expf(x[base + c * inner] - mx) * inv;
  }
}

__global__ void softmaxGradRowKernel(const float *__restrict__ dy,
                                     const float *__restrict__ y,
                                     float *__restrict__ dx, int64_t rows,
                                     int64_t dim) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *pdy = dy + r * dim, *py = y + r * dim;
    float s = 0;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      s += pdy[c] * py[c];
    s = blockSum(s);
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      dx[r * dim + c] = py[c] * (pdy[c] - s);
  }
}

__global__ void softmaxGradColumnKernel(const float *__restrict__ dy,
                                        const float *__restrict__ y,
                                        float *__restrict__ dx, int64_t outer,
                                        int64_t dim, int64_t inner) {
  int64_t cols = outer * inner;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < cols;
       j += int64_t(gridDim.x) * blockDim.x) {
    int64_t base = (j / inner) * dim * inner + j % inner;
    float s = 0;
    for (int64_t c = 0; c < dim; ++c)
      s += dy[base + c * inner] * y[base + c * inner];
    for (int64_t c = 0; c < dim; ++c) {
      int64_t i = base + c * inner;
      dx[i] = y[i] * (dy[i] - s);
    }
  }
}

// --- layer / RMS norm
// ----------------------------------------------------------

/// The row's mean (0 for RMS) and rstd, with the CPU kernel's two passes in
/// double.
__device__ void rowStats(const float *px, int64_t cols, float eps, bool rms,
                         float *mean, float *rstd) {
  double m = 0;
  if (!rms) {
    double s = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      s += px[c];
    m = blockSum(s) / cols;
  }
  double v = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    double d = px[c] - m;
    v += d * d;
  }
  v = blockSum(v) / cols;
  *mean = static_cast<float>(m);
  *rstd = static_cast<float>(1.0 / sqrt(v + eps));
}

__global__ void layerNormKernel(const float *__restrict__ x,
                                const float *__restrict__ scale,
                                const float *__restrict__ bias,
                                float *__restrict__ y, int64_t rows,
                                int64_t cols, float eps, bool rms) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *px = x + r * cols;
    float mean, rstd;
    rowStats(px, cols, eps, rms, &mean, &rstd);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = (px[c] - mean) * rstd * scale[c];
      y[r * cols + c] = bias ? v + bias[c] : v;
    }
  }
}

__global__ void layerNormGradRowKernel(const float *__restrict__ dy,
                                       const float *__restrict__ x,
                                       const float *__restrict__ scale,
                                       float *__restrict__ dx, int64_t rows,
                                       int64_t cols, float eps, bool rms,
                                       float *__restrict__ stats) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *px = x + r * cols, *pdy = dy + r * cols;
    float mean, rstd;
    rowStats(px, cols, eps, rms, &mean, &rstd);
    double sumG = 0, sumGX = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float g = pdy[c] * scale[c];
      sumG += g;
      sumGX += g * ((px[c] - mean) * rstd);
    }
    sumG = blockSum(sumG);
    sumGX = blockSum(sumGX);
    float a = static_cast<float>(sumGX / cols);
    float b = rms ? 0.0f : static_cast<float>(sumG / cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float xhat = (px[c] - mean) * rstd;
      dx[r * cols + c] = rstd * (pdy[c] * scale[c] - b - xhat * a);
    }
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

/// dscale / dbias: one thread per column, over all rows (coalesced).
__global__ void layerNormParamGradKernel(const float *__restrict__ dy,
                                         const float *__restrict__ x,
                                         const float *__restrict__ stats,
                                         float *__restrict__ dscale,
                                         float *__restrict__ dbias,
                                         int64_t rows, int64_t cols) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(gridDim.x) * blockDim.x) {
    double ds = 0, db = 0;
    for (int64_t r = 0; r < rows; ++r) {
      float d = dy[r * cols + c];
      float xhat = (x[r * cols + c] - stats[2 * r]) * stats[2 * r + 1];
      ds += d * xhat;
      db += d;
    }
    dscale[c] = static_cast<float>(ds);
    if (dbias)
      dbias[c] = static_cast<float>(db);
  }
}

} // namespace

Status launchSumTo(const float *x, float *y, int64_t ny,
                   const SumToIndex &index, cudaStream_t stream) {
  if (ny == 0)
    return Status::ok();
  if (ny >= 1024 || index.reduced <= 32)
    sumToThreadKernel<<<capBlocks((ny + kThreads - 1) / kThreads), kThreads, 0,
                        stream>>>(x, y, ny, index);
  else
    sumToBlockKernel<<<capBlocks(ny), kThreads, 0, stream>>>(x, y, ny, index);
  return launchCheck("sum_to kernel");
}

Status launchCrossEntropy(const float *logits, const int64_t *target,
                          float *loss, int64_t rows, int64_t classes,
                          float *rowLoss, int check, DataCheckRecord *record,
                          cudaStream_t stream) {
  if (rows == 0)
    return cudaCheck(cudaMemsetAsync(loss, 0, sizeof(float), stream),
                     "cudaMemsetAsync");
  crossEntropyRowsKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
      logits, target, rowLoss, rows, classes, check, record);
  LOOM_RETURN_IF_ERROR(launchCheck("cross_entropy kernel"));
  finishSumKernel<float>
      <<<1, kThreads, 0, stream>>>(rowLoss, rows, 1.0 / rows, loss);
  return launchCheck("cross_entropy mean kernel");
}

Status launchCrossEntropyGrad(const float *logits, const int64_t *target,
                              float *grad, int64_t rows, int64_t classes,
                              int check, DataCheckRecord *record,
                              cudaStream_t stream) {
  if (rows == 0)
    return Status::ok();
  crossEntropyGradKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
      logits, target, grad, rows, classes, check, record);
  return launchCheck("cross_entropy_grad kernel");
}

int64_t msePartials(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return b < 1 ? 1 : (b > 1024 ? 1024 : b);
}

Status launchMse(const float *pred, const float *target, float *loss, int64_t n,
                 double *partials, cudaStream_t stream) {
  if (n == 0)
    return cudaCheck(cudaMemsetAsync(loss, 0, sizeof(float), stream),
                     "cudaMemsetAsync");
  int64_t blocks = msePartials(n);
  msePartialKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      pred, target, n, partials);
  LOOM_RETURN_IF_ERROR(launchCheck("mse kernel"));
  finishSumKernel<double>
      <<<1, kThreads, 0, stream>>>(partials, blocks, 1.0 / n, loss);
  return launchCheck("mse mean kernel");
}

Status launchSoftmax(const float *x, float *y, int64_t outer, int64_t dim,
                     int64_t inner, cudaStream_t stream) {
  if (outer * dim * inner == 0)
    return Status::ok();
  if (inner == 1)
    softmaxRowKernel<<<capBlocks(outer), kThreads, 0, stream>>>(x, y, outer,
                                                                dim);
  else
    softmaxColumnKernel<<<capBlocks((outer * inner + kThreads - 1) / kThreads),
                          kThreads, 0, stream>>>(x, y, outer, dim, inner);
  return launchCheck("softmax kernel");
}

Status launchSoftmaxGrad(const float *dy, const float *y, float *dx,
                         int64_t outer, int64_t dim, int64_t inner,
                         cudaStream_t stream) {
  if (outer * dim * inner == 0)
    return Status::ok();
  if (inner == 1)
    softmaxGradRowKernel<<<capBlocks(outer), kThreads, 0, stream>>>(dy, y, dx,
                                                                    outer, dim);
  else
    softmaxGradColumnKernel<<<capBlocks((outer * inner + kThreads - 1) /
                                        kThreads),
                              kThreads, 0, stream>>>(dy, y, dx, outer, dim,
                                                     inner);
  return launchCheck("softmax_grad kernel");
}

Status launchLayerNorm(const float *x, const float *scale, const float *bias,
                       float *y, int64_t rows, int64_t cols, float eps,
                       bool rms, cudaStream_t stream) {
  if (rows * cols == 0)
    return Status::ok();
  layerNormKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
      x, scale, bias, y, rows, cols, eps, rms);
  return launchCheck("layer_norm kernel");
}

Status launchLayerNormGrad(const float *dy, const float *x, const float *scale,
                           float *dx, float *dscale, float *dbias, int64_t rows,
                           int64_t cols, float eps, bool rms, float *stats,
                           cudaStream_t stream) {
  if (cols == 0)
    return Status::ok();
  if (rows == 0) { // sums over no rows
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaMemsetAsync(dscale, 0, cols * sizeof(float), stream),
                  "cudaMemsetAsync"));
    if (dbias)
      LOOM_RETURN_IF_ERROR(
          cudaCheck(cudaMemsetAsync(dbias, 0, cols * sizeof(float), stream),
                    "cudaMemsetAsync"));
    return Status::ok();
  }
  layerNormGradRowKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
      dy, x, scale, dx, rows, cols, eps, rms, stats);
  LOOM_RETURN_IF_ERROR(launchCheck("layer_norm_grad kernel"));
  layerNormParamGradKernel<<<capBlocks((cols + kThreads - 1) / kThreads),
                             kThreads, 0, stream>>>(dy, x, stats, dscale, dbias,
                                                    rows, cols);
  return launchCheck("layer_norm_grad parameter kernel");
}

} // namespace loom::runtime::cuda
