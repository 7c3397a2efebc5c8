//===- Sbatch.cpp - Slurm batch scripts for a plan -----------------*- C++
//-*-===//

#include "compiler/Sbatch.h"

#include <cctype>

namespace mlir::loom {

std::string shellQuote(const std::string &arg) {
  bool plain = !arg.empty();
  for (char c : arg)
    plain &= std::isalnum(static_cast<unsigned char>(c)) ||
             std::string("-_./=:,+@%").find(c) != std::string::npos;
  if (plain)
    return arg;
  std::string quoted = "'";
  for (char c : arg)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string sbatchScript(const SbatchJob &job) {
  std::string n = std::to_string(job.nodes);
  std::string g = std::to_string(job.tasksPerNode);
  std::string s = "#!/bin/bash\n";
  s += "#SBATCH --job-name=" + job.jobName + "\n";
  s += "#SBATCH --nodes=" + n + "\n";
  s += "#SBATCH --ntasks-per-node=" + g + "\n";
  if (job.gpus)
    s += "#SBATCH --gpus-per-node=" + g + "\n";
  s += "#SBATCH --requeue\n";
  s += "#SBATCH --open-mode=append\n";
  s += "#SBATCH --output=" + job.jobName + "-%j.out\n";
  s += "#\n";
  if (job.elastic)
    s += "# Written by loomc: loom-elastic on " + n + " node(s) x " + g +
         " task(s); it plans for the\n# devices it gets and re-plans when "
         "one is lost (docs/elastic.md).\n";
  else
    s += "# Written by loomc for " + job.plan + ": " + n + " node(s) x " + g +
         " rank(s).\n";
  s += "# Submit with loom-run's training flags as the script's arguments:\n"
       "#   sbatch THIS_SCRIPT --data NAME=FILE.npy ... --steps K "
       "--checkpoint-dir D\n"
       "# With --checkpoint-dir, a requeued job resumes from its newest "
       "checkpoint.\n";
  s += "set -euo pipefail\n";
  if (job.elastic) {
    s += "exec " + shellQuote(job.loomElastic);
    for (const std::string &a : job.elasticArgs)
      s += " " + shellQuote(a);
    s += " \"$@\"\n";
    return s;
  }
  s += "args=(\"$@\")\n";
  s += "for a in \"$@\"; do\n"
       "  case \"$a\" in --checkpoint-dir|--checkpoint-dir=*) "
       "args+=(--resume) ;; esac\n"
       "done\n";
  // Open MPI's ranks find each other through Slurm's PMIx server.
  s += "exec srun --mpi=pmix " + shellQuote(job.loomRun) + " " +
       shellQuote(job.plan) + (job.gpus ? " --device cuda" : "") +
       " \"${args[@]}\"\n";
  return s;
}

} // namespace mlir::loom
