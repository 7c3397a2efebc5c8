//===- Numerics.h - Finding NaN and infinity in buffers ---------*- C++ -*-===//
//
// `loom-run --check-numerics` (docs/runtime.md): after each instruction of a
// step, its float outputs are scanned for NaN and infinity, and the first
// value found names the instruction that produced it. The scans test the
// bits, not `std::isfinite`, so they hold under any floating-point flags.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_NUMERICS_H
#define LOOM_RUNTIME_NUMERICS_H

#include <cstdint>
#include <optional>
#include <string>

namespace loom::runtime {

/// A NaN or an infinity found in an array.
struct NonFinite {
  int64_t index = 0;     // element index
  bool nan = false;      // NaN (else an infinity)
  bool negative = false; // the sign bit
};

/// "nan", "inf" or "-inf".
const char *nonFiniteName(const NonFinite &v);

/// The first non-finite element of `n` f32 values, if any.
std::optional<NonFinite> findNonFinite(const float *data, int64_t n);
/// The same for `n` bf16 values (the upper 16 bits of an f32).
std::optional<NonFinite> findNonFiniteBf16(const uint16_t *data, int64_t n);

/// The first NaN of `n` f32 / bf16 values, if any (infinities are skipped).
std::optional<NonFinite> findNan(const float *data, int64_t n);
std::optional<NonFinite> findNanBf16(const uint16_t *data, int64_t n);

/// Where a step first held a NaN or infinity, on one rank.
struct NumericsFault {
  /// The position in the step, for agreeing across ranks on the earliest:
  /// 0 for values present before the first instruction (the step's data,
  /// initial values), i + 1 for instruction i.
  int64_t position = 0;
  /// One line without the `loom-run: error: ` prefix, e.g. `step 3:
  /// instruction 41 'softmax' (ONNX node '/h.0/attn/Softmax') wrote inf to
  /// buffer 't41' at element 7`.
  std::string message;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_NUMERICS_H
