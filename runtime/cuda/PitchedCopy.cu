//===- PitchedCopy.cu - Row copies between leading dimensions ----*- CUDA
//-*-===//
//
// Copies a matrix between two row pitches: the padded-GEMM path of
// Matmul.cpp moves operands whose rows are not 16-byte aligned (GPT-2's
// 50257-wide logits, rows of 100514 bytes) into a workspace with padded
// rows and a padded output back. One side's rows start only 2- (bf16) or
// 4-byte (f32) aligned, so accesses are element-sized; consecutive threads
// take consecutive elements of a row (each warp instruction 64 or 128
// contiguous bytes), and each thread loads its 8 elements before storing
// any, so that about 32 KiB per SM are in flight, enough to keep HBM busy.
// Blocks span 2048 elements of one row (grid y) and stride over rows
// (grid x): the only 64-bit index math is one multiply per row. Blocks
// are `kThreads` wide (the emulation test launches them so too).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaElem.cuh"

namespace loom::runtime::cuda {

namespace {

constexpr int kCopyUnroll = 8;

/// `dst[r * dstPitch + c] = src[r * srcPitch + c]` for `rows` x `cols`
/// elements (pitches in elements); `T` only carries the element size.
template <typename T>
__global__ void pitchedCopyKernel(T *__restrict__ dst, int64_t dstPitch,
                                  const T *__restrict__ src, int64_t srcPitch,
                                  int64_t cols, int64_t rows) {
  // Within a row 32-bit offsets suffice (the launcher caps a row at 65535
  // blocks of 2048 elements), and a compile-time block width makes the
  // unrolled accesses one base address plus constant offsets.
  int left =
      static_cast<int>(cols) -
      static_cast<int>(blockIdx.y * kThreads * kCopyUnroll + threadIdx.x);
  int64_t col0 = int64_t(blockIdx.y) * kThreads * kCopyUnroll + threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *s = src + r * srcPitch + col0;
    T *d = dst + r * dstPitch + col0;
    T v[kCopyUnroll] = {};
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u)
      if (u * kThreads < left)
        v[u] = s[u * kThreads];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u)
      if (u * kThreads < left)
        d[u * kThreads] = v[u];
  }
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchPitchedCopy(void *dst, int64_t dstPitch, const void *src,
                         int64_t srcPitch, int64_t cols, int64_t rows,
                         int64_t elemBytes, cudaStream_t stream) {
  if (cols == 0 || rows == 0)
    return Status::ok();
  int64_t chunks =
      (cols + kThreads * kCopyUnroll - 1) / (kThreads * kCopyUnroll);
  if (chunks > kMaxBlocks)
    return makeError("a pitched copy of rows of %lld elements is not "
                     "supported on CUDA",
                     (long long)cols);
  // Enough row blocks to fill every SM many times; the rest stride.
  dim3 grid(static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20)),
            static_cast<unsigned>(chunks));
  if (elemBytes == 2)
    pitchedCopyKernel<<<grid, kThreads, 0, stream>>>(
        static_cast<uint16_t *>(dst), dstPitch / 2,
        static_cast<const uint16_t *>(src), srcPitch / 2, cols, rows);
  else
    pitchedCopyKernel<<<grid, kThreads, 0, stream>>>(
        static_cast<uint32_t *>(dst), dstPitch / 4,
        static_cast<const uint32_t *>(src), srcPitch / 4, cols, rows);
  return launchCheck("pitched copy kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
