//===- ElasticOptions.h - loom-elastic's command line ------------*- C++
//-*-===//
//
// loom-elastic's own flags, and the split of the rest of its command line:
// loom-run's training flags (runtime/driver/RunFlags.h) go to every loom-run
// it starts, everything else to loomc (docs/elastic.md).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_ELASTIC_ELASTICOPTIONS_H
#define LOOM_RUNTIME_ELASTIC_ELASTICOPTIONS_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

struct ElasticOptions {
  bool help = false;
  int64_t np = 0;            // --np: the most devices to use (0: all found)
  int64_t minNp = 1;         // --min-np: fewer than this stops the job
  int64_t maxRestarts = 3;   // --max-restarts: after a lost rank
  double backoffSeconds = 1; // --backoff: the first wait, doubled each time
  std::string hostfile; // --hostfile H (Open MPI's format), read each start
  std::string cluster = "cpu"; // --cluster: a preset's name, no count
  int64_t devicesPerNode = 0;  // --devices-per-node (GPU presets)
  std::string model;           // --model MODEL.onnx, for loomc
  std::string checkpointDir;   // --checkpoint-dir, also given to loom-run
  std::string loomc, loomRun, mpirun;  // --loomc, --loom-run, --mpirun
  std::vector<std::string> mpirunArgs; // --mpirun-arg (repeatable)
  std::vector<std::string> loomcArgs;  // every other flag
  std::vector<std::string> runArgs;    // loom-run's training flags
};

/// Parses loom-elastic's arguments (`--flag value` or `--flag=value`).
/// Errors are one line.
StatusOr<ElasticOptions> parseElasticOptions(int argc, char **argv);

/// The text `loom-elastic --help` prints.
const char *elasticHelpText();

} // namespace loom::runtime

#endif // LOOM_RUNTIME_ELASTIC_ELASTICOPTIONS_H
