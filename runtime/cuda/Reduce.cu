//===- Reduce.cu - CUDA sum_to and reduce_* ------------------------*- CUDA
//-*-===//
//
// sum_to and reduce_{sum,mean,max}. Reductions are deterministic: a fixed
// tree inside a block and, where a result spans blocks, per-chunk partials
// added in order by a second kernel (no atomics on values).
//
// The bias gradients (`x` a dense `[rows, cols]`, summed over rows) take
// the slab kernels of RowVec.cuh, templated on the storage: 16-byte packs
// of adjacent columns per thread, rows spread over row lanes and row
// chunks, about 1024 blocks. Other index patterns take the per-element
// `FloatIn` kernels: one thread per output (chunked over the reduced range
// when the innermost dim is kept), or one block per output.
//
// Block-wide helpers assume `blockDim.x` a multiple of 32 and every thread
// of the block calling them (they synchronise).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/RowVec.cuh"

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

/// The dense `[rows, cols]` column sums (RowVec.cuh): block `(slab, chunk)`
/// writes `partials[chunk][cols]`. `V` is 1 or the pack width of `T`.
template <ReduceKind K, typename T, int V>
__global__ void reduceRowsSlabKernel(const T *__restrict__ x,
                                     float *__restrict__ partials, int64_t rows,
                                     int64_t cols, int64_t chunks) {
  __shared__ float part[kSlabRows][kSlabCols * V];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t slab = int64_t(blockIdx.x) * kSlabCols * V;
  int64_t c0 = slab + int64_t(tx) * V;
  int64_t per = (rows + chunks - 1) / chunks;
  int64_t begin = blockIdx.y * per;
  int64_t end = min(rows, begin + per);
  float acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j)
    acc[j] = reduceInit<K>();
  if (c0 < cols) {
#pragma unroll 4
    for (int64_t r = begin + ty; r < end; r += kSlabRows) {
      float v[V];
      loadPack<T, V>(x + r * cols + c0, v);
#pragma unroll
      for (int j = 0; j < V; ++j)
        acc[j] = accumulate<K>(acc[j], v[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j)
    part[ty][tx * V + j] = acc[j];
  __syncthreads();
  for (int i = ty * kSlabCols + tx; i < kSlabCols * V;
       i += kSlabCols * kSlabRows) {
    if (slab + i >= cols)
      continue;
    float a = reduceInit<K>();
    for (int l = 0; l < kSlabRows; ++l)
      a = accumulate<K>(a, part[l][i]);
    partials[blockIdx.y * cols + slab + i] = a;
  }
}

/// The chunks of `reduceRowsSlabKernel` per column: row lane `ty` takes
/// chunks `ty, ty + kSlabRows, ...`, then the lanes in order.
template <ReduceKind K>
__global__ void reduceRowsFinishKernel(const float *__restrict__ partials,
                                       FloatOut y, int64_t cols, int64_t chunks,
                                       int64_t reduced) {
  __shared__ float part[kSlabRows][kSlabCols];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t c = int64_t(blockIdx.x) * kSlabCols + tx;
  float a = reduceInit<K>();
  if (c < cols)
    for (int64_t ch = ty; ch < chunks; ch += kSlabRows)
      a = accumulate<K>(a, partials[ch * cols + c]);
  part[ty][tx] = a;
  __syncthreads();
  if (ty == 0 && c < cols) {
    for (int l = 1; l < kSlabRows; ++l)
      a = accumulate<K>(a, part[l][tx]);
    store(y, c, finishReduce<K>(a, reduced));
  }
}

/// Whether `x` is a dense `[index.reduced, ny]` matrix summed over rows:
/// the kept dims innermost and contiguous, the reduced dims outside them.
bool denseRows(int64_t ny, const SumToIndex &index) {
  if (index.keptRank == 0 || index.redRank == 0)
    return false;
  int64_t stride = 1;
  for (int d = index.keptRank - 1; d >= 0; --d) {
    if (index.keptStrides[d] != stride)
      return false;
    stride *= index.keptDims[d];
  }
  for (int d = index.redRank - 1; d >= 0; --d) {
    if (index.redStrides[d] != stride)
      return false;
    stride *= index.redDims[d];
  }
  return stride == ny * index.reduced;
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
  if (denseRows(ny, index))
    return slabRowChunks(index.reduced, ny);
  bool innerKept =
      index.keptRank > 0 && index.keptStrides[index.keptRank - 1] == 1 &&
      (index.redRank == 0 || index.redStrides[index.redRank - 1] != 1);
  if (!innerKept || index.reduced < 128)
    return 0;
  int64_t c = chunksFor(index.reduced, ny);
  return c >= 2 ? c : 0;
}

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchReduce(ReduceKind kind, FloatIn x, FloatOut y, int64_t ny,
                    const SumToIndex &index, float *partials,
                    cudaStream_t stream) {
  if (ny == 0)
    return Status::ok();
  int64_t chunks = partials ? reduceChunks(ny, index) : 0;
  if (chunks > 0 && denseRows(ny, index)) {
    int64_t rows = index.reduced;
    bool packed = ny % (16 / elemBytes(x.e)) == 0 && alignedTo(x.p, 16);
    dim3 block(kSlabCols, kSlabRows);
    unsigned finishGrid =
        static_cast<unsigned>((ny + kSlabCols - 1) / kSlabCols);
    byStorage(x.e, [&](auto t) {
      using T = decltype(t);
      constexpr int V = kVec<T>;
      const T *xp = static_cast<const T *>(x.p);
      int64_t width = kSlabCols * (packed ? V : 1);
      dim3 grid(static_cast<unsigned>((ny + width - 1) / width),
                static_cast<unsigned>(chunks));
#define LOOM_REDUCE_CASE(name)                                                 \
  case ReduceKind::name:                                                       \
    if (packed)                                                                \
      reduceRowsSlabKernel<ReduceKind::name, T, V>                             \
          <<<grid, block, 0, stream>>>(xp, partials, rows, ny, chunks);        \
    else                                                                       \
      reduceRowsSlabKernel<ReduceKind::name, T, 1>                             \
          <<<grid, block, 0, stream>>>(xp, partials, rows, ny, chunks);        \
    reduceRowsFinishKernel<ReduceKind::name>                                   \
        <<<finishGrid, block, 0, stream>>>(partials, y, ny, chunks, rows);     \
    break;
      switch (kind) {
        LOOM_REDUCE_CASE(Sum)
        LOOM_REDUCE_CASE(Mean)
        LOOM_REDUCE_CASE(Max)
      }
#undef LOOM_REDUCE_CASE
    });
    return launchCheck("reduction kernel (rows)");
  }
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

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
