//===- FastMath.h - Branch-free float math that vectorises -------*- C++ -*-===//
//
// `fastExp` is expf without a libm call: Cody-Waite range reduction
// x = n ln2 + r (|r| <= ln2/2), Cephes' degree-7 polynomial for e^r and
// 2^n built in the exponent bits, applied as two factors 2^(n/2) 2^(n-n/2)
// so that results in the subnormal range round once and overflow gives
// +inf. Every step is a select or arithmetic, so GCC vectorises loops that
// call it (`#pragma omp simd` on the loop; check with -fopt-info-vec).
// Accuracy: within 2 ulp of the correctly rounded result for all finite
// inputs (KernelMathTest.FastExp checks every 97th float), exp(-inf) = 0,
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
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = floatOf((n1 + 127) << 23), s2 = floatOf((n2 + 127) << 23);
  float y = p * s1 * s2;
  return x != x ? x : y;
}

/// 1 / (1 + e^-x), vectorisable.
inline float fastSigmoid(float x) { return 1.0f / (1.0f + fastExp(-x)); }

/// y = softmax(x) over `n` contiguous floats (max subtracted first, so
/// large inputs stay finite); y may be x.
inline void softmaxRow(const float *x, float *y, int64_t n) {
  if (n <= 0)
    return;
  float mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < n; ++i)
    mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    float e = fastExp(x[i] - mx);
    y[i] = e;
    sum += e;
  }
  float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] *= inv;
}

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_FASTMATH_H
