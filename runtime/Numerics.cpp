//===- Numerics.cpp - Finding NaN and infinity in buffers -------*- C++ -*-===//

#include "runtime/Numerics.h"

#include <algorithm>
#include <cstring>

namespace loom::runtime {

namespace {

/// The bits of an f32 (`uint32_t`) or a bf16 (`uint16_t`): a value is
/// non-finite when its exponent bits are all ones, NaN when its mantissa is
/// not zero as well.
template <typename Bits> struct Format {
  static constexpr Bits kSign = Bits(1) << (8 * sizeof(Bits) - 1);
  static constexpr Bits kAbs = kSign - 1;
  static constexpr Bits kInf =
      sizeof(Bits) == 4 ? Bits(0x7f800000u) : Bits(0x7f80u);
};

/// The first element that is NaN (with `nanOnly`) or non-finite. Scans
/// blocks with a branch-free test (which vectorises) and looks for the
/// element only in a block that has one. The bits are read with memcpy,
/// which is how C++ lets a float be read as an integer.
template <typename Bits>
std::optional<NonFinite> scan(const void *data, int64_t n, bool nanOnly) {
  using F = Format<Bits>;
  const auto *bytes = static_cast<const unsigned char *>(data);
  auto at = [&](int64_t i) {
    Bits b;
    std::memcpy(&b, bytes + i * sizeof(Bits), sizeof(Bits));
    return b;
  };
  // abs > limit: NaN when limit is inf, non-finite when it is the largest
  // finite value.
  const Bits limit = nanOnly ? F::kInf : Bits(F::kInf - 1);
  constexpr int64_t kBlock = 1024;
  for (int64_t start = 0; start < n; start += kBlock) {
    int64_t end = std::min(n, start + kBlock);
    bool any = false;
    for (int64_t i = start; i < end; ++i)
      any |= Bits(at(i) & F::kAbs) > limit;
    if (!any)
      continue;
    for (int64_t i = start; i < end; ++i) {
      Bits b = at(i);
      if (Bits(b & F::kAbs) > limit)
        return NonFinite{i, Bits(b & F::kAbs) > F::kInf, (b & F::kSign) != 0};
    }
  }
  return std::nullopt;
}

} // namespace

const char *nonFiniteName(const NonFinite &v) {
  return v.nan ? "nan" : v.negative ? "-inf" : "inf";
}

std::optional<NonFinite> findNonFinite(const float *data, int64_t n) {
  static_assert(sizeof(float) == sizeof(uint32_t));
  return scan<uint32_t>(data, n, false);
}

std::optional<NonFinite> findNonFiniteBf16(const uint16_t *data, int64_t n) {
  return scan<uint16_t>(data, n, false);
}

std::optional<NonFinite> findNan(const float *data, int64_t n) {
  return scan<uint32_t>(data, n, true);
}

std::optional<NonFinite> findNanBf16(const uint16_t *data, int64_t n) {
  return scan<uint16_t>(data, n, true);
}

} // namespace loom::runtime
