//===- Status.cpp - Error values for the runtime ----------------*- C++ -*-===//

#include "runtime/support/Status.h"

#include <cstdarg>
#include <cstdio>
#include <vector>

namespace loom::runtime {

Status Status::error(std::string message) {
  Status s;
  s.failed = true;
  if (message.size() > kMaxMessageBytes) {
    size_t head = kMaxMessageBytes * 3 / 4, tail = kMaxMessageBytes / 8;
    size_t cut = message.size() - head - tail;
    message = message.substr(0, head) + " [... " + std::to_string(cut) +
              " bytes cut ...] " + message.substr(message.size() - tail);
  }
  s.msg = std::move(message);
  return s;
}

Status Status::withContext(const std::string &prefix) const {
  if (isOk())
    return *this;
  return Status::error(prefix + ": " + msg);
}

Status makeError(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int len = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::vector<char> buf(len > 0 ? len + 1 : 1);
  std::vsnprintf(buf.data(), buf.size(), fmt, args);
  va_end(args);
  return Status::error(std::string(buf.data()));
}

} // namespace loom::runtime
