//===- Checkpoint.h - Sharded checkpoints that load under any plan -*- C++
//-*-===//
//
// `loom-run --checkpoint-dir D` writes the training state after a step as a
// folder `D/step-NNNNNNNN`: one file of raw shards per rank that writes any
// (`rank-RRRRR.bin`) and `manifest.json` (runtime/checkpoint/
// checkpoint.proto), which gives every tensor's global shape, the blocks that
// hold it and a checksum of each, the step and the data position. The
// folder is written as `step-NNNNNNNN.partial` and renamed when whole, so a
// run killed while writing leaves the previous checkpoints as they were.
// A checkpoint loads under any plan of the same model (another world size,
// dp / tp / pp, ZeRO stage): each rank reads only the blocks that overlap
// its shards. docs/checkpoint.md describes the format.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/Session.h"
#include "runtime/ShardLayout.h"
#include "runtime/checkpoint/checkpoint.pb.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::runtime {

/// Where a run stands: what a checkpoint records besides the tensors, and
/// what a resumed run must agree with.
struct TrainingPosition {
  int64_t step = 0; ///< completed steps
  int64_t globalBatch = 0;
  bool shuffled = false;
  uint64_t seed = 0;       ///< the sample order's seed (shuffled)
  int64_t dataSamples = 0; ///< samples of the training data (0: none)
};

/// The folder of the checkpoint after `step` steps in `dir`.
std::string checkpointPath(const std::string &dir, int64_t step);

/// The steps of the checkpoints in `dir` (complete folders only, not
/// `.partial` ones), newest first; none when `dir` does not exist.
std::vector<int64_t> listCheckpoints(const std::string &dir);

/// Writes the checkpoint of `session` at `position` into `dir` (created if
/// needed), then removes all but the newest `keep` checkpoints (0: keeps
/// all). Collective over `world` (the session's ranks, on the host): every
/// rank writes its blocks, rank 0 the manifest, and every rank returns the
/// same outcome: on an error (one line) the previous checkpoints are as
/// they were.
Status saveCheckpoint(const Session &session, Communicator &world,
                      const std::string &dir, const TrainingPosition &position,
                      int64_t keep);

/// Why a checkpoint was not loaded: `fatal` when no other checkpoint
/// would do either (the run's settings disagree with every one of them).
struct LoadFailure {
  std::string message;
  bool fatal = false;
};

/// Loads the checkpoint folder `path` into this rank's PARAMETER,
/// OPTIMIZER_STATE and RUNNING_STAT buffers: checks its manifest (its
/// checksum, format version, that it holds exactly the tensors of the
/// session's plan with their types and global shapes, and that `current`
/// agrees with its position), reads the blocks that overlap the rank's
/// shards, checks their checksums and copies them in. Nothing is written
/// into the buffers unless all of it checks. Not collective. Returns the
/// checkpoint's position.
StatusOr<TrainingPosition> loadCheckpoint(Session &session,
                                          const std::string &path,
                                          const TrainingPosition &current,
                                          LoadFailure *failure = nullptr);

/// A block larger than this has a checksum for each chunk of this many
/// bytes, so a rank that needs part of it reads only the chunks holding
/// that part (a multiple of every element size).
constexpr int64_t kChunkBytes = int64_t(4) << 20;

/// The chunks of a block (kChunkBytes each, the last may be shorter).
int64_t chunkCount(int64_t blockBytes);

/// Reads one block of a checkpoint's tensor: with `chunks` empty all of it
/// (checked against the block's checksum), else a buffer of the block's
/// size in which the chunks marked true are read and checked against their
/// own checksums (the rest left zero).
using BlockReadFn = std::function<StatusOr<std::vector<uint8_t>>(
    const checkpoint::Block &, const std::vector<bool> &chunks)>;

/// The files of a checkpoint folder, opened once each: reads blocks as
/// BlockReadFn says, `what` prefixing errors. Names outside the folder,
/// blocks past a file's end and checksum mismatches are one-line errors.
class CheckpointFiles {
public:
  explicit CheckpointFiles(std::string folder) : folder(std::move(folder)) {}
  CheckpointFiles(const CheckpointFiles &) = delete;
  CheckpointFiles &operator=(const CheckpointFiles &) = delete;
  ~CheckpointFiles();
  StatusOr<std::vector<uint8_t>> read(const checkpoint::Block &b,
                                      const std::vector<bool> &chunks,
                                      const std::string &what);
  /// Bytes read so far.
  int64_t bytesRead() const { return readBytes; }

private:
  StatusOr<int> open(const checkpoint::Block &b, const std::string &what);
  std::string folder;
  std::map<std::string, int> fds;
  int64_t readBytes = 0;
};

/// The part of `loadCheckpoint` that needs no session, for one tensor:
/// checks each block of the manifest's tensor `t` against its global shape
/// `mine.global` (runs inside it, the size they give at `elemBytes` an
/// element), reads with `read` the blocks that overlap the shard `mine` (of
/// a block with chunk checksums, only the chunks holding elements of
/// `mine`) and copies them into `dst` (C order, shape `mine.local`). Errors
/// (one line, prefixed with `what`) when a block does not fit, or the blocks do
/// not hold the tensor's elements, and those of `rank`'s shard, once.
Status loadShard(const checkpoint::Tensor &t, const ShardLayout &mine,
                 int64_t elemBytes, const BlockReadFn &read, void *dst,
                 int rank, const std::string &what);

/// `--resume`: loads the newest checkpoint of `dir` that every rank can
/// load, passing each one that fails (`warn` is called on rank 0 with its
/// one-line reason) for the one before it. Collective over `world`.
/// Returns the position loaded, nullopt when `dir` holds no checkpoint, or
/// an error when none loads (or one fails fatally).
StatusOr<std::optional<TrainingPosition>>
resumeFromCheckpoints(Session &session, Communicator &world,
                      const std::string &dir, const TrainingPosition &current,
                      const std::function<void(const std::string &)> &warn);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_H
