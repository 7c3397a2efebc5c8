//===- Reduce.cu - CUDA kernels that reduce ------------------------*- CUDA
//-*-===//
//
// sum_to and reduce_*, the losses (cross_entropy, mse) and their gradient,
// softmax and layer/RMS norm with their gradients. Reductions are
// deterministic: a fixed tree inside a block and, where a result spans
// blocks, per-block partials summed by one block in a second kernel (no
// atomics on values).
//
// Block-wide helpers assume `blockDim.x == kThreads` (a multiple of 32) and
// that every thread of the block calls them (they synchronise).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaElem.cuh"

#include <cmath>

namespace loom::runtime::cuda {

namespace {

// --- sum_to ------------------------------------------------------------------

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

/// Accumulates one value into a running sum or maximum (NaN propagates, as
/// the CPU kernel's `maxOf`).
template <ReduceKind K>
__device__ __forceinline__ float accumulate(float acc, float v) {
  if constexpr (K == ReduceKind::Max)
    return (v > acc || isnan(v)) ? v : acc;
  else
    return acc + v;
}

template <ReduceKind K> __device__ __forceinline__ float reduceInit() {
  return K == ReduceKind::Max ? -INFINITY : 0.0f;
}

template <ReduceKind K>
__device__ __forceinline__ float finishReduce(float acc, int64_t count) {
  return K == ReduceKind::Mean ? acc / static_cast<float>(count) : acc;
}

/// One thread per output: coalesced when the kept dims are innermost (bias
/// gradients).
template <ReduceKind K>
__global__ void reduceThreadKernel(FloatIn x, FloatOut y, int64_t ny,
                                   SumToIndex ix) {
  LOOM_GRID_STRIDE(j, ny) {
    int64_t base = keptBase(ix, j);
    float s = reduceInit<K>();
    for (int64_t k = 0; k < ix.reduced; ++k)
      s = accumulate<K>(s, load(x, base + reducedOffset(ix, k)));
    store(y, j, finishReduce<K>(s, ix.reduced));
  }
}

/// First pass of the two-pass reduction: chunk `c` of the reduced range for
/// output `j`, one thread per (c, j); consecutive threads take consecutive
/// outputs, so the reads coalesce when the kept dims are innermost.
template <ReduceKind K>
__global__ void reduceChunkKernel(FloatIn x, float *__restrict__ partials,
                                  int64_t ny, int64_t chunks, SumToIndex ix) {
  int64_t per = (ix.reduced + chunks - 1) / chunks;
  LOOM_GRID_STRIDE(t, chunks * ny) {
    int64_t c = t / ny, j = t - c * ny;
    int64_t base = keptBase(ix, j);
    int64_t end = min(ix.reduced, (c + 1) * per);
    float s = reduceInit<K>();
    for (int64_t k = c * per; k < end; ++k)
      s = accumulate<K>(s, load(x, base + reducedOffset(ix, k)));
    partials[t] = s;
  }
}

/// Second pass: each output combines its chunks in order.
template <ReduceKind K>
__global__ void reduceFinishKernel(const float *__restrict__ partials,
                                   FloatOut y, int64_t ny, int64_t chunks,
                                   int64_t reduced) {
  LOOM_GRID_STRIDE(j, ny) {
    float s = reduceInit<K>();
    for (int64_t c = 0; c < chunks; ++c)
      s = accumulate<K>(s, partials[c * ny + j]);
    store(y, j, finishReduce<K>(s, reduced));
  }
}

/// One block per output: few outputs, each a long reduction.
template <ReduceKind K>
__global__ void reduceBlockKernel(FloatIn x, FloatOut y, int64_t ny,
                                  SumToIndex ix) {
  for (int64_t j = blockIdx.x; j < ny; j += gridDim.x) {
    int64_t base = keptBase(ix, j);
    float s = reduceInit<K>();
    for (int64_t k = threadIdx.x; k < ix.reduced; k += blockDim.x)
      s = accumulate<K>(s, load(x, base + reducedOffset(ix, k)));
    if constexpr (K == ReduceKind::Max) {
      // fmaxf drops NaN: carry "some thread saw NaN" separately.
      float nan = blockSum(isnan(s) ? 1.0f : 0.0f);
      s = blockMax(s);
      if (nan > 0)
        s = NAN;
    } else {
      s = blockSum(s);
    }
    if (threadIdx.x == 0)
      store(y, j, finishReduce<K>(s, ix.reduced));
  }
}

// --- losses ------------------------------------------------------------------

__global__ void crossEntropyRowsKernel(FloatIn logits,
                                       const int64_t *__restrict__ target,
                                       float *__restrict__ rowLoss,
                                       int64_t rows, int64_t classes, int check,
                                       DataCheckRecord *rec) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t row = r * classes;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      mx = fmaxf(mx, load(logits, row + c));
    mx = blockMax(mx);
    float s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += expf(load(logits, row + c) - mx);
    s = blockSum(s);
    if (threadIdx.x == 0) {
      int64_t t = target[r];
      if (t < 0 || t >= classes) {
        reportCheck(rec, check, r, t, classes);
        rowLoss[r] = 0;
      } else {
        rowLoss[r] = mx + logf(s) - load(logits, row + t);
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

__global__ void crossEntropyGradKernel(FloatIn logits,
                                       const int64_t *__restrict__ target,
                                       FloatOut grad, int64_t rows,
                                       int64_t classes, int check,
                                       DataCheckRecord *rec) {
  float invRows = 1.0f / static_cast<float>(rows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t row = r * classes;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      mx = fmaxf(mx, load(logits, row + c));
    mx = blockMax(mx);
    float s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += expf(load(logits, row + c) - mx);
    s = blockSum(s);
    int64_t t = target[r];
    bool valid = t >= 0 && t < classes;
    if (!valid && threadIdx.x == 0)
      reportCheck(rec, check, r, t, classes);
    float k = invRows / s;
    // g = (softmax - onehot) / rows
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      float p = expf(load(logits, row + c) - mx);
      store(grad, row + c, c == t ? (p / s - 1.0f) * invRows : p * k);
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

// --- layer / RMS norm --------------------------------------------------------

/// The row's mean (0 for RMS) and rstd, with the CPU kernel's two passes in
/// double.
__device__ void rowStats(FloatIn x, int64_t row, int64_t cols, float eps,
                         bool rms, float *mean, float *rstd) {
  double m = 0;
  if (!rms) {
    double s = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      s += load(x, row + c);
    m = blockSum(s) / cols;
  }
  double v = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    double d = load(x, row + c) - m;
    v += d * d;
  }
  v = blockSum(v) / cols;
  *mean = static_cast<float>(m);
  *rstd = static_cast<float>(1.0 / sqrt(v + eps));
}

__global__ void layerNormKernel(FloatIn x, FloatIn scale, FloatIn bias,
                                FloatOut y, int64_t rows, int64_t cols,
                                float eps, bool rms) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t row = r * cols;
    float mean, rstd;
    rowStats(x, row, cols, eps, rms, &mean, &rstd);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = (load(x, row + c) - mean) * rstd * load(scale, c);
      store(y, row + c, bias.p ? v + load(bias, c) : v);
    }
  }
}

__global__ void layerNormGradRowKernel(FloatIn dy, FloatIn x, FloatIn scale,
                                       FloatOut dx, int64_t rows, int64_t cols,
                                       float eps, bool rms,
                                       float *__restrict__ stats) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t row = r * cols;
    float mean, rstd;
    rowStats(x, row, cols, eps, rms, &mean, &rstd);
    double sumG = 0, sumGX = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float g = load(dy, row + c) * load(scale, c);
      sumG += g;
      sumGX += g * ((load(x, row + c) - mean) * rstd);
    }
    sumG = blockSum(sumG);
    sumGX = blockSum(sumGX);
    float a = static_cast<float>(sumGX / cols);
    float b = rms ? 0.0f : static_cast<float>(sumG / cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float xhat = (load(x, row + c) - mean) * rstd;
      store(dx, row + c,
            rstd * (load(dy, row + c) * load(scale, c) - b - xhat * a));
    }
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

/// dscale / dbias partials: one thread per (row chunk, column), coalesced
/// over columns; `partials` is [2][chunks][cols] in double.
__global__ void layerNormParamPartialKernel(FloatIn dy, FloatIn x,
                                            const float *__restrict__ stats,
                                            double *__restrict__ partials,
                                            int64_t rows, int64_t cols,
                                            int64_t chunks) {
  int64_t per = (rows + chunks - 1) / chunks;
  LOOM_GRID_STRIDE(t, chunks * cols) {
    int64_t ch = t / cols, c = t - ch * cols;
    int64_t end = min(rows, (ch + 1) * per);
    double ds = 0, db = 0;
    for (int64_t r = ch * per; r < end; ++r) {
      float d = load(dy, r * cols + c);
      float xhat = (load(x, r * cols + c) - stats[2 * r]) * stats[2 * r + 1];
      ds += d * xhat;
      db += d;
    }
    partials[t] = ds;
    partials[chunks * cols + t] = db;
  }
}

/// dscale / dbias: each column sums its chunks in order.
__global__ void layerNormParamFinishKernel(const double *__restrict__ partials,
                                           FloatOut dscale, FloatOut dbias,
                                           int64_t cols, int64_t chunks) {
  LOOM_GRID_STRIDE(c, cols) {
    double ds = 0, db = 0;
    for (int64_t ch = 0; ch < chunks; ++ch) {
      ds += partials[ch * cols + c];
      db += partials[(chunks + ch) * cols + c];
    }
    store(dscale, c, static_cast<float>(ds));
    if (dbias.p)
      store(dbias, c, static_cast<float>(db));
  }
}

/// Chunks for `reduced` values per output over `outputs` outputs: about
/// 2^18 threads in the first pass, at least 32 values a chunk.
int64_t chunksFor(int64_t reduced, int64_t outputs) {
  int64_t byLength = (reduced + 31) / 32;
  int64_t byThreads = (int64_t(1) << 18) / (outputs > 0 ? outputs : 1);
  int64_t c = byLength < byThreads ? byLength : byThreads;
  return c < 1 ? 1 : c;
}

} // namespace

int64_t reduceChunks(int64_t ny, const SumToIndex &index) {
  bool innerKept =
      index.keptRank > 0 && index.keptStrides[index.keptRank - 1] == 1 &&
      (index.redRank == 0 || index.redStrides[index.redRank - 1] != 1);
  if (!innerKept || index.reduced < 128)
    return 0;
  int64_t c = chunksFor(index.reduced, ny);
  return c >= 2 ? c : 0;
}

int64_t layerNormGradChunks(int64_t rows, int64_t cols) {
  return chunksFor(rows, cols);
}

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchReduce(ReduceKind kind, FloatIn x, FloatOut y, int64_t ny,
                    const SumToIndex &index, float *partials,
                    cudaStream_t stream) {
  if (ny == 0)
    return Status::ok();
  int64_t chunks = partials ? reduceChunks(ny, index) : 0;
  if (chunks > 0) {
#define LOOM_REDUCE_CASE(name)                                                 \
  case ReduceKind::name:                                                       \
    reduceChunkKernel<ReduceKind::name>                                        \
        <<<blocksFor(chunks *ny), kThreads, 0, stream>>>(x, partials, ny,      \
                                                         chunks, index);       \
    LOOM_RETURN_IF_ERROR(launchCheck("reduction kernel (chunks)"));            \
    reduceFinishKernel<ReduceKind::name>                                       \
        <<<blocksFor(ny), kThreads, 0, stream>>>(partials, y, ny, chunks,      \
                                                 index.reduced);               \
    break;
    switch (kind) {
      LOOM_REDUCE_CASE(Sum)
      LOOM_REDUCE_CASE(Mean)
      LOOM_REDUCE_CASE(Max)
    }
#undef LOOM_REDUCE_CASE
    return launchCheck("reduction kernel (finish)");
  }
  bool perThread = ny >= 1024 || index.reduced <= 32;
  unsigned grid = perThread ? blocksFor(ny) : capBlocks(ny);
#define LOOM_REDUCE_CASE(name)                                                 \
  case ReduceKind::name:                                                       \
    if (perThread)                                                             \
      reduceThreadKernel<ReduceKind::name>                                     \
          <<<grid, kThreads, 0, stream>>>(x, y, ny, index);                    \
    else                                                                       \
      reduceBlockKernel<ReduceKind::name>                                      \
          <<<grid, kThreads, 0, stream>>>(x, y, ny, index);                    \
    break;
  switch (kind) {
    LOOM_REDUCE_CASE(Sum)
    LOOM_REDUCE_CASE(Mean)
    LOOM_REDUCE_CASE(Max)
  }
#undef LOOM_REDUCE_CASE
  return launchCheck("reduction kernel");
}

Status launchCrossEntropy(FloatIn logits, const int64_t *target, float *loss,
                          int64_t rows, int64_t classes, float *rowLoss,
                          int check, DataCheckRecord *record,
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

Status launchCrossEntropyGrad(FloatIn logits, const int64_t *target,
                              FloatOut grad, int64_t rows, int64_t classes,
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

Status launchSoftmax(FloatIn x, FloatOut y, int64_t outer, int64_t dim,
                     int64_t inner, cudaStream_t stream) {
  if (outer * dim * inner == 0)
    return Status::ok();
  if (inner == 1)
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
  if (inner == 1)
    softmaxGradRowKernel<<<capBlocks(outer), kThreads, 0, stream>>>(dy, y, dx,
                                                                    outer, dim);
  else
    softmaxGradColumnKernel<<<blocksFor(outer * inner), kThreads, 0, stream>>>(
        dy, y, dx, outer, dim, inner);
  return launchCheck("softmax_grad kernel");
}

Status launchLayerNorm(FloatIn x, FloatIn scale, FloatIn bias, FloatOut y,
                       int64_t rows, int64_t cols, float eps, bool rms,
                       cudaStream_t stream) {
  if (rows * cols == 0)
    return Status::ok();
  layerNormKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
      x, scale, bias, y, rows, cols, eps, rms);
  return launchCheck("layer_norm kernel");
}

Status launchLayerNormGrad(FloatIn dy, FloatIn x, FloatIn scale, FloatOut dx,
                           FloatOut dscale, FloatOut dbias, int64_t rows,
                           int64_t cols, float eps, bool rms, float *stats,
                           double *partials, cudaStream_t stream) {
  if (cols == 0)
    return Status::ok();
  if (rows == 0) { // sums over no rows
    LOOM_RETURN_IF_ERROR(cudaCheck(
        cudaMemsetAsync(dscale.p, 0, cols * elemBytes(dscale.e), stream),
        "cudaMemsetAsync"));
    if (dbias.p)
      LOOM_RETURN_IF_ERROR(cudaCheck(
          cudaMemsetAsync(dbias.p, 0, cols * elemBytes(dbias.e), stream),
          "cudaMemsetAsync"));
    return Status::ok();
  }
  layerNormGradRowKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
      dy, x, scale, dx, rows, cols, eps, rms, stats);
  LOOM_RETURN_IF_ERROR(launchCheck("layer_norm_grad kernel"));
  int64_t chunks = layerNormGradChunks(rows, cols);
  layerNormParamPartialKernel<<<blocksFor(chunks * cols), kThreads, 0,
                                stream>>>(dy, x, stats, partials, rows, cols,
                                          chunks);
  LOOM_RETURN_IF_ERROR(launchCheck("layer_norm_grad parameter kernel"));
  layerNormParamFinishKernel<<<blocksFor(cols), kThreads, 0, stream>>>(
      partials, dscale, dbias, cols, chunks);
  return launchCheck("layer_norm_grad parameter finish kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
