//===- AtomicFile.h - Files that appear whole or not at all -----*- C++ -*-===//
//
// What loom-run writes for others to read (an exported model, a plan) goes
// to a temporary file beside the target, is flushed to disk, and is renamed
// over the target: a reader sees the old file or the new one, never a
// truncated one (a rank killed mid-write leaves only a temporary, removed on
// error), and two runs writing one path leave one of their files whole,
// never a mix of both.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SUPPORT_ATOMICFILE_H
#define LOOM_RUNTIME_SUPPORT_ATOMICFILE_H

#include "runtime/support/Status.h"

#include <string>

namespace loom::runtime {

/// Replaces `path` with `bytes` atomically (temporary `path.tmp-PID-N` in
/// the same folder, fsync, rename). Errors name the path and the reason.
Status writeFileAtomically(const std::string &path, const std::string &bytes);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_ATOMICFILE_H
