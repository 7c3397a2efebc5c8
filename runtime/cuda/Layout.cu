//===- Layout.cu - Kernels that move elements --------------------*- CUDA
//-*-===//
//
// One strided copy serves transpose, expand, slice, slice_grad and concat: each
// output element's source and destination offsets come from per-dim strides.
// When source and destination share a storage, the copy moves bytes
// (`chunkCopyKernel`): size-1 dims dropped, adjacent dims merged (CopyMerge.h,
// also slice_grad's bind), and where the innermost dim is contiguous on both
// sides (a `[0, 2, 1, 3]` head transpose, a q/k/v slice, a concat) its runs
// move as the widest chunks (16, 8, 4 or 2 bytes) that the run length, the
// strides and both pointers allow; the offsets of a chunk come from 32-bit
// divisions by launch-invariant divisors (`FastDiv`), one per outer dim.
// Otherwise (a storage change, offsets past 2^31 chunks) the element kernel
// (`stridedCopyKernel`) does the index math per element, in 32 bits when the
// sizes allow, 64 otherwise. A transpose that moves the innermost dim goes
// through 32x32 shared-memory tiles instead. slice_grad of a window of whole
// rows (the q/k/v split's gradient) writes its zeros and its window in one
// chunked pass (`padRowsKernel`). Also select, convert (16-byte packs between
// f32 and bf16) and gather (gather_grad is in Gather.cu).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CopyMerge.h"
#include "runtime/cuda/CudaElem.cuh"

#include <cstdint>

namespace loom::runtime::cuda {

namespace {

template <typename I>
__global__ void stridedCopyKernel(FloatIn src, FloatOut dst, I n,
                                  CopyIndex ix) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x) {
    I rem = i, s = 0, d = 0;
    for (int k = ix.rank - 1; k >= 0; --k) {
      I dim = static_cast<I>(ix.dims[k]);
      I idx = rem % dim;
      rem /= dim;
      s += idx * static_cast<I>(ix.srcStride[k]);
      d += idx * static_cast<I>(ix.dstStride[k]);
    }
    store(dst, d, load(src, s));
  }
}

/// A strided copy in chunks of `chunkBytes`: `dims` (chunks, innermost
/// last) with source and destination strides in chunks, all offsets below
/// 2^31.
struct ChunkCopy {
  int rank = 0, chunkBytes = 0;
  uint32_t n = 0;
  FastDiv dims[kMaxDims];
  uint32_t srcStride[kMaxDims] = {}, dstStride[kMaxDims] = {};
};

template <typename C>
__global__ void chunkCopyKernel(const C *src, C *dst, ChunkCopy p) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n;
       i += gridDim.x * blockDim.x) {
    uint32_t rem = i, s = 0, d = 0;
#pragma unroll
    for (int k = kMaxDims - 1; k > 0; --k) {
      if (k < p.rank) {
        uint32_t q = p.dims[k].div(rem);
        uint32_t idx = rem - q * p.dims[k].d;
        rem = q;
        s += idx * p.srcStride[k];
        d += idx * p.dstStride[k];
      }
    }
    dst[d + rem * p.dstStride[0]] = src[s + rem * p.srcStride[0]];
  }
}

/// `launchPadRows` in chunks: `n` chunks of `dx`, rows of `rowLen.d`, the
/// window `[start, start + len)` (all in chunks).
struct PadRows {
  int chunkBytes = 0;
  uint32_t n = 0, start = 0, len = 0;
  FastDiv rowLen;
};

template <typename C>
__global__ void padRowsKernel(const C *dy, C *dx, PadRows p) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n;
       i += gridDim.x * blockDim.x) {
    uint32_t r = p.rowLen.div(i);
    uint32_t c = i - r * p.rowLen.d - p.start; // wraps when left of the window
    C v{};
    if (c < p.len)
      v = dy[r * p.len + c];
    dx[i] = v;
  }
}

constexpr int kTile = 32, kTileRows = 8;

/// Block (32, 8) per 32x32 tile of one batch entry: reads rows of the
/// source (contiguous along `i`), writes rows of the destination
/// (contiguous along `j`). The +1 column keeps the transposed read of the
/// tile free of bank conflicts.
template <typename T>
__device__ __forceinline__ float loadAt(const T *p, int64_t i) {
  return toFloat(p[i]);
}
__device__ __forceinline__ float loadAt(FloatIn x, int64_t i) {
  return load(x, i);
}
template <typename T>
__device__ __forceinline__ void storeAt(T *p, int64_t i, float v) {
  p[i] = fromFloat<T>(v);
}
__device__ __forceinline__ void storeAt(FloatOut y, int64_t i, float v) {
  store(y, i, v);
}

/// `Src` / `Dst`: typed pointers when both sides share a storage (no
/// per-element storage branch), else `FloatIn` / `FloatOut`.
template <typename Src, typename Dst>
__global__ void transpose2dKernel(Src src, Dst dst, int64_t batch, int64_t a,
                                  int64_t b, int64_t ldSrc, CopyIndex outer) {
  __shared__ float tile[kTile][kTile + 1];
  int64_t tilesA = (a + kTile - 1) / kTile;
  int64_t i0 = (blockIdx.x % tilesA) * kTile;
  int64_t j0 = (blockIdx.x / tilesA) * kTile;
  for (int64_t o = blockIdx.y; o < batch; o += gridDim.y) {
    int64_t base = 0, rem = o;
    for (int k = outer.rank - 1; k >= 0; --k) {
      base += (rem % outer.dims[k]) * outer.srcStride[k];
      rem /= outer.dims[k];
    }
    __syncthreads(); // the previous entry's tile has been written out
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {
      int64_t i = i0 + threadIdx.x, j = j0 + r;
      if (i < a && j < b)
        tile[r][threadIdx.x] = loadAt(src, base + j * ldSrc + i);
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {
      int64_t i = i0 + r, j = j0 + threadIdx.x;
      if (i < a && j < b)
        storeAt(dst, (o * a + i) * b + j, tile[threadIdx.x][r]);
    }
  }
}

__global__ void fillKernel(FloatOut y, int64_t n, float value) {
  LOOM_GRID_STRIDE(i, n) { store(y, i, value); }
}

__global__ void selectKernel(FloatIn cond, FloatIn a, FloatIn b, FloatOut y,
                             int64_t n, SelectIndex ix) {
  LOOM_GRID_STRIDE(i, n) {
    int64_t rem = i, ic = 0, ia = 0, ib = 0;
    for (int k = ix.rank - 1; k >= 0; --k) {
      int64_t idx = rem % ix.dims[k];
      rem /= ix.dims[k];
      ic += idx * ix.strideCond[k];
      ia += idx * ix.strideA[k];
      ib += idx * ix.strideB[k];
    }
    store(y, i, load(cond, ic) != 0.0f ? load(a, ia) : load(b, ib));
  }
}

__global__ void convertKernel(const int64_t *__restrict__ xI64, FloatIn x,
                              FloatOut y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) {
    store(y, i, xI64 ? static_cast<float>(xI64[i]) : load(x, i));
  }
}

__global__ void convertToI64Kernel(FloatIn x, int64_t *__restrict__ y,
                                   int64_t n) {
  LOOM_GRID_STRIDE(i, n) { y[i] = llrintf(load(x, i)); }
}

/// f32 <-> bf16 in packs of 8 (both pointers 16-byte aligned).
template <typename X, typename Y>
__global__ void convertPackKernel(const X *__restrict__ x, Y *__restrict__ y,
                                  int64_t n) {
  int64_t packs = n / kPack;
  LOOM_GRID_STRIDE(p, packs) {
    float v[kPack];
    loadPack(x + p * kPack, v);
    storePack(y + p * kPack, v);
  }
  LOOM_PACK_TAIL(i, packs * kPack, n) { y[i] = fromFloat<Y>(toFloat(x[i])); }
}

/// One thread per output element; each (pre, index) row of `post` elements
/// is contiguous in both `data` and `y`.
__global__ void gatherKernel(FloatIn data, const int64_t *__restrict__ indices,
                             FloatOut y, GatherDims g, int check,
                             DataCheckRecord *rec) {
  LOOM_GRID_STRIDE(e, g.pre * g.count * g.post) {
    int64_t q = e % g.post, t = e / g.post;
    int64_t i = t % g.count, p = t / g.count;
    int64_t raw = indices[i];
    int64_t r = raw < 0 ? raw + g.dim : raw;
    if (r < 0 || r >= g.dim) {
      if (q == 0 && p == 0)
        reportCheck(rec, check, i, raw, g.dim);
      store(y, e, 0.0f);
    } else {
      store(y, e, load(data, (p * g.dim + r) * g.post + q));
    }
  }
}

/// The widest chunk of 16, 8, 4 or 2 bytes (at least `bytes`, the element
/// size) that divides `common`, the OR of every address and byte offset a
/// chunk must divide.
inline int64_t widestChunk(uintptr_t common, int64_t bytes) {
  for (int64_t c = 16; c > bytes; c /= 2)
    if (common % c == 0)
      return c;
  return bytes;
}

/// Calls `f(C{})` with `C` the type of a chunk of `bytes` bytes (16, 8, 4 or
/// 2): the element type of the chunk kernels.
template <typename F> inline void byChunk(int bytes, F &&f) {
  switch (bytes) {
  case 16:
    f(uint4{});
    break;
  case 8:
    f(uint2{});
    break;
  case 4:
    f(uint32_t{});
    break;
  default:
    f(uint16_t{});
    break;
  }
}

/// The byte-chunk form of a copy of `n` elements of `bytes` bytes between
/// `src` and `dst` over `index`; false when an offset reaches 2^31 chunks.
inline bool planChunkCopy(const void *src, const void *dst, int64_t bytes,
                          int64_t n, const CopyIndex &index, ChunkCopy &out) {
  CopyIndex m = mergedCopyIndex(index);
  int64_t *dims = m.dims, *ss = m.srcStride, *ds = m.dstStride;
  int r = m.rank;
  if (r == 0) { // a single element
    dims[0] = 1;
    ss[0] = ds[0] = 0;
    r = 1;
  }
  // The widest chunk that divides the contiguous run, every other stride
  // and both addresses.
  int64_t chunk = bytes;
  if (ss[r - 1] == 1 && ds[r - 1] == 1) {
    uintptr_t common = reinterpret_cast<uintptr_t>(src) |
                       reinterpret_cast<uintptr_t>(dst) |
                       uintptr_t(dims[r - 1] * bytes);
    for (int k = 0; k < r - 1; ++k)
      common |= uintptr_t(ss[k] * bytes) | uintptr_t(ds[k] * bytes);
    chunk = widestChunk(common, bytes);
  }
  int64_t per = chunk / bytes; // elements a chunk
  const int64_t limit = int64_t(1) << 31;
  int64_t maxSrc = 0, maxDst = 0;
  out.rank = r;
  out.chunkBytes = static_cast<int>(chunk);
  for (int k = 0; k < r; ++k) {
    bool inner = k == r - 1 && per > 1;
    int64_t size = inner ? dims[k] / per : dims[k];
    int64_t sk = inner ? 1 : ss[k] / per, dk = inner ? 1 : ds[k] / per;
    if (size >= limit || sk < 0 || dk < 0)
      return false;
    maxSrc += (size - 1) * sk;
    maxDst += (size - 1) * dk;
    out.dims[k] = FastDiv(static_cast<uint32_t>(size));
    out.srcStride[k] = static_cast<uint32_t>(sk);
    out.dstStride[k] = static_cast<uint32_t>(dk);
  }
  int64_t chunks = n / per;
  out.n = static_cast<uint32_t>(chunks);
  return chunks < limit && maxSrc < limit && maxDst < limit;
}

/// The chunk form of `launchPadRows` for elements of `bytes` bytes; false
/// when `dx` has 2^31 chunks or more.
inline bool planPadRows(const void *dy, const void *dx, int64_t bytes,
                        int64_t rows, int64_t rowLen, int64_t start,
                        int64_t len, PadRows &out) {
  uintptr_t common = reinterpret_cast<uintptr_t>(dy) |
                     reinterpret_cast<uintptr_t>(dx) |
                     uintptr_t(rowLen * bytes) | uintptr_t(start * bytes) |
                     uintptr_t(len * bytes);
  int64_t chunk = widestChunk(common, bytes);
  int64_t per = chunk / bytes, n = rows * rowLen / per;
  if (n >= (int64_t(1) << 31))
    return false;
  out.chunkBytes = static_cast<int>(chunk);
  out.n = static_cast<uint32_t>(n);
  out.start = static_cast<uint32_t>(start / per);
  out.len = static_cast<uint32_t>(len / per);
  out.rowLen = FastDiv(static_cast<uint32_t>(rowLen / per));
  return true;
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchStridedCopy(FloatIn src, FloatOut dst, int64_t n,
                         const CopyIndex &index, cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  ChunkCopy chunks;
  if (src.e == dst.e &&
      planChunkCopy(src.p, dst.p, elemBytes(src.e), n, index, chunks)) {
    unsigned g = blocksFor(chunks.n);
    byChunk(chunks.chunkBytes, [&](auto c) {
      using C = decltype(c);
      chunkCopyKernel<<<g, kThreads, 0, stream>>>(
          static_cast<const C *>(src.p), static_cast<C *>(dst.p), chunks);
    });
    return launchCheck("strided copy kernel");
  }
  // 32-bit index math when every offset fits (divisions are much cheaper).
  int64_t maxSrc = 0, maxDst = 0;
  for (int k = 0; k < index.rank; ++k) {
    maxSrc += (index.dims[k] - 1) * index.srcStride[k];
    maxDst += (index.dims[k] - 1) * index.dstStride[k];
  }
  const int64_t limit = int64_t(1) << 31;
  if (n < limit && maxSrc < limit && maxDst < limit)
    stridedCopyKernel<uint32_t><<<blocksFor(n), kThreads, 0, stream>>>(
        src, dst, static_cast<uint32_t>(n), index);
  else
    stridedCopyKernel<int64_t>
        <<<blocksFor(n), kThreads, 0, stream>>>(src, dst, n, index);
  return launchCheck("strided copy kernel");
}

Status launchTranspose2d(FloatIn src, FloatOut dst, int64_t batch, int64_t a,
                         int64_t b, int64_t ldSrc, const CopyIndex &outer,
                         cudaStream_t stream) {
  if (batch * a * b == 0)
    return Status::ok();
  int64_t tiles = ((a + kTile - 1) / kTile) * ((b + kTile - 1) / kTile);
  if (tiles > int64_t(INT32_MAX))
    return makeError("transpose of %lldx%lld matrices is too large for one "
                     "launch",
                     (long long)a, (long long)b);
  dim3 grid(static_cast<unsigned>(tiles), capBlocks(batch));
  dim3 block(kTile, kTileRows);
  if (src.e != dst.e)
    transpose2dKernel<<<grid, block, 0, stream>>>(src, dst, batch, a, b, ldSrc,
                                                  outer);
  else if (src.e == Elem::BF16)
    transpose2dKernel<<<grid, block, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(src.p),
        static_cast<__nv_bfloat16 *>(dst.p), batch, a, b, ldSrc, outer);
  else
    transpose2dKernel<<<grid, block, 0, stream>>>(
        static_cast<const float *>(src.p), static_cast<float *>(dst.p), batch,
        a, b, ldSrc, outer);
  return launchCheck("transpose kernel");
}

Status launchPadRows(FloatIn dy, FloatOut dx, int64_t rows, int64_t rowLen,
                     int64_t start, int64_t len, cudaStream_t stream) {
  if (rows * rowLen == 0)
    return Status::ok();
  PadRows p;
  if (dy.e != dx.e || len == 0 ||
      !planPadRows(dy.p, dx.p, elemBytes(dy.e), rows, rowLen, start, len, p)) {
    LOOM_RETURN_IF_ERROR(
        launchZero(dx.p, rows * rowLen * elemBytes(dx.e), stream));
    CopyIndex ix;
    ix.rank = 2;
    ix.dims[0] = rows;
    ix.dims[1] = len;
    ix.srcStride[0] = len;
    ix.srcStride[1] = 1;
    ix.dstStride[0] = rowLen;
    ix.dstStride[1] = 1;
    FloatOut at{static_cast<char *>(dx.p) + start * elemBytes(dx.e), dx.e};
    return launchStridedCopy(dy, at, rows * len, ix, stream);
  }
  unsigned g = blocksFor(p.n);
  byChunk(p.chunkBytes, [&](auto c) {
    using C = decltype(c);
    padRowsKernel<<<g, kThreads, 0, stream>>>(static_cast<const C *>(dy.p),
                                              static_cast<C *>(dx.p), p);
  });
  return launchCheck("slice_grad kernel");
}

Status launchZero(void *p, int64_t bytes, cudaStream_t stream) {
  if (bytes == 0)
    return Status::ok();
  return cudaCheck(cudaMemsetAsync(p, 0, bytes, stream), "cudaMemsetAsync");
}

Status launchFill(FloatOut y, int64_t n, float value, cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  fillKernel<<<blocksFor(n), kThreads, 0, stream>>>(y, n, value);
  return launchCheck("fill kernel");
}

Status launchSelect(FloatIn cond, FloatIn a, FloatIn b, FloatOut y, int64_t n,
                    const SelectIndex &index, cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  selectKernel<<<blocksFor(n), kThreads, 0, stream>>>(cond, a, b, y, n, index);
  return launchCheck("select kernel");
}

Status launchConvertToI64(FloatIn x, int64_t *y, int64_t n,
                          cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  convertToI64Kernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
  return launchCheck("convert kernel");
}

Status launchConvert(const int64_t *xI64, FloatIn x, FloatOut y, int64_t n,
                     cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  bool pack = !xI64 && x.e != y.e && alignedTo(x.p, 16) && alignedTo(y.p, 16);
  if (pack && x.e == Elem::F32)
    convertPackKernel<<<packBlocks(n), kThreads, 0, stream>>>(
        static_cast<const float *>(x.p), static_cast<__nv_bfloat16 *>(y.p), n);
  else if (pack)
    convertPackKernel<<<packBlocks(n), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(x.p), static_cast<float *>(y.p), n);
  else
    convertKernel<<<blocksFor(n), kThreads, 0, stream>>>(xI64, x, y, n);
  return launchCheck("convert kernel");
}

Status launchGather(FloatIn data, const int64_t *indices, FloatOut y,
                    const GatherDims &g, int check, DataCheckRecord *record,
                    cudaStream_t stream) {
  int64_t n = g.pre * g.count * g.post;
  if (n == 0)
    return Status::ok();
  gatherKernel<<<blocksFor(n), kThreads, 0, stream>>>(data, indices, y, g,
                                                      check, record);
  return launchCheck("gather kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
