//===- CudaElem.cuh - Device helpers shared by the .cu files ------*- CUDA
//-*-===//
//
// Loads and stores of fp32 / bf16 operands (math in fp32, bf16 stores round
// to nearest even), per element or as packs of `V` elements through 16-byte
// vector accesses (`loadPack` / `storePack`, one family for every kernel;
// the host emulation goes through `memcpy`), grid sizes and the grid-stride
// loop, warp and block reductions, a division by a launch-invariant divisor,
// and the device-side data check record.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDAELEM_CUH
#define LOOM_RUNTIME_CUDA_CUDAELEM_CUH

#include "runtime/cuda/CudaLaunch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace loom::runtime::cuda {

/// Declares a kernel's dynamic shared memory as an array `name` of `type`.
#ifndef LOOM_DYNAMIC_SHARED
#define LOOM_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 65535;

/// Blocks for a grid-stride loop over `n` elements with `threads` a block.
inline unsigned blocksFor(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b < kMaxBlocks ? b : kMaxBlocks));
}

/// `n` clamped to a grid dimension (at least 1).
inline unsigned capBlocks(int64_t n) {
  return static_cast<unsigned>(n < kMaxBlocks ? (n > 0 ? n : 1) : kMaxBlocks);
}

#define LOOM_GRID_STRIDE(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

/// The element range `[first, n)` of a pack kernel's tail, one element per
/// thread of the grid.
#define LOOM_PACK_TAIL(i, first, n)                                            \
  for (int64_t i = (first) + blockIdx.x * int64_t(blockDim.x) + threadIdx.x;   \
       i < (n); i += int64_t(gridDim.x) * blockDim.x)

__device__ __forceinline__ float load(FloatIn x, int64_t i) {
  if (x.e == Elem::BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(x.p)[i]);
  return static_cast<const float *>(x.p)[i];
}

__device__ __forceinline__ void store(FloatOut y, int64_t i, float v) {
  if (y.e == Elem::BF16)
    static_cast<__nv_bfloat16 *>(y.p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float *>(y.p)[i] = v;
}

/// Typed loads and stores for kernels templated on the storage type.
__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Elements per pack: one 16-byte access in bf16, two in f32.
constexpr int kPack = 8;

/// Blocks of a kernel with one pack of `kPack` elements per thread (or one
/// element, below a pack), at most `kMaxBlocks`.
inline unsigned packBlocks(int64_t n) {
  return blocksFor(n / kPack > 0 ? n / kPack : n);
}

/// Whether `p` is a multiple of `bytes` (a power of two): 16 for the
/// 16-byte vector accesses.
inline __host__ __device__ bool alignedTo(const void *p, int64_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & uintptr_t(bytes - 1)) == 0;
}

/// A vector of type `V` at `p` (aligned for `V`). The host emulation goes
/// through `memcpy`, which keeps g++'s aliasing rules.
template <typename V, typename P>
__device__ __forceinline__ V loadVec(const P *p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const V *>(p);
#else
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
#endif
}
template <typename V, typename P>
__device__ __forceinline__ void storeVec(P *p, const V &v) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<V *>(p) = v;
#else
  std::memcpy(p, &v, sizeof(V));
#endif
}

/// The bf16 in the low (`hi` false) or high half of `w`, widened.
__device__ __forceinline__ float bf16Half(uint32_t w, bool hi) {
  __nv_bfloat16_raw r;
  r.x = static_cast<unsigned short>(hi ? w >> 16 : w & 0xffffu);
  return __bfloat162float(__nv_bfloat16(r));
}

/// `lo` and `hi` rounded to bf16 (nearest even, as `fromFloat`), packed
/// low half first: one paired conversion instruction on the device.
__device__ __forceinline__ uint32_t bf16Pair(float lo, float hi) {
  __nv_bfloat162_raw r = __floats2bfloat162_rn(lo, hi);
  return uint32_t(r.x) | (uint32_t(r.y) << 16);
}

/// Elements of `T` in 16 bytes: the width of a vector load.
template <typename T> constexpr int kVec = 16 / int(sizeof(T));

/// `V` elements of `T` loaded or stored at once (16-byte pieces at most; the
/// alignment a pack needs is `min(16, sizeof(T) * V)` bytes).
template <typename T, int V>
struct alignas(sizeof(T) * V < 16 ? sizeof(T) * V : 16) Pack {
  T v[V];
};

/// One 16-byte (or smaller) piece of a pack: `W` elements at `p` widened
/// into `out[j, j + W)`, or stored from there.
template <typename T, int W, int V>
__device__ __forceinline__ void loadPiece(const T *p, float (&out)[V], int j) {
  // f32 pieces as `float4`: nvcc then unrolls the callers' grid-stride loops,
  // as it does not around a `Pack` copy.
  if constexpr (std::is_same_v<T, float> && W == 4) {
    float4 k = loadVec<float4>(p);
    out[j] = k.x, out[j + 1] = k.y, out[j + 2] = k.z, out[j + 3] = k.w;
  } else {
    Pack<T, W> k = loadVec<Pack<T, W>>(p);
#pragma unroll
    for (int i = 0; i < W; ++i)
      out[j + i] = toFloat(k.v[i]);
  }
}
template <typename T, int W, int V>
__device__ __forceinline__ void storePiece(T *p, const float (&in)[V], int j) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> && W % 2 == 0) {
    Pack<uint32_t, W / 2> k;
#pragma unroll
    for (int i = 0; i < W / 2; ++i)
      k.v[i] = bf16Pair(in[j + 2 * i], in[j + 2 * i + 1]);
    storeVec(p, k);
  } else if constexpr (std::is_same_v<T, float> && W == 4) {
    storeVec(p, make_float4(in[j], in[j + 1], in[j + 2], in[j + 3]));
  } else {
    Pack<T, W> k;
#pragma unroll
    for (int i = 0; i < W; ++i)
      k.v[i] = fromFloat<T>(in[j + i]);
    storeVec(p, k);
  }
}

/// Widens the `V` elements at `p` (aligned for `Pack<T, V>`) to floats, in
/// at most two 16-byte pieces.
template <typename T, int V>
__device__ __forceinline__ void loadPack(const T *p, float (&out)[V]) {
  constexpr int W = V < kVec<T> ? V : kVec<T>;
  static_assert(V == W || V == 2 * W, "a pack is one or two pieces");
  loadPiece<T, W>(p, out, 0);
  if constexpr (V > W)
    loadPiece<T, W>(p + W, out, W);
}

/// Stores `V` floats at `p` (aligned for `Pack<T, V>`) in at most two
/// 16-byte pieces, rounded as `fromFloat`; bf16 pairs take one paired
/// conversion (`bf16Pair`).
template <typename T, int V>
__device__ __forceinline__ void storePack(T *p, const float (&in)[V]) {
  constexpr int W = V < kVec<T> ? V : kVec<T>;
  static_assert(V == W || V == 2 * W, "a pack is one or two pieces");
  storePiece<T, W>(p, in, 0);
  if constexpr (V > W)
    storePiece<T, W>(p + W, in, W);
}

/// Unsigned division of `n < 2^31` by a divisor fixed at launch, as a
/// multiply-high, an add and a shift (Granlund and Montgomery): with
/// `s = ceil(log2 d)` and `m = floor(2^32 (2^s - d) / d) + 1`,
/// `n / d = (mulhi(n, m) + n) >> s`; the sum stays below 2^32 because
/// `mulhi(n, m) <= n < 2^31`.
struct FastDiv {
  uint32_t d = 1, m = 1, s = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    s = 0;
    while ((uint64_t(1) << s) < divisor)
      ++s;
    m = uint32_t(
        ((uint64_t(1) << 32) * ((uint64_t(1) << s) - divisor)) / divisor + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    uint32_t hi = __umulhi(n, m);
#else
    uint32_t hi = uint32_t((uint64_t(n) * m) >> 32);
#endif
    return (hi + n) >> s;
  }
};

/// Sum over the warp that every lane receives (a butterfly: each lane adds
/// the same pairs, so all lanes get the same bits, and lane 0 the bits of a
/// `__shfl_down_sync` tree).
template <typename T> __device__ __forceinline__ T warpSum(T v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Maximum over the warp (butterfly: every lane gets it).
__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Sum / maximum over the four lanes of a quad (lanes 4g .. 4g+3: a tile
/// row of the attention kernels); every lane of the quad gets it.
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

/// Sum over the block; every thread gets the result. Needs `blockDim.x` a
/// multiple of 32 and every thread of the block calling it.
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

/// Maximum over the block, as `blockSum`.
__device__ __forceinline__ float blockMax(float v) {
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

/// Records the first failed data check of a step (later ones are dropped).
__device__ __forceinline__ void reportCheck(DataCheckRecord *rec, int check,
                                            long long pos, long long value,
                                            long long limit) {
  if (atomicCAS(&rec->check, 0, check) == 0) {
    rec->position = pos;
    rec->value = value;
    rec->limit = limit;
  }
}

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_CUDAELEM_CUH
