//===- ErrorKind.h - Why compiling failed, for the exit code ---*- C++ -*-===//
//
// A failure is printed as one line where it happens (an MLIR diagnostic or
// loomc's `error:`); what kind of failure it was travels beside it to
// loomc's exit code (docs/loomc.md, "Exit codes"), so that scripts and
// loom-elastic can tell a model Loom cannot train from one that does not
// fit. The place that fails records its kind; an unrecorded failure is bad
// input.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IR_ERRORKIND_H
#define LOOM_IR_ERRORKIND_H

#include <atomic>

namespace mlir::loom {

/// Each kind's value is loomc's exit code.
enum class ErrorKind {
  /// A file, option, shape or value that is wrong: the user can fix it.
  BadInput = 1,
  /// A model that uses what Loom does not support yet (an op, an attribute,
  /// an opset, a data type).
  Unsupported = 2,
  /// No plan fits the devices' memory.
  DoesNotFit = 3,
  /// A bug in Loom.
  Internal = 4,
};

namespace detail {
inline std::atomic<int> recordedErrorKind{0};
} // namespace detail

/// Records why compiling fails; the last recorded kind wins.
inline void recordErrorKind(ErrorKind kind) {
  detail::recordedErrorKind.store(static_cast<int>(kind));
}

/// The recorded kind (bad input when none was), cleared.
inline ErrorKind takeErrorKind() {
  int kind = detail::recordedErrorKind.exchange(0);
  return kind == 0 ? ErrorKind::BadInput : static_cast<ErrorKind>(kind);
}

} // namespace mlir::loom

#endif // LOOM_IR_ERRORKIND_H
