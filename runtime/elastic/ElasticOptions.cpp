//===- ElasticOptions.cpp - loom-elastic's command line -----------*- C++
//-*-===//

#include "runtime/elastic/ElasticOptions.h"
#include "runtime/driver/RunFlags.h"

#include <cerrno>
#include <cstdlib>

namespace loom::runtime {

const char *elasticHelpText() {
  return R"(usage:
  loom-elastic --np N [--min-np M] [--hostfile H] --model MODEL.onnx
               [loomc's flags: --global-batch B --loss L --optimizer O ...]
               --data NAME=FILE.npy ... | --tokens FILE
               --steps K --checkpoint-dir D [--checkpoint-every N] [--keep K]
               [--metrics FILE.jsonl] [other loom-run training flags]
               [--cluster cpu|a100-80g|h100|h200] [--devices-per-node G]
               [--max-restarts R] [--backoff SECONDS]
               [--loomc PATH] [--loom-run PATH] [--mpirun PATH]
               [--mpirun-arg ARG ...]

Runs a training job that outlives its ranks. loom-elastic plans the model
with loomc for the devices it has, starts the ranks with mpirun, and when a
rank dies (killed, crashed, its node gone) it plans again for the devices
left, and the new ranks resume from the newest checkpoint that loads,
resharded onto the new plan (docs/checkpoint.md). The metrics file continues
across restarts, one line per step. A job whose ranks fail with an error of
their own (bad data, a diverged loss) is not restarted: the error is printed
and loom-elastic exits with it.

options:
  --np N                  the most devices to use (default: every slot of
                          --hostfile, or Slurm's SLURM_NTASKS)
  --min-np M              stop when fewer than M devices are left (default 1)
  --hostfile H            Open MPI's hostfile ("host slots=K" a line), read
                          again at every start: a host added or removed
                          while the job runs restarts it on the new slots
                          from the newest checkpoint
  --model MODEL.onnx      the model, planned by loomc at every start
  --cluster NAME          the devices: cpu (default) or a GPU preset of
                          loomc's --cluster; loom-elastic adds the count
                          (cpu:N, h100:NODESxG)
  --devices-per-node G    devices a node of a GPU preset (default: the
                          hostfile's slots a host, else N); a plan uses
                          whole nodes when it can
  --max-restarts R        restarts after lost ranks before giving up
                          (default 3)
  --backoff SECONDS       the wait before the first restart, doubled at
                          each one up to 60 s (default 1)
  --loomc PATH, --loom-run PATH
                          the binaries (default: next to loom-elastic, else
                          PATH)
  --mpirun PATH           the MPI launcher (default: mpirun)
  --mpirun-arg ARG        an argument for mpirun (repeatable), e.g.
                          --mpirun-arg=--oversubscribe
  -h, --help              print this help

loom-run's training flags (--data, --tokens, --steps, --seed, --metrics,
--checkpoint-dir, --checkpoint-every, --keep, --export-onnx, ...; see
loom-run --help) go to every loom-run, with --resume added; every other flag
goes to loomc with --cluster set for the devices left. --steps and
--checkpoint-dir are required: a restart resumes from D.

Each start plans for the devices left, and when loomc cannot split the batch
over them (say a global batch of 12 over 5), for one device fewer, down to
--min-np. A rank counts as lost when its loom-run dies of a signal not sent
by mpirun's teardown, or never reports; its slot is not used again (until
the hostfile changes). loom-elastic's own records are in D/.elastic/.

exit status: 0 when the steps are done; loom-run's status when the ranks
failed of their own; 1 when loom-elastic gives up (too few devices, too many
restarts, no plan), with one error line.
)";
}

static StatusOr<int64_t> parseCount(const std::string &flag,
                                    const std::string &value, int64_t min) {
  char *end = nullptr;
  errno = 0;
  long long n = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || n < min ||
      n > 1000000)
    return makeError("%s expects an integer from %lld to 1000000, got '%s'",
                     flag.c_str(), static_cast<long long>(min), value.c_str());
  return static_cast<int64_t>(n);
}

StatusOr<ElasticOptions> parseElasticOptions(int argc, char **argv) {
  ElasticOptions opts;
  bool sawSteps = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      opts.help = true;
      return opts;
    }
    if (arg == "-o" || arg == "--plan-only" || arg == "--emit-sbatch" ||
        arg.rfind("--emit-sbatch=", 0) == 0)
      return makeError("%s is loom-elastic's to choose: it writes the plans "
                       "in D/.elastic/",
                       arg == "-o" || arg == "--plan-only" ? arg.c_str()
                                                           : "--emit-sbatch");
    if (arg.compare(0, 2, "--") != 0)
      return makeError("unexpected argument '%s': loom-elastic takes flags "
                       "only (the model is --model MODEL.onnx)",
                       arg.c_str());
    std::string flag = arg, value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    } else if (i + 1 < argc &&
               std::string(argv[i + 1]).compare(0, 2, "--") != 0) {
      value = argv[i + 1];
      hasValue = true;
    }
    bool consumesNext = hasValue && arg.find('=') == std::string::npos;
    auto take = [&]() -> Status {
      if (!hasValue)
        return makeError("%s needs a value; see loom-elastic --help",
                         flag.c_str());
      if (consumesNext)
        ++i;
      return Status::ok();
    };

    if (isTrainingSwitch(flag)) {
      if (arg.find('=') != std::string::npos)
        return makeError("%s takes no value", flag.c_str());
      if (flag == "--resume")
        return makeError("--resume is what loom-elastic does at every "
                         "start; drop it");
      opts.runArgs.push_back(flag);
      continue;
    }
    if (isTrainingValueFlag(flag)) {
      LOOM_RETURN_IF_ERROR(take());
      if (flag == "--steps")
        sawSteps = true;
      if (flag == "--checkpoint-dir")
        opts.checkpointDir = value;
      opts.runArgs.push_back(flag);
      opts.runArgs.push_back(value);
      continue;
    }
    if (flag == "--np" || flag == "--min-np" || flag == "--max-restarts" ||
        flag == "--devices-per-node") {
      LOOM_RETURN_IF_ERROR(take());
      LOOM_ASSIGN_OR_RETURN(
          int64_t n, parseCount(flag, value, flag == "--max-restarts" ? 0 : 1));
      (flag == "--np"             ? opts.np
       : flag == "--min-np"       ? opts.minNp
       : flag == "--max-restarts" ? opts.maxRestarts
                                  : opts.devicesPerNode) = n;
    } else if (flag == "--backoff") {
      LOOM_RETURN_IF_ERROR(take());
      char *end = nullptr;
      double s = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(s >= 0 && s <= 3600))
        return makeError("--backoff expects seconds from 0 to 3600, got '%s'",
                         value.c_str());
      opts.backoffSeconds = s;
    } else if (flag == "--hostfile" || flag == "--cluster" ||
               flag == "--model" || flag == "--loomc" || flag == "--loom-run" ||
               flag == "--mpirun" || flag == "--mpirun-arg") {
      LOOM_RETURN_IF_ERROR(take());
      if (flag == "--mpirun-arg")
        opts.mpirunArgs.push_back(value);
      else
        (flag == "--hostfile"   ? opts.hostfile
         : flag == "--cluster"  ? opts.cluster
         : flag == "--model"    ? opts.model
         : flag == "--loomc"    ? opts.loomc
         : flag == "--loom-run" ? opts.loomRun
                                : opts.mpirun) = value;
    } else {
      // loomc's: a flag and, unless it is a switch, its value.
      opts.loomcArgs.push_back(flag);
      if (hasValue) {
        opts.loomcArgs.back() += "=" + value;
        if (consumesNext)
          ++i;
      }
    }
  }
  if (opts.model.empty())
    return makeError("missing --model MODEL.onnx; see loom-elastic --help");
  if (!sawSteps)
    return makeError("missing --steps K: the total a restart resumes toward");
  if (opts.checkpointDir.empty())
    return makeError("missing --checkpoint-dir D: a restart resumes from "
                     "its newest checkpoint");
  if (opts.cluster.find(':') != std::string::npos ||
      opts.cluster.find('.') != std::string::npos)
    return makeError("--cluster takes a preset's name without a count (cpu, "
                     "a100-80g, h100, h200), got '%s'; loom-elastic adds the "
                     "count of devices left",
                     opts.cluster.c_str());
  if (opts.np > 0 && opts.minNp > opts.np)
    return makeError("--min-np %lld is more than --np %lld",
                     static_cast<long long>(opts.minNp),
                     static_cast<long long>(opts.np));
  return opts;
}

} // namespace loom::runtime
