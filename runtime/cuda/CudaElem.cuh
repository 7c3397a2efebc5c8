//===- CudaElem.cuh - Device helpers shared by the .cu files ------*- CUDA
//-*-===//
//
// Loads and stores of fp32 / bf16 operands (math in fp32, bf16 stores round
// to nearest even), grid sizes and the grid-stride loop, warp and block
// reductions, and the device-side data check record.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDAELEM_CUH
#define LOOM_RUNTIME_CUDA_CUDAELEM_CUH

#include "runtime/cuda/CudaLaunch.h"

#include <cuda_bf16.h>

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
