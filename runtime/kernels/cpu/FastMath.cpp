//===- FastMath.cpp - Vectorised row helpers ---------------------*- C++ -*-===//

#include "runtime/kernels/cpu/FastMath.h"

#include <cmath>

namespace loom::runtime::cpu {

namespace {

inline void softmaxRowInline(const float *x, float *y, int64_t n) {
  float mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < n; ++i)
    mx = x[i] > mx ? x[i] : mx;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = fastExp(x[i] - mx);
  float inv = 1.0f / sumLanes8<float>(n, [&](int64_t i) { return y[i]; });
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] *= inv;
}

inline void softmaxGradRowInline(const float *p, float *d, int64_t n) {
  float dot = sumLanes8<float>(n, [&](int64_t i) { return d[i] * p[i]; });
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    d[i] = p[i] * (d[i] - dot);
}

} // namespace

LOOM_SIMD_CLONES
void softmaxRow(const float *x, float *y, int64_t n) {
  if (n > 0)
    softmaxRowInline(x, y, n);
}

LOOM_SIMD_CLONES
void softmaxGradRow(const float *p, float *d, int64_t n) {
  softmaxGradRowInline(p, d, n);
}

// Causal rows run over all `cols` with the masked scores at -inf: their
// exponentials are exactly 0 and land in the same lanes of the sum, so the
// probabilities are the bits a row of `i + 1` keys gives, without scalar
// tails.
LOOM_SIMD_CLONES
void softmaxBlock(float *p, int64_t rows, int64_t cols, bool causal) {
  if (cols <= 0)
    return;
  for (int64_t i = 0; i < rows; ++i) {
    float *row = p + i * cols;
    if (causal)
      for (int64_t j = i + 1; j < cols; ++j)
        row[j] = -INFINITY;
    softmaxRowInline(row, row, cols);
  }
}

LOOM_SIMD_CLONES
void softmaxGradBlock(const float *p, float *d, int64_t rows, int64_t cols,
                      bool causal) {
  for (int64_t i = 0; i < rows; ++i) {
    float *dr = d + i * cols;
    // Masked entries of p are 0; zero dP there too, so an overflowed dP
    // cannot turn 0 * inf into NaN.
    if (causal)
      for (int64_t j = i + 1; j < cols; ++j)
        dr[j] = 0.0f;
    softmaxGradRowInline(p + i * cols, dr, cols);
  }
}

LOOM_SIMD_CLONES
void expArray(const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = fastExp(x[i]);
}

LOOM_SIMD_CLONES
void sigmoidArray(const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = fastSigmoid(x[i]);
}

} // namespace loom::runtime::cpu
