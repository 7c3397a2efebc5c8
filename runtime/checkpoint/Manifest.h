//===- Manifest.h - A checkpoint's manifest.json ------------------*- C++
//-*-===//
//
// The manifest ties a checkpoint's files together (checkpoint.proto), and is
// written as JSON so that people and other tools can read it. It carries a
// checksum of itself: a manifest changed after it was written is refused.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CHECKPOINT_MANIFEST_H
#define LOOM_RUNTIME_CHECKPOINT_MANIFEST_H

#include "runtime/checkpoint/checkpoint.pb.h"
#include "runtime/support/Status.h"

#include <string>

namespace loom::runtime {

/// The checkpoint format version this runtime writes and reads.
constexpr uint32_t kCheckpointFormatVersion = 1;

/// `manifest` as JSON with its `checksum` set (protobuf's JSON mapping,
/// field names as in checkpoint.proto).
StatusOr<std::string> manifestToJson(checkpoint::Manifest manifest);

/// Parses the manifest at `path` and checks its checksum and version.
/// Errors are one line and start with `path`.
StatusOr<checkpoint::Manifest> readManifest(const std::string &path);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_CHECKPOINT_MANIFEST_H
