//===- Checksum.h - Checksums of plans and model files ----------*- C++ -*-===//
//
// 64-bit FNV-1a, written "fnv1a64:" and 16 hex digits: enough to tell a
// plan or model file that changed (damaged, cut, edited, re-exported) from
// the one loomc saw, without a dependency. Not a defence against someone
// forging a file on purpose.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SUPPORT_CHECKSUM_H
#define LOOM_RUNTIME_SUPPORT_CHECKSUM_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::runtime {

/// The checksum of `bytes`, continuing from `state` (a running checksum).
uint64_t fnv1a64(std::string_view bytes,
                 uint64_t state = 0xcbf29ce484222325ull);

/// "fnv1a64:" and the 16 hex digits of `value`.
std::string checksumText(uint64_t value);

/// The checksum text of the file at `path`, read in blocks.
StatusOr<std::string> fileChecksum(const std::string &path);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_CHECKSUM_H
