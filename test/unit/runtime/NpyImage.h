//===- NpyImage.h - Hand-made .npy files for the data tests -----*- C++ -*-===//

#ifndef LOOM_TEST_UNIT_RUNTIME_NPYIMAGE_H
#define LOOM_TEST_UNIT_RUNTIME_NPYIMAGE_H

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <unistd.h>

namespace loom::runtime::test {

/// A file name in the test's temporary folder, unique to this process.
inline std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/npytest_" + std::to_string(getpid()) + "_" +
         name;
}

inline void writeRaw(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A hand-made .npy image with `dict` as its header (padded to 64 bytes)
/// and `data`.
inline std::string npyImage(const std::string &dict, const std::string &data,
                            int major = 1) {
  std::string header = dict;
  size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  uint32_t len = header.size();
  out.append(reinterpret_cast<const char *>(&len), major == 1 ? 2 : 4);
  return out + header + data;
}

} // namespace loom::runtime::test

#endif // LOOM_TEST_UNIT_RUNTIME_NPYIMAGE_H
