//===- RankRecord.h - How each rank of an elastic job ended ------*- C++
//-*-===//
//
// mpirun starts `loom-elastic --rank-wrapper DIR -- loom-run ...` on every
// slot; the wrapper runs loom-run as its child and writes DIR/rank-R: the
// host, the child's pid, and how it ended. A child killed while the wrapper
// was not told to stop is a lost rank; one stopped by mpirun's teardown (a
// signal to the wrapper) or that exited with an error is not. A rank with
// no record, or whose record still says it runs, was lost with its wrapper
// (its node died).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_ELASTIC_RANKRECORD_H
#define LOOM_RUNTIME_ELASTIC_RANKRECORD_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::runtime {

struct RankRecord {
  enum class Outcome { Running, Exited, Killed, Stopped };
  int64_t rank = 0;
  std::string host;
  int64_t pid = 0;
  Outcome outcome = Outcome::Running;
  int code = 0; // Exited: the exit status; Killed, Stopped: the signal
};

std::string recordPath(const std::string &dir, int64_t rank);
Status writeRecord(const std::string &dir, const RankRecord &record);
/// The record of `rank` in `dir`, or none when there is none readable.
std::optional<RankRecord> readRecord(const std::string &dir, int64_t rank);

struct LostRank {
  int64_t rank;
  std::string host; // empty when the rank left no record
  std::string why;  // "killed by signal 9", "left no record"
};

/// The ranks of a `worldSize`-rank attempt that were lost: those killed;
/// when none was, those without a final record (their host went down).
std::vector<LostRank> lostRanks(const std::string &dir, int64_t worldSize);

/// Runs `argv` (loom-run and its arguments) as a child and records it in
/// `dir` under this process's MPI rank; returns the exit status to leave
/// with (128 + the signal for a killed child). Signals that stop the job
/// (TERM, INT, HUP) are passed on to the child.
int runRankWrapper(const std::string &dir,
                   const std::vector<std::string> &argv);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_ELASTIC_RANKRECORD_H
