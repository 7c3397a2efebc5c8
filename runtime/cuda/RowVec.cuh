//===- RowVec.cuh - Row helpers of the reduce, norm and loss kernels ---*-===//
//
// Over CudaElem.cuh's packs: the unaligned head of a row that starts off a
// 16-byte boundary, the online (max, sum of exp) pair of softmax-like rows,
// and the column sums over rows. Used by Reduce.cu, Norm.cu, Loss.cu and
// Softmax.cu, whose kernels are templated on the storage type so no load
// branches on it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_ROWVEC_CUH
#define LOOM_RUNTIME_CUDA_ROWVEC_CUH

#include "runtime/cuda/CudaElem.cuh"

#include <cstdint>

namespace loom::runtime::cuda {

/// Threads of a block that walks rows of `n` elements of `T`: about two
/// packs a thread, 32 to 512.
template <typename T> inline int rowBlockThreads(int64_t n) {
  int64_t t = (n / kVec<T> + 63) / 64 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 512 ? 512 : t));
}

/// Blocks of a kernel that reads each row twice (the second time to write
/// its result): rows in flight times their bytes kept near 24 MB, so the
/// second read finds the row in L2 (50 MB on the H100 / H200), but at least
/// 264 blocks (two per SM of 132); rows beyond the grid are strided.
inline unsigned rereadBlocks(int64_t rows, int64_t rowBytes) {
  int64_t byL2 = (int64_t(24) << 20) / (rowBytes > 0 ? rowBytes : 1);
  int64_t b = byL2 > 264 ? byL2 : 264;
  return capBlocks(rows < b ? rows : b);
}

/// Whether `a` and `b` have the same offset from a 16-byte boundary (their
/// rows of one storage then split into the same packs).
inline bool sameAlignment(const void *a, const void *b) {
  return ((reinterpret_cast<uintptr_t>(a) - reinterpret_cast<uintptr_t>(b)) &
          15u) == 0;
}

/// Elements of the `n`-element row at `row` before its first 16-byte
/// boundary (the scalar head of a vectorised walk), at most `n`.
template <typename T>
__device__ __forceinline__ int64_t headElems(const T *row, int64_t n) {
  int64_t off = int64_t(reinterpret_cast<uintptr_t>(row) & 15u);
  int64_t h = off == 0 ? 0 : (16 - off) / int64_t(sizeof(T));
  return h < n ? h : n;
}

/// The running maximum `m` of a row and `s = sum(exp(x - m))` so far.
struct MaxSum {
  float m = -INFINITY, s = 0.0f;
};

__device__ __forceinline__ MaxSum combineMaxSum(MaxSum a, MaxSum b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) // no finite value yet: the sums are 0 or NaN
    return {m, a.s + b.s};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

/// Adds `V` values: the pack's maximum first, so the sum is rescaled at most
/// once a pack. A NaN value makes the sum NaN (as the CPU kernel's).
template <int V>
__device__ __forceinline__ void addMaxSum(MaxSum &a, const float (&v)[V]) {
  float bm = v[0];
#pragma unroll
  for (int j = 1; j < V; ++j)
    bm = fmaxf(bm, v[j]);
  if (bm > a.m) {
    a.s *= expf(a.m - bm);
    a.m = bm;
  }
  if (a.m != -INFINITY) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      a.s += expf(v[j] - a.m);
  } else {
    // No finite value yet, and `fmaxf` drops a NaN beside -inf values: look
    // at each, so a finite pack later cannot hide it.
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (isnan(v[j]))
        a.s = NAN;
  }
}

/// Combines every thread's pair over the block (fixed tree); every thread
/// gets the result. Needs `blockDim.x` a multiple of 32, at most 1024.
__device__ __forceinline__ MaxSum blockMaxSum(MaxSum v) {
  __shared__ float pm[32], ps[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum w{__shfl_xor_sync(0xffffffffu, v.m, o),
             __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = combineMaxSum(v, w);
  }
  __syncthreads(); // a previous call's readers are done
  if (lane == 0) {
    pm[warp] = v.m;
    ps[warp] = v.s;
  }
  __syncthreads();
  MaxSum r;
  for (int w = 0; w < int(blockDim.x >> 5); ++w)
    r = combineMaxSum(r, MaxSum{pm[w], ps[w]});
  return r;
}

/// Calls `f(i, values)` for the elements of the `n`-element row at `row`,
/// spread over the block: the scalar head up to the first 16-byte boundary
/// and the tail with `V = 1`, the rest as 16-byte packs.
template <typename T, typename F>
__device__ __forceinline__ void forRow(const T *row, int64_t n, F &&f) {
  constexpr int V = kVec<T>;
  int64_t head = headElems(row, n);
  int64_t packs = (n - head) / V;
  int64_t tail = head + packs * V;
  for (int64_t i = threadIdx.x; i < head; i += blockDim.x) {
    float v[1] = {toFloat(row[i])};
    f(i, v);
  }
  for (int64_t i = tail + threadIdx.x; i < n; i += blockDim.x) {
    float v[1] = {toFloat(row[i])};
    f(i, v);
  }
  // Two packs a step, both loaded before either is used: twice the bytes
  // in flight. A thread still visits its packs in increasing order.
  const T *body = row + head;
  int64_t step = blockDim.x, k = threadIdx.x;
  for (; k + step < packs; k += 2 * step) {
    float v0[V], v1[V];
    loadPack<T, V>(body + k * V, v0);
    loadPack<T, V>(body + (k + step) * V, v1);
    f(head + k * V, v0);
    f(head + (k + step) * V, v1);
  }
  if (k < packs) {
    float v[V];
    loadPack<T, V>(body + k * V, v);
    f(head + k * V, v);
  }
}

/// Calls `f(T{})` with `T` the C++ type of storage `e` (host dispatch of
/// the templated kernels).
template <typename F> inline void byStorage(Elem e, F &&f) {
  if (e == Elem::BF16)
    f(__nv_bfloat16{});
  else
    f(float{});
}

/// Column sums over rows (bias and norm-parameter gradients) run on blocks
/// of `kSlabCols x kSlabRows` threads: thread `(tx, ty)` owns `V` adjacent
/// columns of the block's slab of `kSlabCols * V` columns and sums every
/// `kSlabRows`-th row of the block's row chunk (each row read as coalesced
/// packs), then the block adds its row lanes in order and writes one
/// partial per column and chunk; a second kernel adds the chunks in order.
constexpr int kSlabCols = 32, kSlabRows = 8;

/// Row chunks of such a column sum over `rows` rows of `cols` columns: at
/// least 128 rows a chunk (16 a row lane), so the partials stay a small
/// fraction of the input, and about 1024 blocks of the first kernel (8 per
/// SM, over 132 SMs) counting slabs of `kSlabCols * 8` columns, as bf16
/// packs make them. f32 packs (4 wide) make the real grid about twice that,
/// unpacked slabs (1 wide) about 8 times, where the rows allow.
inline int64_t slabRowChunks(int64_t rows, int64_t cols) {
  int64_t slabs = (cols + kSlabCols * 8 - 1) / (kSlabCols * 8);
  int64_t byBlocks = (1024 + slabs - 1) / slabs;
  int64_t byRows = (rows + 127) / 128;
  int64_t c = byBlocks < byRows ? byBlocks : byRows;
  return c < 1 ? 1 : (c > 65535 ? 65535 : c);
}

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_ROWVEC_CUH
