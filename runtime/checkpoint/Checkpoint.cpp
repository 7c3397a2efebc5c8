//===- Checkpoint.cpp - Sharded checkpoints that load under any plan ------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/PlanFormat.h"
#include "runtime/checkpoint/CheckpointLayout.h"
#include "runtime/checkpoint/Manifest.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Checksum.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::runtime {

namespace fs = std::filesystem;

namespace {

constexpr const char *kStepPrefix = "step-";
constexpr const char *kPartial = ".partial";

std::string rankFileName(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.bin", rank);
  return name;
}

/// Sends the message of rank `from` to every rank (collective).
StatusOr<std::string> shareMessage(Communicator &world, int from,
                                   std::string message) {
  int64_t length = static_cast<int64_t>(message.size());
  LOOM_RETURN_IF_ERROR(world.broadcast(&length, sizeof length, from));
  message.resize(static_cast<size_t>(length));
  if (length > 0)
    LOOM_RETURN_IF_ERROR(world.broadcast(message.data(), length, from));
  return message;
}

/// Every rank's outcome as one: the error of the lowest failing rank, on
/// every rank (collective).
Status agreeOnError(Communicator &world, const Status &local) {
  int mine = local.isOk() ? INT_MAX : world.rank();
  LOOM_ASSIGN_OR_RETURN(int lowest, world.allReduceMin(mine));
  if (lowest == INT_MAX)
    return Status::ok();
  LOOM_ASSIGN_OR_RETURN(
      std::string message,
      shareMessage(world, lowest, local.isOk() ? "" : local.message()));
  if (lowest != 0)
    message = "rank " + std::to_string(lowest) + ": " + message;
  return Status::error(message);
}

/// Flushes the folder `dir`'s entries (a rename into it) to disk.
Status syncFolder(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return makeError("cannot open folder '%s': %s", dir.c_str(),
                     std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0)
    return makeError("cannot sync folder '%s': %s", dir.c_str(),
                     std::strerror(err));
  return Status::ok();
}

/// A file written front to back and synced to disk when closed.
class SyncedFile {
public:
  ~SyncedFile() {
    if (fd >= 0)
      ::close(fd);
  }
  Status create(const std::string &name) {
    path = name;
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      return makeError("cannot create '%s': %s", path.c_str(),
                       std::strerror(errno));
    return Status::ok();
  }
  Status append(const void *data, size_t size) {
    const char *at = static_cast<const char *>(data);
    while (size > 0) {
      ssize_t n = ::write(fd, at, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return makeError("cannot write '%s': %s", path.c_str(),
                         std::strerror(errno));
      at += n;
      size -= static_cast<size_t>(n);
    }
    return Status::ok();
  }
  Status close() {
    int rc = ::fsync(fd);
    rc |= ::close(fd);
    fd = -1;
    if (rc != 0)
      return makeError("cannot write '%s': %s", path.c_str(),
                       std::strerror(errno));
    return Status::ok();
  }

private:
  std::string path;
  int fd = -1;
};

/// Rank 0, before the ranks write: `dir` exists, and `partial` is an empty
/// folder (what a killed writer left there is removed).
Status prepareFolder(const std::string &dir, const std::string &partial) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return makeError("--checkpoint-dir '%s': cannot create it: %s", dir.c_str(),
                     ec.message().c_str());
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(kStepPrefix, 0) == 0 && name.size() > 8 &&
        name.compare(name.size() - 8, 8, kPartial) == 0)
      fs::remove_all(e.path(), ec);
  }
  fs::create_directory(partial, ec);
  if (ec)
    return makeError("cannot create '%s': %s", partial.c_str(),
                     ec.message().c_str());
  return Status::ok();
}

/// Rank 0, after every rank's blocks are on disk: the manifest, then the
/// folder made visible under its final name, then the oldest pruned.
Status publish(const checkpoint::Manifest &manifest, const std::string &dir,
               const std::string &partial, const std::string &final,
               int64_t keep) {
  LOOM_ASSIGN_OR_RETURN(std::string json, manifestToJson(manifest));
  LOOM_RETURN_IF_ERROR(writeFileAtomically(partial + "/manifest.json", json));
  LOOM_RETURN_IF_ERROR(syncFolder(partial));
  std::error_code ec;
  // A checkpoint of the same step from an earlier run (resumed from before
  // it) is replaced; it stays whole until the new one takes its name.
  std::string old = final + ".old";
  if (fs::exists(final, ec)) {
    fs::remove_all(old, ec);
    fs::rename(final, old, ec);
    if (ec)
      return makeError("cannot replace '%s': %s", final.c_str(),
                       ec.message().c_str());
  }
  fs::rename(partial, final, ec);
  if (ec)
    return makeError("cannot rename '%s' to '%s': %s", partial.c_str(),
                     final.c_str(), ec.message().c_str());
  LOOM_RETURN_IF_ERROR(syncFolder(dir));
  fs::remove_all(old, ec);
  if (keep > 0) {
    std::vector<int64_t> steps = listCheckpoints(dir);
    for (size_t i = static_cast<size_t>(keep); i < steps.size(); ++i)
      fs::remove_all(checkpointPath(dir, steps[i]), ec);
  }
  return Status::ok();
}

checkpoint::Position toProto(const TrainingPosition &p) {
  checkpoint::Position out;
  out.set_step(p.step);
  out.set_global_batch(p.globalBatch);
  out.set_order(p.shuffled ? "shuffled" : "sequential");
  out.set_seed(p.seed);
  out.set_samples_seen(p.step * p.globalBatch);
  out.set_data_samples(p.dataSamples);
  return out;
}

TrainingPosition fromProto(const checkpoint::Position &p) {
  TrainingPosition out;
  out.step = p.step();
  out.globalBatch = p.global_batch();
  out.shuffled = p.order() == "shuffled";
  out.seed = p.seed();
  out.dataSamples = p.data_samples();
  return out;
}

std::string orderText(bool shuffled, uint64_t seed) {
  return shuffled ? "shuffled with seed " + std::to_string(seed)
                  : std::string("sequential");
}

} // namespace

std::string checkpointPath(const std::string &dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "%s%08lld", kStepPrefix, (long long)step);
  return (fs::path(dir) / name).string();
}

std::vector<int64_t> listCheckpoints(const std::string &dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(kStepPrefix, 0) != 0 || !e.is_directory(ec))
      continue;
    std::string digits = name.substr(std::strlen(kStepPrefix));
    if (digits.empty() || digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    steps.push_back(std::stoll(digits));
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

namespace {

/// The chunk checksums of a block (none for a block of one chunk).
int64_t listedChunks(int64_t blockBytes) {
  int64_t n = chunkCount(blockBytes);
  return n > 1 ? n : 0;
}

/// Where each block's chunk checksums start among its rank's, by rank and
/// `indexInRank`, in `starts`; returns the most any rank has.
int64_t chunkStarts(const CheckpointLayout &layout,
                    std::vector<std::vector<int64_t>> &starts) {
  starts.assign(layout.blocksPerRank.size(), {});
  for (size_t r = 0; r < starts.size(); ++r)
    starts[r].assign(static_cast<size_t>(layout.blocksPerRank[r]) + 1, 0);
  for (const CheckpointTensor &t : layout.tensors)
    for (const CheckpointBlock &b : t.blocks)
      starts[b.rank][b.indexInRank + 1] = listedChunks(b.sizeBytes);
  int64_t most = 0;
  for (std::vector<int64_t> &s : starts) {
    for (size_t i = 1; i < s.size(); ++i)
      s[i] += s[i - 1];
    most = std::max(most, s.back());
  }
  return most;
}

/// Writes rank `me`'s blocks of `layout` to `path` in file order, keeping
/// each one's checksum at its index among them in `sums`, and its chunks'
/// at `starts[me][index]` on in `chunkSums`.
Status writeBlocks(const Executor &exec, const CheckpointLayout &layout,
                   const std::string &path, const std::string &what, int me,
                   std::vector<uint64_t> &sums,
                   const std::vector<std::vector<int64_t>> &starts,
                   std::vector<uint64_t> &chunkSums) {
  SyncedFile file;
  LOOM_RETURN_IF_ERROR(file.create(path));
  for (const CheckpointTensor &t : layout.tensors)
    for (const CheckpointBlock &b : t.blocks) {
      if (b.rank != me)
        continue;
      HostTensor value = exec.readBuffer(*b.buffer);
      if (static_cast<int64_t>(value.bytes.size()) != b.sizeBytes)
        return makeError("%s: %s: rank %d's shard is %zu bytes, the plan "
                         "says %lld",
                         what.c_str(), t.key.describe().c_str(), me,
                         value.bytes.size(), (long long)b.sizeBytes);
      const char *data = reinterpret_cast<const char *>(value.bytes.data());
      sums[static_cast<size_t>(b.indexInRank)] =
          fnv1a64({data, value.bytes.size()});
      int64_t first = starts[me][b.indexInRank];
      for (int64_t c = 0; c < listedChunks(b.sizeBytes); ++c) {
        int64_t begin = c * kChunkBytes;
        int64_t end = std::min(b.sizeBytes, begin + kChunkBytes);
        chunkSums[static_cast<size_t>(first + c)] =
            fnv1a64({data + begin, static_cast<size_t>(end - begin)});
      }
      LOOM_RETURN_IF_ERROR(file.append(value.bytes.data(), value.bytes.size()));
    }
  return file.close();
}

} // namespace

Status saveCheckpoint(const Session &session, Communicator &world,
                      const std::string &dir, const TrainingPosition &position,
                      int64_t keep) {
  const plan::Plan &plan = session.plan();
  const Executor &exec = session.executor();
  const std::string final = checkpointPath(dir, position.step);
  const std::string partial = final + kPartial;
  int me = world.rank();

  StatusOr<CheckpointLayout> layout = computeCheckpointLayout(plan, final);
  Status prepared = layout.status();
  if (prepared.isOk() && me == 0)
    prepared = prepareFolder(dir, partial);
  LOOM_RETURN_IF_ERROR(agreeOnError(world, prepared));

  // This rank's blocks, in file order, and their checksums.
  int maxBlocks = std::max(1, *std::max_element(layout->blocksPerRank.begin(),
                                                layout->blocksPerRank.end()));
  std::vector<uint64_t> sums(static_cast<size_t>(maxBlocks), 0);
  std::vector<std::vector<int64_t>> starts;
  int64_t maxChunks = std::max<int64_t>(1, chunkStarts(*layout, starts));
  std::vector<uint64_t> chunkSums(static_cast<size_t>(maxChunks), 0);
  Status wrote = Status::ok();
  if (layout->blocksPerRank[me] > 0)
    wrote = writeBlocks(exec, *layout, partial + "/" + rankFileName(me), final,
                        me, sums, starts, chunkSums);
  LOOM_RETURN_IF_ERROR(agreeOnError(world, wrote));

  std::vector<uint64_t> all(sums.size() * static_cast<size_t>(world.size()));
  LOOM_RETURN_IF_ERROR(world.allGather(sums.data(), all.data(),
                                       maxBlocks * int64_t(sizeof(uint64_t))));
  std::vector<uint64_t> allChunks(chunkSums.size() *
                                  static_cast<size_t>(world.size()));
  LOOM_RETURN_IF_ERROR(world.allGather(chunkSums.data(), allChunks.data(),
                                       maxChunks * int64_t(sizeof(uint64_t))));
  Status published = Status::ok();
  if (me == 0) {
    checkpoint::Manifest manifest;
    manifest.set_format_version(kCheckpointFormatVersion);
    manifest.set_producer("loom-run");
    *manifest.mutable_position() = toProto(position);
    manifest.set_optimizer(plan.training().optimizer());
    manifest.set_mesh(meshToString(plan));
    manifest.set_world_size(plan.world_size());
    manifest.set_zero_stage(plan.training().zero_stage());
    for (const CheckpointTensor &t : layout->tensors) {
      checkpoint::Tensor *out = manifest.add_tensors();
      out->set_role(t.key.role);
      out->set_name(t.key.name);
      out->set_state(t.key.state);
      out->set_dtype(t.dtype);
      for (int64_t d : t.globalShape)
        out->add_global_shape(d);
      for (const CheckpointBlock &b : t.blocks) {
        checkpoint::Block *block = out->add_blocks();
        block->set_file(rankFileName(b.rank));
        block->set_offset(b.offset);
        block->set_size_bytes(b.sizeBytes);
        block->set_checksum(checksumText(
            all[static_cast<size_t>(b.rank) * maxBlocks + b.indexInRank]));
        if (int64_t n = listedChunks(b.sizeBytes); n > 0) {
          block->set_chunk_bytes(kChunkBytes);
          size_t first = static_cast<size_t>(b.rank * maxChunks +
                                             starts[b.rank][b.indexInRank]);
          for (int64_t c = 0; c < n; ++c)
            block->add_chunk_checksums(checksumText(allChunks[first + c]));
        }
        for (const std::vector<ShardSegment> &segments : b.layout.dims) {
          checkpoint::BlockDim *dim = block->add_dims();
          for (const ShardSegment &s : segments) {
            checkpoint::Run *run = dim->add_runs();
            run->set_start(s.globalStart);
            run->set_length(s.length);
          }
        }
      }
    }
    published = publish(manifest, dir, partial, final, keep);
  }
  return agreeOnError(world, published);
}

namespace {

/// The block `b` of a tensor of shape `global` as a shard layout, checked
/// against the tensor (runs inside it, the size its runs give).
StatusOr<ShardLayout> blockShard(const checkpoint::Block &b,
                                 const std::vector<int64_t> &global,
                                 int64_t elemBytes, const std::string &what) {
  if (b.dims_size() != static_cast<int>(global.size()))
    return makeError("%s: a block has %d dimension(s), the tensor %zu",
                     what.c_str(), b.dims_size(), global.size());
  ShardLayout layout;
  layout.global = global;
  layout.dims.resize(global.size());
  for (size_t d = 0; d < global.size(); ++d) {
    int64_t local = 0, end = 0;
    for (const checkpoint::Run &r : b.dims(static_cast<int>(d)).runs()) {
      if (r.start() < 0 || r.length() <= 0 || r.start() > global[d] ||
          r.length() > global[d] - r.start())
        return makeError("%s: a block's run [%lld, +%lld) of dimension %zu "
                         "lies outside its size %lld",
                         what.c_str(), (long long)r.start(),
                         (long long)r.length(), d, (long long)global[d]);
      // Increasing and disjoint, as written: a block then holds each
      // element once, and its shape fits the tensor's.
      if (r.start() < end)
        return makeError("%s: a block's run [%lld, +%lld) of dimension %zu "
                         "starts before the end %lld of the run before it "
                         "(an edited or damaged manifest)",
                         what.c_str(), (long long)r.start(),
                         (long long)r.length(), d, (long long)end);
      end = r.start() + r.length();
      layout.dims[d].push_back({r.start(), local, r.length()});
      local += r.length();
    }
    layout.local.push_back(local);
  }
  if (b.size_bytes() != numElements(layout.local) * elemBytes)
    return makeError("%s: a block of shape %s is %lld bytes, expected %lld",
                     what.c_str(), shapeToString(layout.local).c_str(),
                     (long long)b.size_bytes(),
                     (long long)(numElements(layout.local) * elemBytes));
  return layout;
}

/// Whether two shards of one tensor share an element.
bool overlaps(const ShardLayout &a, const ShardLayout &b) {
  for (size_t d = 0; d < a.dims.size(); ++d) {
    bool any = false;
    for (const ShardSegment &x : a.dims[d])
      for (const ShardSegment &y : b.dims[d])
        any |= std::max(x.globalStart, y.globalStart) <
               std::min(x.globalStart + x.length, y.globalStart + y.length);
    if (!any)
      return false;
  }
  return true;
}

} // namespace

CheckpointFiles::~CheckpointFiles() {
  for (auto &[name, fd] : fds)
    ::close(fd);
}

StatusOr<int> CheckpointFiles::open(const checkpoint::Block &b,
                                    const std::string &what) {
  const std::string &name = b.file();
  if (name.empty() || name.find('/') != std::string::npos || name == "." ||
      name == "..")
    return makeError("%s: a block names the file '%s'; blocks lie in "
                     "files of the checkpoint's folder",
                     what.c_str(), name.c_str());
  std::string path = folder + "/" + name;
  auto it = fds.find(name);
  if (it == fds.end()) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return makeError("%s: cannot open '%s': %s", what.c_str(), path.c_str(),
                       std::strerror(errno));
    it = fds.emplace(name, fd).first;
  }
  struct stat st;
  if (::fstat(it->second, &st) != 0 || b.offset() < 0 ||
      b.offset() > st.st_size || b.size_bytes() < 0 ||
      b.size_bytes() > st.st_size - b.offset())
    return makeError("%s: '%s' is %lld bytes, too short for a block of "
                     "%lld at %lld (a cut or damaged checkpoint)",
                     what.c_str(), path.c_str(), (long long)st.st_size,
                     (long long)b.size_bytes(), (long long)b.offset());
  return it->second;
}

StatusOr<std::vector<uint8_t>>
CheckpointFiles::read(const checkpoint::Block &b,
                      const std::vector<bool> &chunks,
                      const std::string &what) {
  LOOM_ASSIGN_OR_RETURN(int fd, open(b, what));
  std::string path = folder + "/" + b.file();
  std::vector<uint8_t> bytes(static_cast<size_t>(b.size_bytes()));
  // [begin, end) of the block, checked against `expected`.
  auto readRange = [&](int64_t begin, int64_t end, const std::string &expected,
                       const std::string &which) -> Status {
    int64_t done = begin;
    while (done < end) {
      ssize_t n = ::pread(fd, bytes.data() + done, end - done,
                          b.offset() + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return makeError("%s: cannot read '%s': %s", what.c_str(), path.c_str(),
                         n == 0 ? "unexpected end" : std::strerror(errno));
      done += n;
    }
    readBytes += end - begin;
    std::string sum = checksumText(
        fnv1a64({reinterpret_cast<const char *>(bytes.data() + begin),
                 static_cast<size_t>(end - begin)}));
    if (sum != expected)
      return makeError("%s: the %s at byte %lld of '%s' has checksum %s, "
                       "the manifest says %s (a damaged checkpoint)",
                       what.c_str(), which.c_str(),
                       (long long)(b.offset() + begin), path.c_str(),
                       sum.c_str(), expected.c_str());
    return Status::ok();
  };
  bool partial = !chunks.empty() &&
                 std::find(chunks.begin(), chunks.end(), false) != chunks.end();
  if (!partial) {
    LOOM_RETURN_IF_ERROR(readRange(0, b.size_bytes(), b.checksum(), "block"));
    return bytes;
  }
  int64_t count = chunkCount(b.size_bytes());
  if (b.chunk_bytes() != kChunkBytes || b.chunk_checksums_size() != count ||
      static_cast<int64_t>(chunks.size()) != count)
    return makeError("%s: the block at byte %lld of '%s' lists %d chunk "
                     "checksum(s) of %lld bytes; a block of %lld bytes has "
                     "%lld of %lld (an edited or damaged manifest)",
                     what.c_str(), (long long)b.offset(), path.c_str(),
                     b.chunk_checksums_size(), (long long)b.chunk_bytes(),
                     (long long)b.size_bytes(), (long long)count,
                     (long long)kChunkBytes);
  for (int64_t c = 0; c < count; ++c)
    if (chunks[c])
      LOOM_RETURN_IF_ERROR(readRange(
          c * kChunkBytes, std::min(b.size_bytes(), (c + 1) * kChunkBytes),
          b.chunk_checksums(static_cast<int>(c)), "chunk"));
  return bytes;
}

int64_t chunkCount(int64_t blockBytes) {
  return blockBytes <= kChunkBytes
             ? 1
             : (blockBytes + kChunkBytes - 1) / kChunkBytes;
}

Status loadShard(const checkpoint::Tensor &t, const ShardLayout &mine,
                 int64_t elemBytes, const BlockReadFn &read, void *dst,
                 int rank, const std::string &what) {
  // Blocks that overlap each other could add up to the right count and
  // leave elements unwritten: the shard's elements are counted once each.
  std::vector<uint8_t> written(static_cast<size_t>(numElements(mine.local)));
  std::vector<uint8_t> ones; // over `mine`, made when a block has chunks
  int64_t total = 0;
  for (const checkpoint::Block &block : t.blocks()) {
    LOOM_ASSIGN_OR_RETURN(ShardLayout shard,
                          blockShard(block, mine.global, elemBytes, what));
    total += numElements(shard.local);
    if (!overlaps(shard, mine))
      continue;
    // The chunks holding elements of `mine`, when the block has chunks.
    std::vector<bool> chunks;
    if (block.chunk_checksums_size() > 0) {
      std::vector<uint8_t> need(static_cast<size_t>(numElements(shard.local)));
      if (ones.empty())
        ones.assign(static_cast<size_t>(numElements(mine.local)), 1);
      copyShardToShard(mine, ones.data(), shard, need.data(), 1);
      int64_t perChunk = kChunkBytes / elemBytes;
      chunks.assign(static_cast<size_t>(chunkCount(block.size_bytes())), false);
      for (size_t e = 0; e < need.size(); ++e)
        if (need[e] && static_cast<size_t>(e / perChunk) < chunks.size())
          chunks[e / perChunk] = true;
    }
    LOOM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read(block, chunks));
    copyShardToShard(shard, bytes.data(), mine, dst, elemBytes);
    std::vector<uint8_t> ones(static_cast<size_t>(numElements(shard.local)), 1);
    copyShardToShard(shard, ones.data(), mine, written.data(), 1);
  }
  int64_t covered = std::count(written.begin(), written.end(), 1);
  if (total != numElements(mine.global) || covered != numElements(mine.local))
    return makeError("%s: its blocks hold %lld of its %lld elements and %lld "
                     "of the %lld of rank %d's shard (a missing or damaged "
                     "block list)",
                     what.c_str(), (long long)total,
                     (long long)numElements(mine.global), (long long)covered,
                     (long long)numElements(mine.local), rank);
  return Status::ok();
}

namespace {

/// Checks that the manifest holds exactly the tensors of `plan`.
Status checkSameModel(const checkpoint::Manifest &manifest,
                      const plan::Plan &plan, const std::string &path) {
  std::map<TensorKey, TensorShape> wanted = planTensors(plan);
  std::string otherOptimizer =
      manifest.optimizer() == plan.training().optimizer()
          ? ""
          : " (or of another optimizer: it was written under " +
                manifest.optimizer() + ")";
  std::map<TensorKey, const checkpoint::Tensor *> held;
  for (const checkpoint::Tensor &t : manifest.tensors()) {
    TensorKey key{t.role(), t.name(), t.state()};
    if (!wanted.count(key))
      return makeError("%s holds the %s, which the plan has not: a "
                       "checkpoint of another model%s",
                       path.c_str(), key.describe().c_str(),
                       otherOptimizer.c_str());
    held[key] = &t;
  }
  for (const auto &[key, shape] : wanted) {
    auto it = held.find(key);
    if (it == held.end())
      return makeError("%s holds no %s: a checkpoint of another model%s",
                       path.c_str(), key.describe().c_str(),
                       otherOptimizer.c_str());
    const checkpoint::Tensor &t = *it->second;
    std::vector<int64_t> global(t.global_shape().begin(),
                                t.global_shape().end());
    if (t.dtype() != shape.dtype || global != shape.globalShape)
      return makeError("%s: the %s is %s %s there and %s %s in the plan: a "
                       "checkpoint of another model",
                       path.c_str(), key.describe().c_str(),
                       dtypeName(t.dtype()), shapeToString(global).c_str(),
                       dtypeName(shape.dtype),
                       shapeToString(shape.globalShape).c_str());
  }
  return Status::ok();
}

/// Checks that the run resumes where the checkpoint left off: same batch,
/// order and data (fatal: every checkpoint of the run would disagree).
Status checkPosition(const TrainingPosition &saved,
                     const TrainingPosition &current, const std::string &path) {
  if (saved.globalBatch != current.globalBatch)
    return makeError("%s was written by a run of global batch %lld, and this "
                     "plan's is %lld; compile the plan with --global-batch "
                     "%lld to resume it",
                     path.c_str(), (long long)saved.globalBatch,
                     (long long)current.globalBatch,
                     (long long)saved.globalBatch);
  if (saved.shuffled != current.shuffled ||
      (saved.shuffled && saved.seed != current.seed))
    return makeError("%s was written by a run reading its data %s, and this "
                     "run's order is %s; resume with the same --order and "
                     "--seed",
                     path.c_str(),
                     orderText(saved.shuffled, saved.seed).c_str(),
                     orderText(current.shuffled, current.seed).c_str());
  if (saved.dataSamples != current.dataSamples)
    return makeError("%s was written by a run whose data held %lld "
                     "sample(s), and this run's holds %lld; resume with the "
                     "same data",
                     path.c_str(), (long long)saved.dataSamples,
                     (long long)current.dataSamples);
  return Status::ok();
}

} // namespace

StatusOr<TrainingPosition> loadCheckpoint(Session &session,
                                          const std::string &path,
                                          const TrainingPosition &current,
                                          LoadFailure *failure) {
  auto fail = [&](Status s, bool fatal = false) -> Status {
    if (failure)
      *failure = {s.message(), fatal};
    return s;
  };
  StatusOr<checkpoint::Manifest> read = readManifest(path + "/manifest.json");
  if (!read.isOk())
    return fail(read.status());
  const checkpoint::Manifest &manifest = *read;
  const plan::Plan &plan = session.plan();
  if (Status s = checkSameModel(manifest, plan, path); !s)
    return fail(s);
  TrainingPosition saved = fromProto(manifest.position());
  if (Status s = checkPosition(saved, current, path); !s)
    return fail(s, /*fatal=*/true);

  std::map<TensorKey, const checkpoint::Tensor *> tensors;
  for (const checkpoint::Tensor &t : manifest.tensors())
    tensors[{t.role(), t.name(), t.state()}] = &t;
  Executor &exec = session.executor();
  std::vector<int64_t> sizes = meshSizes(plan);
  std::vector<int64_t> coords = meshCoordinates(exec.rank(), sizes);
  CheckpointFiles files(path);
  for (const plan::Buffer &b : exec.program().buffers()) {
    if (!isCheckpointed(b))
      continue;
    TensorKey key = tensorKey(b);
    const checkpoint::Tensor &t = *tensors.at(key);
    std::string what = path + ": " + key.describe();
    ShardLayout mine = shardLayout(b, sizes, coords);
    HostTensor value(b.dtype() == plan::I64 ? ElemType::I64 : ElemType::F32,
                     mine.local);
    auto read = [&](const checkpoint::Block &block,
                    const std::vector<bool> &chunks) {
      return files.read(block, chunks, what);
    };
    if (Status s = loadShard(t, mine, dtypeSize(b.dtype()), read,
                             value.bytes.data(), exec.rank(), what);
        !s)
      return fail(s);
    if (Status s = exec.writeBuffer(b, value); !s)
      return fail(s.withContext(what));
  }
  return saved;
}

StatusOr<std::optional<TrainingPosition>>
resumeFromCheckpoints(Session &session, Communicator &world,
                      const std::string &dir, const TrainingPosition &current,
                      const std::function<void(const std::string &)> &warn) {
  // Rank 0's listing is the one every rank tries, in the same order.
  std::vector<int64_t> steps;
  if (world.rank() == 0)
    steps = listCheckpoints(dir);
  int64_t count = static_cast<int64_t>(steps.size());
  LOOM_RETURN_IF_ERROR(world.broadcast(&count, sizeof count, 0));
  steps.resize(static_cast<size_t>(count));
  if (count > 0)
    LOOM_RETURN_IF_ERROR(
        world.broadcast(steps.data(), count * int64_t(sizeof(int64_t)), 0));
  if (count == 0)
    return std::optional<TrainingPosition>();

  int n = world.size(), me = world.rank();
  for (int64_t step : steps) {
    LoadFailure failure;
    StatusOr<TrainingPosition> loaded =
        loadCheckpoint(session, checkpointPath(dir, step), current, &failure);
    // [0, n): a fatal failure of that rank; [n, 2n): another failure.
    int mine = loaded.isOk() ? INT_MAX : failure.fatal ? me : n + me;
    LOOM_ASSIGN_OR_RETURN(int lowest, world.allReduceMin(mine));
    if (lowest == INT_MAX)
      return std::optional<TrainingPosition>(*loaded);
    int from = lowest % n;
    LOOM_ASSIGN_OR_RETURN(
        std::string message,
        shareMessage(world, from, loaded.isOk() ? "" : failure.message));
    if (from != 0)
      message = "rank " + std::to_string(from) + ": " + message;
    if (lowest < n)
      return Status::error(message);
    if (me == 0 && warn)
      warn(message);
  }
  return makeError("--resume: none of the %lld checkpoint(s) in '%s' loads "
                   "(each is named above); resume from another folder, or "
                   "start again without --resume",
                   (long long)count, dir.c_str());
}

} // namespace loom::runtime
