//===- CheckpointFuzzer.cpp - Fuzz target: the checkpoint loader ----------===//
//
// Bytes as a checkpoint's manifest.json, through `readManifest` as
// `--resume` reads one (size, JSON, format version, checksum). The checksum
// catches damage, not an author, so the manifest is then taken as if its
// checksum were right: written back with `manifestToJson`, which
// `readManifest` must accept, and each tensor's blocks checked and copied by
// `loadShard`, as `loadCheckpoint` does, into a whole copy of the tensor and
// into two shards of it (rows 1 onward, the last row). The bytes of a block
// read are zeros, those of its chunks not read a marker: a block list
// `loadShard` accepts must fill every element of the shard from bytes it
// read; an element left as it was, or copied from a chunk not read, is a
// silent wrong answer and aborts the run.
//
//===----------------------------------------------------------------------===//

#include "runtime/PlanFormat.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Manifest.h"
#include "runtime/support/HostTensor.h"

#include <google/protobuf/util/json_util.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace loom::runtime;
namespace checkpoint = loom::checkpoint;

namespace {

/// The largest tensor tried (elements), and the largest block read: a
/// plan's tensors are the plan's to bound, a block's bytes its file's.
/// Enough for blocks of a few chunks.
constexpr int64_t kMaxElements = 1 << 21;
constexpr int64_t kMaxBlockBytes = 1 << 24;
constexpr uint8_t kNotRead = 0xA5;

/// `readManifest` over `text` in a memory file.
StatusOr<checkpoint::Manifest> readFromMemory(const std::string &text) {
  int fd = memfd_create("manifest.json", 0);
  if (fd < 0)
    return Status::error("memfd_create failed");
  StatusOr<checkpoint::Manifest> manifest = Status::error("short write");
  if (write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()))
    manifest = readManifest("/proc/self/fd/" + std::to_string(fd));
  close(fd);
  return manifest;
}

/// `t`'s global shape when it is one a plan could hold (sizes >= 0, at
/// most kMaxElements elements).
bool smallShape(const checkpoint::Tensor &t, std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : t.global_shape()) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      return false;
    shape.push_back(d);
  }
  return true;
}

/// A block as `CheckpointFiles::read` returns it: zeros where read (all of
/// it, or the chunks marked), kNotRead elsewhere.
StatusOr<std::vector<uint8_t>> readBlock(const checkpoint::Block &b,
                                         const std::vector<bool> &chunks) {
  if (b.size_bytes() < 0 || b.size_bytes() > kMaxBlockBytes)
    return Status::error("the block is larger than its file");
  std::vector<uint8_t> bytes(static_cast<size_t>(b.size_bytes()), 0);
  if (chunks.empty())
    return bytes;
  if (static_cast<int64_t>(chunks.size()) != chunkCount(b.size_bytes()))
    return Status::error("the block has another number of chunks");
  for (size_t c = 0; c < chunks.size(); ++c)
    if (!chunks[c]) {
      int64_t begin = static_cast<int64_t>(c) * kChunkBytes;
      int64_t end = std::min(begin + kChunkBytes, b.size_bytes());
      std::fill(bytes.begin() + begin, bytes.begin() + end, kNotRead);
    }
  return bytes;
}

/// Loads `t` into the shard `mine` as `loadCheckpoint` does; when it is
/// accepted, every element must have been read.
void loadInto(const checkpoint::Tensor &t, const ShardLayout &mine,
              int64_t elemBytes) {
  std::vector<uint8_t> dst(
      static_cast<size_t>(numElements(mine.local) * elemBytes), kNotRead);
  if (!loadShard(t, mine, elemBytes, readBlock, dst.data(), 0, "fuzz"))
    return;
  if (std::any_of(dst.begin(), dst.end(), [](uint8_t v) { return v != 0; })) {
    std::fprintf(stderr, "loadShard accepted blocks that leave elements of "
                         "the shard unwritten or not read\n");
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  (void)readFromMemory(text);

  checkpoint::Manifest manifest;
  if (!google::protobuf::util::JsonStringToMessage(text, &manifest).ok() ||
      manifest.format_version() != kCheckpointFormatVersion)
    return 0;
  if (StatusOr<std::string> json = manifestToJson(manifest)) {
    if (StatusOr<checkpoint::Manifest> back = readFromMemory(*json); !back) {
      std::fprintf(stderr,
                   "readManifest refuses what manifestToJson wrote: %s\n",
                   back.status().message().c_str());
      std::abort();
    }
  }

  for (const checkpoint::Tensor &t : manifest.tensors()) {
    std::vector<int64_t> global;
    int64_t elemBytes = dtypeSize(t.dtype());
    if (elemBytes <= 0 || !smallShape(t, global))
      continue;
    std::vector<int64_t> origin(global.size(), 0);
    loadInto(t, blockLayout(global, origin, global), elemBytes);
    // Rows 1 onward, and the last row (of a large block, its last chunk).
    if (!global.empty() && global[0] > 1) {
      std::vector<int64_t> offset = origin, local = global;
      offset[0] = 1;
      local[0] -= 1;
      loadInto(t, blockLayout(global, offset, local), elemBytes);
      offset[0] = global[0] - 1;
      local[0] = 1;
      loadInto(t, blockLayout(global, offset, local), elemBytes);
    }
  }
  return 0;
}
