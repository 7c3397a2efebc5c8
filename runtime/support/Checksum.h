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

namespace google::protobuf {
class MessageLite;
} // namespace google::protobuf

namespace loom::runtime {

/// The checksum of `bytes`, continuing from `state` (a running checksum).
uint64_t fnv1a64(std::string_view bytes,
                 uint64_t state = 0xcbf29ce484222325ull);

/// "fnv1a64:" and the 16 hex digits of `value`.
std::string checksumText(uint64_t value);

/// `message` serialized with map entries in key order, so that the same
/// message always gives the same bytes; false when it cannot be.
bool serializeDeterministically(const google::protobuf::MessageLite &message,
                                std::string &bytes);

/// The checksum text of `serializeDeterministically(message)` (a plan's or
/// a checkpoint manifest's, taken with its own checksum field empty).
StatusOr<std::string>
messageChecksum(const google::protobuf::MessageLite &message);

/// The checksum text of the file at `path`, read in blocks.
StatusOr<std::string> fileChecksum(const std::string &path);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_CHECKSUM_H
