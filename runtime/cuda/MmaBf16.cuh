//===- MmaBf16.cuh - bf16 mma.sync fragments and their host emulation -*- CUDA
//-*-===//
//
// The warp-level tensor-core instructions of the tc attention kernels
// (AttentionTc.cu): mma.sync m16n8k16 with bf16 operands and f32
// accumulators, ldmatrix, cp.async and ex2.approx, and the fragment loads
// and quad reductions that depend on the PTX fragment layouts, written
// down once here:
//
// With lane = 4 g + t (g = lane / 4 in 0..7, t = lane % 4):
//  - A (16 x 16, row): a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1],
//    a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9];
//  - B (16 x 8, "col"): b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g];
//  - C (16 x 8, f32): c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] =
//    C[g+8][2t, 2t+1].
// Each 32-bit register holds two bf16, the lower column (or k) in the low
// half. So a thread holds rows g and g + 8 of every accumulator tile, and
// the four threads of a quad (same g) together hold a whole row.
//
// Under LOOM_CUDA_HOST_EMULATION (test/unit/cuda/CudaEmulation*Test.cpp)
// mma.sync, ldmatrix and cp.async are host functions with the same fragment
// semantics, so the emulation checks the callers' fragment indexing.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_MMABF16_CUH
#define LOOM_RUNTIME_CUDA_MMABF16_CUH

#include "runtime/cuda/CudaElem.cuh"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace loom::runtime::cuda {

#ifndef LOOM_CUDA_HOST_EMULATION

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// C += A B on one m16n8k16 tile.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// ldmatrix of four 8x8 matrices: lanes 8i..8i+7 give the row addresses of
/// matrix i, and lane 4g + t receives row g, elements 2t and 2t+1, of each
/// (with `.trans`: elements [2t][g] and [2t+1][g]).
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4],
                                      const __nv_bfloat16 *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smemAddr(p)));
}
__device__ __forceinline__ void ldsm4T(uint32_t (&r)[4],
                                       const __nv_bfloat16 *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smemAddr(p)));
}

/// Starts a 16-byte cp.async to shared memory; zeros when not `in`.
__device__ __forceinline__ void copyAsync16(__nv_bfloat16 *dst,
                                            const __nv_bfloat16 *src, bool in) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smemAddr(dst)),
      "l"(src), "r"(in ? 16 : 0));
}
__device__ __forceinline__ void commitAsync() {
  asm volatile("cp.async.commit_group;\n" ::);
}
/// Waits until at most `N` of this thread's groups are still in flight.
template <int N> __device__ __forceinline__ void waitAsync() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// 2^x on the special-function unit, denormal results flushed to zero
/// (exp2f adds a denormal fix-up around the same instruction).
__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#else // LOOM_CUDA_HOST_EMULATION (test/unit/cuda/CudaHostEmulation.h)

// The warp-wide instructions for the host emulation, with the semantics
// written above: lanes exchange operands through per-thread slots between
// two warp barriers (one block runs at a time, so function statics serve).

namespace emu = ::loom::runtime::test::emu;

inline uint32_t bitsOf(const __nv_bfloat16 &x) {
  uint16_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                uint32_t b1) {
  static uint32_t sa[1024][4], sb[1024][2];
  int tid = emu::flatThread(), warp0 = tid & ~31, lane = tid & 31;
  for (int i = 0; i < 4; ++i)
    sa[tid][i] = a[i];
  sb[tid][0] = b0;
  sb[tid][1] = b1;
  emu::warpSync();
  // A(row, k): lane 4 (row % 8) + (k % 8) / 2, register (row / 8) + 2 (k / 8)
  // B(k, n): lane 4 n + (k % 8) / 2, register k / 8; half k % 2 for both.
  auto aAt = [&](int row, int k) {
    return bf16Half(
        sa[warp0 + 4 * (row % 8) + (k % 8) / 2][row / 8 + 2 * (k / 8)],
        k % 2 == 1);
  };
  auto bAt = [&](int k, int n) {
    return bf16Half(sb[warp0 + 4 * n + (k % 8) / 2][k / 8], k % 2 == 1);
  };
  int g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float sum = c[e];
    for (int k = 0; k < 16; ++k)
      sum += aAt(row, k) * bAt(k, col);
    c[e] = sum;
  }
  emu::warpSync();
}

inline void ldsmEmu(uint32_t (&r)[4], const __nv_bfloat16 *p, bool trans) {
  static const __nv_bfloat16 *rows[1024];
  int tid = emu::flatThread(), warp0 = tid & ~31, lane = tid & 31;
  int g = lane >> 2, t = lane & 3;
  rows[tid] = p;
  emu::warpSync();
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat16 *const *m = rows + warp0 + 8 * i;
    uint32_t lo = trans ? bitsOf(m[2 * t][g]) : bitsOf(m[g][2 * t]);
    uint32_t hi = trans ? bitsOf(m[2 * t + 1][g]) : bitsOf(m[g][2 * t + 1]);
    r[i] = lo | hi << 16;
  }
  emu::warpSync();
}
inline void ldsm4(uint32_t (&r)[4], const __nv_bfloat16 *p) {
  ldsmEmu(r, p, false);
}
inline void ldsm4T(uint32_t (&r)[4], const __nv_bfloat16 *p) {
  ldsmEmu(r, p, true);
}

/// cp.async of 16 bytes (or zeros), done at once.
inline void copyAsync16(__nv_bfloat16 *dst, const __nv_bfloat16 *src, bool in) {
  if (in)
    std::memcpy(dst, src, 16);
  else
    std::memset(dst, 0, 16);
}
inline void commitAsync() {}
template <int N> inline void waitAsync() {}
inline float fastExp2(float x) { return std::exp2(x); }

#endif // LOOM_CUDA_HOST_EMULATION

/// The A fragment of the 16 x 16 block at `tile` (row-major, pitch `p`):
/// matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15)
/// are a[0..3].
__device__ __forceinline__ void loadA(uint32_t (&a)[4],
                                      const __nv_bfloat16 *tile, int p) {
  int lane = threadIdx.x & 31;
  ldsm4(a, tile + (lane & 15) * p + (lane >> 4) * 8);
}

/// B fragments of two n8 tiles (n 0-7: b[0], b[1]; n 8-15: b[2], b[3]) of
/// a k16 step, where element (k, n) is stored at `tile[n * p + k]` (K rows
/// for S = Q K^T: n is the key, k the head dim). Matrix i holds rows
/// n = 8 (i / 2) .. +7, columns k = 8 (i % 2) .. +7.
__device__ __forceinline__ void loadBn(uint32_t (&b)[4],
                                       const __nv_bfloat16 *tile, int p) {
  int lane = threadIdx.x & 31, m = lane >> 3, r = lane & 7;
  ldsm4(b, tile + ((m >> 1) * 8 + r) * p + (m & 1) * 8);
}

/// The same where element (k, n) is stored at `tile[k * p + n]` (V rows for
/// O = P V: k is the key, n the head dim), through the transposing load.
/// Matrix i holds stored rows k = 8 (i % 2) .. +7, columns n = 8 (i / 2).
__device__ __forceinline__ void loadBk(uint32_t (&b)[4],
                                       const __nv_bfloat16 *tile, int p) {
  int lane = threadIdx.x & 31, m = lane >> 3, r = lane & 7;
  ldsm4T(b, tile + ((m & 1) * 8 + r) * p + (m >> 1) * 8);
}

/// The A fragment (16 x 16, bf16) made of the f32 accumulators of two
/// adjacent n8 tiles: columns 0-7 from `c0`, 8-15 from `c1`.
__device__ __forceinline__ void accToA(uint32_t (&a)[4], const float (&c0)[4],
                                       const float (&c1)[4]) {
  a[0] = bf16Pair(c0[0], c0[1]);
  a[1] = bf16Pair(c0[2], c0[3]);
  a[2] = bf16Pair(c1[0], c1[1]);
  a[3] = bf16Pair(c1[2], c1[3]);
}

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_MMABF16_CUH
