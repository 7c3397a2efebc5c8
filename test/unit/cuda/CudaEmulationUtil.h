//===- CudaEmulationUtil.h - Helpers of the CUDA emulation tests -*- C++
//-*-===//
//
// Shared by the CudaEmulation*Test.cpp files, each of which includes the
// .cu files it tests (runtime/cuda/, built by the host compiler against
// CudaHostEmulation.h) before this header.
//
// Tolerances: each kernel runs on random inputs of order 1 and is compared
// with a double-precision reference (or the generic kernel) of the same
// inputs. These single ops are well-conditioned away from masked entries, so
// the reference moves by ~1e-7 relative when its inputs move by 1e-7; the
// f32 bounds (1e-5 and up, scaled by row length where sums are long) and the
// bf16 bounds (2e-2: a few bf16 ulps) stay 10x or more above that.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_CUDA_CUDAEMULATIONUTIL_H
#define LOOM_TEST_UNIT_CUDA_CUDAEMULATIONUTIL_H

#include "CudaHostEmulation.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace loom::runtime::cuda {
namespace {

namespace emu = ::loom::runtime::test::emu;

int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (auto d : s)
    n *= d;
  return n;
}

template <typename T>
double maxError(const std::vector<T> &got, const std::vector<double> &want) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i)
    e = std::max(e, std::fabs(double(toFloat(got[i])) - want[i]));
  return e;
}

using Bf16 = __nv_bfloat16;

/// The `Elem` tag of a storage type.
template <typename T> constexpr Elem elemOf() {
  return sizeof(T) == 2 ? Elem::BF16 : Elem::F32;
}

float roundBf16(float v) { return toFloat(fromFloat<Bf16>(v)); }

std::vector<Bf16> bf16Of(std::vector<float> &v) {
  std::vector<Bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = fromFloat<Bf16>(v[i]);
    v[i] = toFloat(out[i]);
  }
  return out;
}

std::vector<float> randomValues(int64_t n, float lo, float hi, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(rng);
  return v;
}

} // namespace
} // namespace loom::runtime::cuda

#endif // LOOM_TEST_UNIT_CUDA_CUDAEMULATIONUTIL_H
