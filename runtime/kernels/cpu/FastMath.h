//===- FastMath.h - Branch-free float math that vectorises -------*- C++ -*-===//
//
// `fastExp` is expf without a libm call: Cody-Waite range reduction
// x = n ln2 + r (|r| <= ln2/2), Cephes' degree-7 polynomial for e^r and
// 2^n built in the exponent bits, applied as two factors 2^(n/2) 2^(n-n/2)
// so that results in the subnormal range round once and overflow gives
// +inf. Every step is a select or arithmetic, so GCC vectorises loops that
// call it (`#pragma omp simd` on the loop; check with -fopt-info-vec).
// Accuracy: within 2 ulp of the correctly rounded result for all finite
// inputs (1 ulp measured; test/unit/runtime/FastMathTest.cpp checks every
// 251st float bit pattern and a dense grid over [-110, 95]), exp(-inf) = 0,
// exp(+inf) = +inf, NaN stays NaN.
//
// `fastSigmoid(x)` = 1 / (1 + fastExp(-x)), and the tanh-form GELU helpers
// use 0.5 (1 + tanh(u)) = sigmoid(2u), 1 - tanh(u)^2 = 4 s (1 - s).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_CPU_FASTMATH_H
#define LOOM_RUNTIME_KERNELS_CPU_FASTMATH_H

#include <cstdint>
#include <cstring>

/// Compiles a function three times, for x86-64-v4 (AVX-512), x86-64-v3
/// (AVX2) and the baseline, and picks one when the program loads
/// (GCC/Clang `target_clones`, an ELF ifunc). Put it on the out-of-line
/// functions that hold the hot `omp simd` loops; the inline helpers here
/// are compiled into each clone. The runtime builds with
/// -ffp-contract=off, so element-wise results are the same bits in every
/// clone; reductions that must not depend on the vector width use a fixed
/// lane order (`Lanes8`). GCC 11+ on x86-64 ELF only; elsewhere (or with
/// -DLOOM_NO_SIMD_CLONES) one baseline build.
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) &&            \
    !defined(__clang__) && __GNUC__ >= 11 && !defined(LOOM_NO_SIMD_CLONES)
#define LOOM_SIMD_CLONES                                                        \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LOOM_SIMD_CLONES
#endif

namespace loom::runtime::cpu {

namespace fastmath_detail {
inline int32_t bitsOf(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}
inline float floatOf(int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
} // namespace fastmath_detail

/// e^x in float, within 2 ulp; vectorises (see the file comment).
inline float fastExp(float x) {
  using namespace fastmath_detail;
  // Beyond these, e^x is +inf (89 > ln FLT_MAX) or rounds to 0 (-104 <
  // ln(2^-150)); clamping keeps n within the two-factor scaling's range.
  float xc = x > 89.0f ? 89.0f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  // n = round(x / ln2) through the 1.5 * 2^23 trick: the low mantissa bits
  // of `t` hold n.
  const float magic = 12582912.0f;
  float t = xc * 1.44269504088896341f + magic;
  float n = t - magic;
  int32_t ni = bitsOf(t) - bitsOf(magic);
  // r = x - n ln2, in two parts (ln2hi has 9 bits, so n * ln2hi is exact).
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  // 2^n as 2^n1 * 2^n2 with n1 = floor(n / 2): both are normal floats for
  // n in [-150, 129].
  // (Shifted as unsigned: a NaN's n is garbage, and its result is x.)
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = floatOf(int32_t(uint32_t(n1 + 127) << 23));
  float s2 = floatOf(int32_t(uint32_t(n2 + 127) << 23));
  float y = p * s1 * s2;
  return x != x ? x : y;
}

/// 1 / (1 + e^-x), vectorisable.
inline float fastSigmoid(float x) { return 1.0f / (1.0f + fastExp(-x)); }

/// A sum accumulated in 8 interleaved lanes of T and added up as a fixed
/// tree: the same bits whatever vector width the loop is compiled for (GCC
/// vectorises the 8 lanes as one or two vectors). The order is PyTorch's
/// 8-wide `vec::reduce_all`. `add` may be called on consecutive pieces
/// whose lengths are multiples of 8 (the last one excepted) with the same
/// result as one call.
template <typename T> struct Lanes8 {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  /// Adds f(i) for i in [0, n).
  template <typename F> void add(int64_t n, F f) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l)
        acc[l] += f(i + l);
    for (int l = 0; i + l < n; ++l)
      acc[l] += f(i + l);
  }
  T total() const {
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) +
           ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  }
};

/// sum of f(i) for i in [0, n) in `Lanes8` order.
template <typename T, typename F> inline T sumLanes8(int64_t n, F f) {
  Lanes8<T> s;
  s.add(n, f);
  return s.total();
}

/// y = softmax(x) over `n` contiguous floats (max subtracted first, so
/// large inputs stay finite); y may be x. Vectorised, with clones.
void softmaxRow(const float *x, float *y, int64_t n);

/// d = p * (d - sum(d * p)) over `n` floats: a softmax row's input
/// gradient from the output gradient `d` and the probabilities `p`.
void softmaxGradRow(const float *p, float *d, int64_t n);

/// softmaxRow over each row of a row-major `rows x cols` block, in place;
/// with `causal`, row i keeps keys [0, i] and the others get probability 0
/// (rows must not exceed cols).
void softmaxBlock(float *p, int64_t rows, int64_t cols, bool causal);

/// softmaxGradRow over each row of a block (d in place); with `causal`,
/// the masked entries of d become 0.
void softmaxGradBlock(const float *p, float *d, int64_t rows, int64_t cols,
                      bool causal);

/// y[i] = fastExp(x[i]) for i in [0, n), through the widest clone the CPU
/// runs (the `exp` kernel, and the tests of every clone's accuracy).
void expArray(const float *x, float *y, int64_t n);
/// y[i] = fastSigmoid(x[i]) for i in [0, n).
void sigmoidArray(const float *x, float *y, int64_t n);

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_FASTMATH_H
