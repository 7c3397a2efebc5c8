//===- PaddedCopy.cu - Copies between a matrix and its padded copy -*- CUDA
//-*-===//
//
// The padded-GEMM path of Matmul.cpp moves operands into a workspace where
// their dimensions are rounded up (GPT-2's vocabulary of 50257 becomes
// 50304) and a padded output back. One kernel does both directions: it
// writes every element of a dense `[count][dstRows][dstCols]` destination,
// taking the source `[count][srcRows][srcCols]` element where one exists
// and zero elsewhere, so the copy into the workspace zero-fills the pad
// columns and pad rows in the same pass, and the copy back (a destination
// no larger than the source) drops them. One side's rows start only 2-
// (bf16) or 4-byte (f32) aligned, so accesses are element-sized;
// consecutive threads take consecutive elements of a row (each warp
// instruction 64 or 128 contiguous bytes), and each thread loads its 8
// elements before storing any, so that about 32 KiB per SM are in flight,
// enough to keep HBM busy. Blocks span 2048 elements of one destination
// row (grid y) and stride over rows (grid x): the only 64-bit index math is
// one division and two multiplies per row. Blocks are `kThreads` wide (the
// emulation test launches them so too).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaElem.cuh"

namespace loom::runtime::cuda {

namespace {

constexpr int kCopyUnroll = 8;

/// `dst[e][r][c] = r < srcRows && c < srcCols ? src[e][r][c] : 0` for every
/// element of `count` dense `[dstRows, dstCols]` matrices; `T` only carries
/// the element size.
template <typename T>
__global__ void paddedCopyKernel(T *__restrict__ dst, int64_t dstCols,
                                 int64_t dstRows, const T *__restrict__ src,
                                 int64_t srcCols, int64_t srcRows,
                                 int64_t count) {
  // Within a row 32-bit offsets suffice (the launcher caps a row at 65535
  // blocks of 2048 elements), and a compile-time block width makes the
  // unrolled accesses one base address plus constant offsets.
  int col = static_cast<int>(blockIdx.y * kThreads * kCopyUnroll + threadIdx.x);
  int dstLeft = static_cast<int>(dstCols) - col;
  int srcLeft = static_cast<int>(srcCols) - col;
  int64_t rows = count * dstRows;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t e = r / dstRows, rr = r - e * dstRows;
    // A pad row reads nothing: every element is zero.
    int left = rr < srcRows ? srcLeft : 0;
    const T *s = src + (left > 0 ? (e * srcRows + rr) * srcCols : 0) + col;
    T *d = dst + r * dstCols + col;
    T v[kCopyUnroll] = {};
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u)
      if (u * kThreads < left)
        v[u] = s[u * kThreads];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u)
      if (u * kThreads < dstLeft)
        d[u * kThreads] = v[u];
  }
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchPaddedCopy(void *dst, int64_t dstCols, int64_t dstRows,
                        const void *src, int64_t srcCols, int64_t srcRows,
                        int64_t count, int64_t elemBytes, cudaStream_t stream) {
  if (dstCols == 0 || dstRows == 0 || count == 0)
    return Status::ok();
  int64_t chunks =
      (dstCols + kThreads * kCopyUnroll - 1) / (kThreads * kCopyUnroll);
  if (chunks > kMaxBlocks)
    return makeError("a padded copy of rows of %lld elements is not "
                     "supported on CUDA",
                     (long long)dstCols);
  // Enough row blocks to fill every SM many times; the rest stride.
  int64_t rows = count * dstRows;
  dim3 grid(static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20)),
            static_cast<unsigned>(chunks));
  if (elemBytes == 2)
    paddedCopyKernel<<<grid, kThreads, 0, stream>>>(
        static_cast<uint16_t *>(dst), dstCols, dstRows,
        static_cast<const uint16_t *>(src), srcCols, srcRows, count);
  else
    paddedCopyKernel<<<grid, kThreads, 0, stream>>>(
        static_cast<uint32_t *>(dst), dstCols, dstRows,
        static_cast<const uint32_t *>(src), srcCols, srcRows, count);
  return launchCheck("padded copy kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
