//===- Status.h - Error values for the runtime --------------------*- C++ -*-===//
//
// The runtime reports every failure as a value: `Status` (ok or a one-line
// message) and `StatusOr<T>` (a value or a failed `Status`). No exceptions
// cross its APIs and nothing in the libraries calls exit().
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SUPPORT_STATUS_H
#define LOOM_RUNTIME_SUPPORT_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace loom::runtime {

/// Ok, or an error with a one-line message (lowercase, no trailing period).
class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  /// A message longer than `kMaxMessageBytes` keeps its start and end: a
  /// name read from a file (an instruction's `loc`, a buffer's name) may be
  /// megabytes long, and an error stays one readable line.
  static Status error(std::string message);

  bool isOk() const { return !failed; }
  explicit operator bool() const { return !failed; }
  const std::string &message() const { return msg; }

  /// Returns this error with `prefix + ": "` in front (no-op when ok).
  Status withContext(const std::string &prefix) const;

  static constexpr size_t kMaxMessageBytes = 2048;

private:
  bool failed = false;
  std::string msg;
};

/// Builds a failed Status from printf-style arguments.
Status makeError(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/// A value of type `T`, or the Status that explains why there is none.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : val(std::move(value)) {}
  StatusOr(Status status) : st(std::move(status)) {
    assert(!st.isOk() && "StatusOr built from an ok Status");
  }

  bool isOk() const { return val.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return st; }

  T &value() & { return *val; }
  const T &value() const & { return *val; }
  T &&value() && { return std::move(*val); }
  T &operator*() & { return *val; }
  const T &operator*() const & { return *val; }
  T *operator->() { return &*val; }
  const T *operator->() const { return &*val; }

private:
  Status st;
  std::optional<T> val;
};

} // namespace loom::runtime

#define LOOM_STATUS_CONCAT_INNER(a, b) a##b
#define LOOM_STATUS_CONCAT(a, b) LOOM_STATUS_CONCAT_INNER(a, b)

/// Returns the Status of `expr` from the enclosing function when it failed.
#define LOOM_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::loom::runtime::Status loomStatusTmp_ = (expr);                           \
    if (!loomStatusTmp_.isOk())                                                \
      return loomStatusTmp_;                                                   \
  } while (false)

#define LOOM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                             \
  auto tmp = (expr);                                                           \
  if (!tmp.isOk())                                                             \
    return tmp.status();                                                       \
  lhs = std::move(tmp).value()

/// `LOOM_ASSIGN_OR_RETURN(auto x, f());` declares `x` from a StatusOr or
/// returns its error from the enclosing function.
#define LOOM_ASSIGN_OR_RETURN(lhs, expr)                                       \
  LOOM_ASSIGN_OR_RETURN_IMPL(LOOM_STATUS_CONCAT(loomStatusOr_, __LINE__), lhs, \
                             expr)

#endif // LOOM_RUNTIME_SUPPORT_STATUS_H
