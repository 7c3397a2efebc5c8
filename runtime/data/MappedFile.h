//===- MappedFile.h - A read-only memory map of a data file -----*- C++ -*-===//
//
// Data files are mapped, not read: a rank touches only the pages of the
// samples it trains on, so a file far larger than memory costs each rank
// the pages of its own batches. The pages already fed are handed back to
// the page cache every `kReleaseBytes` of reads, so a long run's resident
// set stays near one step's samples instead of growing to the file's size.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DATA_MAPPEDFILE_H
#define LOOM_RUNTIME_DATA_MAPPEDFILE_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace loom::runtime {

class MappedFile {
public:
  /// Maps `path` read-only. Errors name the file (missing, a directory,
  /// unreadable, unmappable such as a pipe).
  static StatusOr<std::shared_ptr<MappedFile>> open(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const std::string &path() const { return filePath; }
  uint64_t size() const { return bytes; }
  const uint8_t *data() const { return base; }

  /// Says that the reads will jump around (shuffled samples): no
  /// read-ahead beyond the pages asked for.
  void adviseRandom() const;
  /// Counts `n` bytes read; past `kReleaseBytes` since the last release,
  /// the mapping's pages leave this process (they stay in the page cache,
  /// and a later read maps them again).
  void noteRead(uint64_t n);

  static constexpr uint64_t kReleaseBytes = 64ull << 20;

private:
  MappedFile() = default;
  std::string filePath;
  const uint8_t *base = nullptr;
  uint64_t bytes = 0;
  uint64_t readSinceRelease = 0;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DATA_MAPPEDFILE_H
