//===- AtomicFile.cpp - Files that appear whole or not at all ---*- C++ -*-===//

#include "runtime/support/AtomicFile.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace loom::runtime {

Status writeFileAtomically(const std::string &path, const std::string &bytes) {
  static std::atomic<unsigned> counter{0};
  std::string temp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                     std::to_string(counter++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return makeError("cannot create '%s': %s", path.c_str(),
                     std::strerror(errno));
  auto fail = [&](const char *what) {
    int err = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    return makeError("cannot %s '%s': %s", what, path.c_str(),
                     std::strerror(err));
  };
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail("write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0)
    return fail("flush");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return makeError("cannot write '%s': %s", path.c_str(), std::strerror(err));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return makeError("cannot replace '%s': %s", path.c_str(),
                     std::strerror(err));
  }
  return Status::ok();
}

} // namespace loom::runtime
