//===- Norm.cu - CUDA layer norm and RMS norm with gradients ------*- CUDA
//-*-===//
//
// layer_norm / rms_norm and their gradients over `rows` contiguous rows of
// `cols`. Rows up to 256 packs (2048 bf16 / 1024 f32 values) whose storage
// allows 16-byte packs take the warp kernels: one warp per row, the row held
// in registers (`M` packs a lane), the statistics in double as the CPU
// kernel computes them (two passes over the registers), each element read
// once from memory. The gradient's dscale / dbias are column sums over rows
// (RowVec.cuh: row-chunk partials in double, then the chunks in order, no
// atomics). Other shapes and mixed storage take the per-element `FloatIn`
// kernels, one block per row.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/RowVec.cuh"

#include <cmath>

namespace loom::runtime::cuda {

namespace {

/// Mean (0 with `rms`) and rstd of a warp's row held as `M` packs a lane
/// (pack `k` of the lane is pack `lane + 32 k` of the row, present when
/// below `packs`).
template <int M, int V>
__device__ __forceinline__ void
warpRowStats(const float (&v)[M][V], int lane, int packs, int64_t cols,
             float eps, bool rms, float *mean, float *rstd) {
  double m = 0;
  if (!rms) {
    double s = 0;
#pragma unroll
    for (int k = 0; k < M; ++k)
      if (lane + 32 * k < packs)
#pragma unroll
        for (int j = 0; j < V; ++j)
          s += v[k][j];
    m = warpSum(s) / cols;
  }
  double q = 0;
#pragma unroll
  for (int k = 0; k < M; ++k)
    if (lane + 32 * k < packs)
#pragma unroll
      for (int j = 0; j < V; ++j) {
        double d = v[k][j] - m;
        q += d * d;
      }
  q = warpSum(q) / cols;
  *mean = static_cast<float>(m);
  *rstd = static_cast<float>(1.0 / sqrt(q + eps));
}

/// One warp per row; `T` is the storage of x and y, `P` of scale and bias.
template <typename T, typename P, int M>
__global__ void
layerNormWarpKernel(const T *__restrict__ x, const P *__restrict__ scale,
                    const P *__restrict__ bias, T *__restrict__ y, int64_t rows,
                    int64_t cols, float eps, bool rms) {
  constexpr int V = kVec<T>;
  int lane = threadIdx.x & 31;
  int64_t warps = blockDim.x >> 5;
  int packs = static_cast<int>(cols / V);
  for (int64_t r = blockIdx.x * warps + (threadIdx.x >> 5); r < rows;
       r += int64_t(gridDim.x) * warps) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    float v[M][V];
#pragma unroll
    for (int k = 0; k < M; ++k)
      if (lane + 32 * k < packs)
        loadPack<T, V>(xr + (lane + 32 * k) * V, v[k]);
    float mean, rstd;
    warpRowStats<M, V>(v, lane, packs, cols, eps, rms, &mean, &rstd);
#pragma unroll
    for (int k = 0; k < M; ++k) {
      int c = (lane + 32 * k) * V;
      if (lane + 32 * k < packs) {
        float sc[V], o[V];
        loadPack<P, V>(scale + c, sc);
#pragma unroll
        for (int j = 0; j < V; ++j)
          o[j] = (v[k][j] - mean) * rstd * sc[j];
        if (bias) {
          float b[V];
          loadPack<P, V>(bias + c, b);
#pragma unroll
          for (int j = 0; j < V; ++j)
            o[j] = o[j] + b[j];
        }
        storePack<T, V>(yr + c, o);
      }
    }
  }
}

/// dx of one row per warp, and the row's mean and rstd into `stats` for
/// the parameter sums.
template <typename T, typename P, int M>
__global__ void
layerNormGradWarpKernel(const T *__restrict__ dy, const T *__restrict__ x,
                        const P *__restrict__ scale, T *__restrict__ dx,
                        int64_t rows, int64_t cols, float eps, bool rms,
                        float *__restrict__ stats) {
  constexpr int V = kVec<T>;
  int lane = threadIdx.x & 31;
  int64_t warps = blockDim.x >> 5;
  int packs = static_cast<int>(cols / V);
  for (int64_t r = blockIdx.x * warps + (threadIdx.x >> 5); r < rows;
       r += int64_t(gridDim.x) * warps) {
    const T *xr = x + r * cols, *dyr = dy + r * cols;
    float v[M][V], g[M][V];
#pragma unroll
    for (int k = 0; k < M; ++k)
      if (lane + 32 * k < packs) {
        loadPack<T, V>(xr + (lane + 32 * k) * V, v[k]);
        loadPack<T, V>(dyr + (lane + 32 * k) * V, g[k]);
      }
    float mean, rstd;
    warpRowStats<M, V>(v, lane, packs, cols, eps, rms, &mean, &rstd);
    // g = dy * scale; v = xhat from here on.
    double sumG = 0, sumGX = 0;
#pragma unroll
    for (int k = 0; k < M; ++k)
      if (lane + 32 * k < packs) {
        float sc[V];
        loadPack<P, V>(scale + (lane + 32 * k) * V, sc);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          g[k][j] = g[k][j] * sc[j];
          v[k][j] = (v[k][j] - mean) * rstd;
          sumG += g[k][j];
          sumGX += g[k][j] * v[k][j];
        }
      }
    sumG = warpSum(sumG);
    sumGX = warpSum(sumGX);
    float a = static_cast<float>(sumGX / cols);
    float b = rms ? 0.0f : static_cast<float>(sumG / cols);
#pragma unroll
    for (int k = 0; k < M; ++k)
      if (lane + 32 * k < packs) {
        float o[V];
#pragma unroll
        for (int j = 0; j < V; ++j)
          o[j] = rstd * (g[k][j] - b - v[k][j] * a);
        storePack<T, V>(dx + r * cols + (lane + 32 * k) * V, o);
      }
    if (lane == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

/// dscale / dbias partials (RowVec.cuh's column sums): block `(slab,
/// chunk)`, `partials` is [2][chunks][cols] in double. `V` is 1 or the
/// pack width of `T`.
template <typename T, int V>
__global__ void
layerNormParamSlabKernel(const T *__restrict__ dy, const T *__restrict__ x,
                         const float *__restrict__ stats,
                         double *__restrict__ partials, int64_t rows,
                         int64_t cols, int64_t chunks) {
  __shared__ double sds[kSlabRows][kSlabCols * V],
      sdb[kSlabRows][kSlabCols * V];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t slab = int64_t(blockIdx.x) * kSlabCols * V;
  int64_t c0 = slab + int64_t(tx) * V;
  int64_t per = (rows + chunks - 1) / chunks;
  int64_t begin = blockIdx.y * per;
  int64_t end = min(rows, begin + per);
  float ds[V] = {}, db[V] = {};
  if (c0 < cols) {
#pragma unroll 4
    for (int64_t r = begin + ty; r < end; r += kSlabRows) {
      float d[V], xv[V];
      loadPack<T, V>(dy + r * cols + c0, d);
      loadPack<T, V>(x + r * cols + c0, xv);
      float mean = stats[2 * r], rstd = stats[2 * r + 1];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        ds[j] += d[j] * ((xv[j] - mean) * rstd);
        db[j] += d[j];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    sds[ty][tx * V + j] = ds[j];
    sdb[ty][tx * V + j] = db[j];
  }
  __syncthreads();
  for (int i = ty * kSlabCols + tx; i < kSlabCols * V;
       i += kSlabCols * kSlabRows) {
    if (slab + i >= cols)
      continue;
    double s = 0, b = 0;
    for (int l = 0; l < kSlabRows; ++l) {
      s += sds[l][i];
      b += sdb[l][i];
    }
    partials[blockIdx.y * cols + slab + i] = s;
    partials[(chunks + blockIdx.y) * cols + slab + i] = b;
  }
}

/// dscale / dbias from the slab partials: block of `kSlabCols x kSlabRows`,
/// row lane `ty` adds chunks `ty, ty + kSlabRows, ...`, then the lanes in
/// order.
__global__ void
layerNormParamSlabFinishKernel(const double *__restrict__ partials,
                               FloatOut dscale, FloatOut dbias, int64_t cols,
                               int64_t chunks) {
  __shared__ double sds[kSlabRows][kSlabCols], sdb[kSlabRows][kSlabCols];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t c = int64_t(blockIdx.x) * kSlabCols + tx;
  double ds = 0, db = 0;
  if (c < cols)
    for (int64_t ch = ty; ch < chunks; ch += kSlabRows) {
      ds += partials[ch * cols + c];
      db += partials[(chunks + ch) * cols + c];
    }
  sds[ty][tx] = ds;
  sdb[ty][tx] = db;
  __syncthreads();
  if (ty == 0 && c < cols) {
    for (int l = 1; l < kSlabRows; ++l) {
      ds += sds[l][tx];
      db += sdb[l][tx];
    }
    store(dscale, c, static_cast<float>(ds));
    if (dbias.p)
      store(dbias, c, static_cast<float>(db));
  }
}

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

/// Any storage: one block per row (the fallback of the warp kernels).
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

/// Warps (rows) a block of the warp kernels.
constexpr int kNormWarps = 4;

/// Packs a lane of the warp kernels for `cols` columns of `e` (0: the row
/// does not fit, take the block kernels).
int warpPacksPerLane(int64_t cols, Elem e) {
  int64_t packs = cols / (16 / elemBytes(e));
  return packs <= 32 * 4 ? 4 : (packs <= 32 * 8 ? 8 : 0);
}

/// Whether the warp kernels read `cols`-wide rows of `e` at `p` as packs.
bool packedRows(const void *p, int64_t cols, Elem e) {
  return p && cols % (16 / elemBytes(e)) == 0 && alignedTo(p, 16);
}

/// Whether a parameter vector of storage `pe` at `p` can be read in the
/// warp kernels' packs (of the rows' storage `e`).
bool packedParam(const void *p, Elem pe, Elem e) {
  int64_t bytes = elemBytes(pe) * (16 / elemBytes(e));
  return !p || alignedTo(p, bytes < 16 ? bytes : 16);
}

} // namespace

int64_t layerNormGradChunks(int64_t rows, int64_t cols) {
  return slabRowChunks(rows, cols);
}

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchLayerNorm(FloatIn x, FloatIn scale, FloatIn bias, FloatOut y,
                       int64_t rows, int64_t cols, float eps, bool rms,
                       cudaStream_t stream) {
  if (rows * cols == 0)
    return Status::ok();
  int m = warpPacksPerLane(cols, x.e);
  bool warp = m > 0 && x.e == y.e && (!bias.p || bias.e == scale.e) &&
              packedRows(x.p, cols, x.e) && packedRows(y.p, cols, y.e) &&
              packedParam(scale.p, scale.e, x.e) &&
              packedParam(bias.p, bias.e, x.e);
  if (!warp) {
    layerNormKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
        x, scale, bias, y, rows, cols, eps, rms);
    return launchCheck("layer_norm kernel");
  }
  unsigned grid = capBlocks((rows + kNormWarps - 1) / kNormWarps);
  byStorage(x.e, [&](auto t) {
    using T = decltype(t);
    byStorage(scale.e, [&](auto q) {
      using P = decltype(q);
      const T *xp = static_cast<const T *>(x.p);
      const P *sp = static_cast<const P *>(scale.p);
      const P *bp = static_cast<const P *>(bias.p);
      T *yp = static_cast<T *>(y.p);
      if (m == 4)
        layerNormWarpKernel<T, P, 4><<<grid, 32 * kNormWarps, 0, stream>>>(
            xp, sp, bp, yp, rows, cols, eps, rms);
      else
        layerNormWarpKernel<T, P, 8><<<grid, 32 * kNormWarps, 0, stream>>>(
            xp, sp, bp, yp, rows, cols, eps, rms);
    });
  });
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
  int m = warpPacksPerLane(cols, x.e);
  bool warp = m > 0 && dy.e == x.e && dx.e == x.e &&
              packedRows(dy.p, cols, x.e) && packedRows(x.p, cols, x.e) &&
              packedRows(dx.p, cols, x.e) && packedParam(scale.p, scale.e, x.e);
  if (warp) {
    unsigned grid = capBlocks((rows + kNormWarps - 1) / kNormWarps);
    byStorage(x.e, [&](auto t) {
      using T = decltype(t);
      byStorage(scale.e, [&](auto q) {
        using P = decltype(q);
        const T *dyp = static_cast<const T *>(dy.p);
        const T *xp = static_cast<const T *>(x.p);
        const P *sp = static_cast<const P *>(scale.p);
        T *dxp = static_cast<T *>(dx.p);
        if (m == 4)
          layerNormGradWarpKernel<T, P, 4>
              <<<grid, 32 * kNormWarps, 0, stream>>>(dyp, xp, sp, dxp, rows,
                                                     cols, eps, rms, stats);
        else
          layerNormGradWarpKernel<T, P, 8>
              <<<grid, 32 * kNormWarps, 0, stream>>>(dyp, xp, sp, dxp, rows,
                                                     cols, eps, rms, stats);
      });
    });
  } else {
    layerNormGradRowKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
        dy, x, scale, dx, rows, cols, eps, rms, stats);
  }
  LOOM_RETURN_IF_ERROR(launchCheck("layer_norm_grad kernel"));
  int64_t chunks = layerNormGradChunks(rows, cols);
  if (dy.e == x.e) {
    bool packed = packedRows(dy.p, cols, x.e) && packedRows(x.p, cols, x.e);
    byStorage(x.e, [&](auto t) {
      using T = decltype(t);
      constexpr int V = kVec<T>;
      const T *dyp = static_cast<const T *>(dy.p);
      const T *xp = static_cast<const T *>(x.p);
      int64_t width = kSlabCols * (packed ? V : 1);
      dim3 grid(static_cast<unsigned>((cols + width - 1) / width),
                static_cast<unsigned>(chunks));
      dim3 block(kSlabCols, kSlabRows);
      if (packed)
        layerNormParamSlabKernel<T, V><<<grid, block, 0, stream>>>(
            dyp, xp, stats, partials, rows, cols, chunks);
      else
        layerNormParamSlabKernel<T, 1><<<grid, block, 0, stream>>>(
            dyp, xp, stats, partials, rows, cols, chunks);
    });
  } else {
    layerNormParamPartialKernel<<<blocksFor(chunks * cols), kThreads, 0,
                                  stream>>>(dy, x, stats, partials, rows, cols,
                                            chunks);
  }
  LOOM_RETURN_IF_ERROR(launchCheck("layer_norm_grad parameter kernel"));
  layerNormParamSlabFinishKernel<<<static_cast<unsigned>(
                                       (cols + kSlabCols - 1) / kSlabCols),
                                   dim3(kSlabCols, kSlabRows), 0, stream>>>(
      partials, dscale, dbias, cols, chunks);
  return launchCheck("layer_norm_grad parameter finish kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
