//===- Sbatch.h - Slurm batch scripts for a plan ------------------*- C++
//-*-===//
//
// `loomc --emit-sbatch FILE` writes a Slurm batch script that runs the plan
// (`srun ... loom-run PLAN`) or, with --sbatch-elastic, `loom-elastic` on the
// allocation. The script's own arguments are loom-run's (`sbatch job.sh
// --data ... --steps K --checkpoint-dir D`); with a checkpoint folder a
// requeued job resumes (docs/elastic.md, "Slurm").
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_SBATCH_H
#define LOOM_COMPILER_SBATCH_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::loom {

struct SbatchJob {
  std::string jobName;
  int64_t nodes = 1;
  int64_t tasksPerNode = 1;
  bool gpus = false;       // one GPU a task, and loom-run --device cuda
  std::string loomRun;     // absolute paths
  std::string plan;        // the plan srun runs (not elastic)
  std::string loomElastic; // elastic: the launcher
  // elastic: loom-elastic's arguments before the script's own (the model,
  // loomc's training flags, --cluster and --devices-per-node).
  std::vector<std::string> elasticArgs;
  bool elastic = false;
};

/// The batch script's text.
std::string sbatchScript(const SbatchJob &job);

/// `arg` quoted for bash when it needs to be.
std::string shellQuote(const std::string &arg);

} // namespace mlir::loom

#endif // LOOM_COMPILER_SBATCH_H
