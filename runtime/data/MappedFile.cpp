//===- MappedFile.cpp - A read-only memory map of a data file ---*- C++ -*-===//

#include "runtime/data/MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::runtime {

StatusOr<std::shared_ptr<MappedFile>>
MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeError("cannot open '%s': %s", path.c_str(),
                     std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return makeError("cannot read '%s': %s", path.c_str(), std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError("'%s' is not a regular file; data files are mapped, so "
                     "give a file, not a %s",
                     path.c_str(),
                     S_ISDIR(st.st_mode) ? "directory" : "device or pipe");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->filePath = path;
  file->bytes = static_cast<uint64_t>(st.st_size);
  if (file->bytes > 0) {
    void *p = ::mmap(nullptr, file->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return makeError("cannot map '%s' (%llu bytes): %s", path.c_str(),
                       (unsigned long long)file->bytes, std::strerror(err));
    }
    file->base = static_cast<const uint8_t *>(p);
  }
  ::close(fd); // the mapping keeps the file
  return file;
}

MappedFile::~MappedFile() {
  if (base)
    ::munmap(const_cast<uint8_t *>(base), bytes);
}

void MappedFile::adviseRandom() const {
  if (base)
    ::madvise(const_cast<uint8_t *>(base), bytes, MADV_RANDOM);
}

void MappedFile::noteRead(uint64_t n) {
  readSinceRelease += n;
  if (readSinceRelease < kReleaseBytes || !base)
    return;
  // A private read-only mapping: dropping its pages loses nothing.
  ::madvise(const_cast<uint8_t *>(base), bytes, MADV_DONTNEED);
  readSinceRelease = 0;
}

} // namespace loom::runtime
