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
#include "runtime/comm/Communicator.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
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
