//===- Options.cpp - loom-run's command line ---------------------*- C++ -*-===//

#include "runtime/driver/Options.h"
#include "runtime/driver/RunFlags.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>

namespace loom::runtime {

const char *helpText() {
  return R"(usage:
  [mpirun -np N] loom-run PLAN --data NAME=FILE.npy ... --steps K
                 [--tokens FILE [--tokens-dtype uint16|uint32]]
                 [--seed S] [--order sequential|shuffled]
                 [--valid-data NAME=FILE.npy ... | --valid-tokens FILE]
                 [--eval-every N] [--eval-batches M]
                 [--init onnx|random[:SEED]] [--metrics FILE.jsonl]
                 [--export-onnx FILE.onnx] [--log-every N] [--quiet]
                 [--device cpu|cuda] [--collectives nccl|host|auto]
                 [--model MODEL.onnx] [--check-numerics]
                 [--checkpoint-dir D [--checkpoint-every N] [--keep K]
                  [--resume]]
  loom-run --forward MODEL.onnx --input NAME=FILE.npy ... --output-dir DIR
                 [--precision fp32|bf16]
  loom-run PLAN --verify-against REF --steps K [--init onnx|random[:SEED]]
  [mpirun -np N] loom-run --profile FILE.json [--quiet]

Runs a .loomplan written by loomc: N ranks under mpirun (N must equal the
plan's world size), or one rank without mpirun.

training options:
  PLAN                    the .loomplan file
  --data NAME=FILE.npy    data for the graph input NAME (or NAME=target for
                          the loss target); one per input of the plan, each
                          with the same number of samples. Dim 0 indexes
                          samples; step i uses places [i*B, (i+1)*B) of the
                          order (B = global batch), split across
                          data-parallel ranks. The file is memory-mapped: a
                          rank reads only the samples it trains on. Any of
                          uint8/16/32/64, int8/16/32/64, float16/32/64,
                          converted to the buffer's type as torch's
                          .to(dtype) would; an integer buffer (ids) refuses
                          a value that is not a whole number fitting int64,
                          and a cross_entropy target a class id outside
                          the logits, naming its sample and element
  --tokens FILE           a token stream instead: raw little-endian token ids
                          (or a 1-D integer .npy), cut into windows of s+1
                          tokens for the plan's input of shape [b, s]: window
                          k is tokens [k*s, k*s+s], the input its first s,
                          the target its last s. Needs a plan with one input
                          and a cross_entropy target; token ids outside the
                          vocabulary (the logits' classes) are refused with
                          their position in the file
  --tokens-dtype uint16|uint32
                          the type of raw --tokens and --valid-tokens files
                          (default uint16)
  --seed S                the run's seed (default 0): the order of the data
                          (below) and the SEED of --init random without one
  --order sequential|shuffled
                          sequential: place p reads sample p modulo the
                          number of samples (the default without --seed).
                          shuffled (the default with --seed): each epoch
                          reads every sample once, in an order drawn from
                          --seed and the epoch, the same on any number of
                          ranks and any plan
  --valid-data NAME=FILE.npy, --valid-tokens FILE
                          validation data, as --data and --tokens give
                          training data (every binding --data has, or the
                          token stream's windows), read in file order
  --eval-every N          after every N-th step (and the last) the loss of
                          the model on the validation data: each validation
                          batch runs the training program and its update is
                          undone (the parameters, optimizer state and running
                          statistics are restored), so training goes on as
                          without it. Printed, and in the metrics as
                          eval_loss: the mean over the batches. Needs
                          validation data (and validation data needs it)
  --eval-batches M        validation batches of B samples (the global batch)
                          each evaluation reads: batches 0..M-1 of the
                          validation data (default: all its whole batches)
  --steps K               number of training steps (required)
  --init onnx|random[:SEED]
                          where parameters start from. onnx (default): the
                          plan's stored values (its ONNX initializers).
                          random:SEED: each parameter by the plan's init
                          rule (norm scales 1, biases 0, matrices and
                          embeddings N(0, 0.02^2)), the same values for any
                          rank count or device; needed for plans compiled
                          with loomc --no-weights. SEED defaults to --seed
  --metrics FILE.jsonl    rank 0 writes one JSON object per step: step, loss,
                          step_time_s, tokens_per_s, samples_per_s,
                          peak_memory_bytes (measured: the most tensor
                          bytes the rank held, arena and kernel workspace),
                          arena_bytes (planned), workspace_bytes (measured
                          after binding), on a GPU device_memory_used_bytes
                          (cudaMemGetInfo), and on CPU ranks
                          comm_exposed_s (the time the step waited on
                          collectives, what overlap did not hide)
  --export-onnx FILE      rank 0 writes the plan's ONNX model with the trained
                          parameters (raw_data, external data inlined)
  --checkpoint-dir D      write checkpoints in D: after every N-th step of
                          --checkpoint-every N (and the last), each rank its
                          shards of the parameters, optimizer state and
                          running statistics, with the step and the data
                          position; a checkpoint is whole or absent
                          (written under a temporary name, then renamed).
                          It loads under any plan of the same model and
                          global batch, on any number of ranks
  --checkpoint-every N    how often (default: the last step only)
  --keep K                keep the newest K checkpoints (default: all)
  --resume                start from the newest checkpoint in D that loads
                          (one that does not, damaged or of another model,
                          is named and the one before it tried); --steps K
                          is then the total: steps S+1..K run after a
                          checkpoint of S steps, and --metrics keeps the
                          file's lines of steps 1..S. No checkpoint in D:
                          training starts at step 1
  --log-every N           print every N-th step's loss (and the last);
                          metrics still record every step
  --quiet                 print only errors
  --device cpu|cuda       where the program runs (default cpu). cuda: one
                          GPU per rank (the node-local rank picks it), NCCL
                          between ranks (or host staging, below); needs a
                          loom-run built with CUDA
  --collectives nccl|host|auto
                          how --device cuda's ranks exchange device data
                          (default auto). nccl: NCCL, one GPU per rank.
                          host: copied to pinned host memory, MPI's
                          collective, copied back (slow; ranks may share a
                          GPU). auto: host when two ranks use the same GPU
                          (the local rank modulo the device count picks
                          it) or NCCL does not load, else nccl
  --model MODEL.onnx      where the plan's ONNX model is now: its
                          initializers and external data are read from it,
                          and --export-onnx writes a copy of it with the
                          trained weights. Default: the path loomc
                          recorded, else the file of that name next to the
                          plan (a plan moved with its model); either must
                          be the file loomc compiled (its checksum)
  --check-numerics        after each instruction, scan its float outputs for
                          NaN and inf (and the step's data before it): the
                          first one stops the run, naming the step, the
                          instruction, its op and ONNX node and the buffer
                          (or the data sample). Slow; off, nothing is
                          scanned. Without it, only the loss is checked

verify options (what loomc --verify-plan runs):
  --verify-against REF    train PLAN on its ranks, as threads of this
                          process (no mpirun), and REF, the one-device plan
                          of the same model, for K steps on the same
                          synthetic data (floats uniform in [-1, 1), ids
                          below the tables they index) from the same
                          weights; exit 1 naming the first step whose losses
                          differ by more than the tolerance: 1e-5 relative
                          (1e-3 in bf16), or 10 times what perturbing the
                          weights and data by 1e-7 moves REF's by where larger
                          (over 10 times the floor: ill-posed)

profile options (docs/cluster-spec.md, "Calibration"):
  --profile FILE.json     measure this machine with every rank busy at once:
                          the CPU kernels' matrix products of side 16 to
                          1024, a product over operands out of cache, an
                          element-wise pass over 3 x 32 MiB and,
                          under mpirun, all-reduces of 4 B to 16 MiB over
                          the ranks, alone and between rounds of compute
                          (blocking and overlapped: what they add to a
                          step), and each other CPU kernel of the plans
                          (element-wise, norms, losses, attention, AdamW,
                          ...) at two sizes (its call overhead and rate);
                          fit the planner's curves and write the
                          calibration file loomc --calibration reads (run it
                          with the ranks and threads training will use)

forward options:
  --forward MODEL.onnx    compile MODEL with loomc --forward-only (loomc is
                          found next to loom-run or in $LOOMC) and run it once
  --input NAME=FILE.npy   the value of graph input NAME (one per input)
  --output-dir DIR        where every graph output is written as
                          DIR/<output name>.npy (created if missing)
  --precision fp32|bf16   compile with loomc --precision (default fp32);
                          outputs are f32 either way

environment:
  LOOM_NUM_THREADS        threads per rank (default 1): OpenMP threads, over which
                          big GEMMs are split; OpenBLAS itself runs on 1
  LOOMC                   the loomc executable for --forward
  LOOM_PROFILE            1: time every instruction; at exit, a table per op
                          and the 15 most expensive instructions (2: all)
  LOOM_CUDA_ATTENTION     auto (default) | tc | gemm | flash: attention on
                          cuda by tensor-core flash kernels (bf16, head dims
                          64 and 128; auto's first choice), tensor-core GEMMs
                          with the scores in a workspace, or fp32 flash-style
                          kernels
  LOOM_CUDA_ATTENTION_WORKSPACE_MB
                          auto's limit for the GEMM path's workspace
                          (default 4096)
  LOOM_CUDA_GEMM_PAD_MIN_FLOPS
                          smallest GEMM with rows that are not a multiple of
                          16 bytes run on copies padded to dimensions of a
                          multiple of 64 (default 1e9; 0: all)
  LOOM_CUDA_GEMM_PAD_COPY kernel (default) | memcpy2d: how those copies are
                          made
  LOOM_CUDA_GEMM_TUNE_MIN_FLOPS
                          smallest GEMM whose cuBLASLt algorithm is timed at
                          start-up (default 1e9; 0: all)

Errors are printed once as 'loom-run: error: ...' and exit with status 1.
A loss that is NaN or inf stops training after its step (its metrics line is
written; nothing is exported) with one such line and exit status 3, as does
a value --check-numerics finds.
)";
}

namespace {

Status parseNameFile(const std::string &flag, const std::string &value,
                     std::vector<std::pair<std::string, std::string>> &out) {
  size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
    return makeError("%s expects NAME=FILE.npy, got '%s'", flag.c_str(),
                     value.c_str());
  std::string name = value.substr(0, eq);
  for (const auto &kv : out)
    if (kv.first == name)
      return makeError("%s '%s' given twice", flag.c_str(), name.c_str());
  out.emplace_back(name, value.substr(eq + 1));
  return Status::ok();
}

StatusOr<int64_t> parseInt(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (errno || end == value.c_str() || *end != '\0')
    return makeError("%s expects an integer, got '%s'", flag.c_str(),
                     value.c_str());
  return static_cast<int64_t>(v);
}

} // namespace

StatusOr<RunOptions> parseOptions(int argc, char **argv) {
  RunOptions opts;
  std::vector<std::string> positional, flags;
  bool sawData = false, sawInput = false, sawInit = false,
       sawCollectives = false, sawSeed = false, sawTokensDtype = false;
  std::optional<bool> shuffle;
  std::optional<int64_t> initSeed;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h") {
      opts.help = true;
      return opts;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      positional.push_back(arg);
      continue;
    }
    std::string flag = arg, value;
    bool inlineValue = false;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    if (flag == "--help") {
      opts.help = true;
      return opts;
    }
    flags.push_back(flag);
    if (flag == "--quiet") {
      opts.quiet = true;
      continue;
    }
    if (flag == "--resume") {
      if (inlineValue)
        return makeError("--resume takes no value, got '%s'", value.c_str());
      opts.resume = true;
      continue;
    }
    if (flag == "--check-numerics") {
      if (inlineValue)
        return makeError("--check-numerics takes no value, got '%s'",
                         value.c_str());
      opts.checkNumerics = true;
      continue;
    }
    bool known = isTrainingValueFlag(flag);
    for (std::string_view f : kOtherValueFlags)
      known |= flag == f;
    if (!known)
      return makeError("unknown option '%s'; see loom-run --help",
                       flag.c_str());
    if (!inlineValue) {
      if (i + 1 >= argc)
        return makeError("%s needs a value; see loom-run --help",
                         flag.c_str());
      value = argv[++i];
    }
    if (flag == "--data") {
      sawData = true;
      LOOM_RETURN_IF_ERROR(parseNameFile(flag, value, opts.data));
    } else if (flag == "--input") {
      sawInput = true;
      LOOM_RETURN_IF_ERROR(parseNameFile(flag, value, opts.data));
    } else if (flag == "--steps") {
      LOOM_ASSIGN_OR_RETURN(opts.steps, parseInt(flag, value));
      if (opts.steps < 1)
        return makeError("--steps must be at least 1, got %lld",
                         (long long)opts.steps);
    } else if (flag == "--log-every") {
      LOOM_ASSIGN_OR_RETURN(opts.logEvery, parseInt(flag, value));
      if (opts.logEvery < 1)
        return makeError("--log-every must be at least 1, got %lld",
                         (long long)opts.logEvery);
    } else if (flag == "--seed") {
      LOOM_ASSIGN_OR_RETURN(opts.seed, parseInt(flag, value));
      sawSeed = true;
    } else if (flag == "--checkpoint-dir") {
      if (value.empty())
        return makeError("--checkpoint-dir needs a folder");
      opts.checkpointDir = value;
    } else if (flag == "--checkpoint-every" || flag == "--keep") {
      LOOM_ASSIGN_OR_RETURN(int64_t n, parseInt(flag, value));
      if (n < 1)
        return makeError("%s must be at least 1, got %lld", flag.c_str(),
                         (long long)n);
      (flag == "--keep" ? opts.keep : opts.checkpointEvery) = n;
    } else if (flag == "--tokens") {
      opts.tokens = value;
    } else if (flag == "--valid-data") {
      LOOM_RETURN_IF_ERROR(parseNameFile(flag, value, opts.validData));
    } else if (flag == "--valid-tokens") {
      opts.validTokens = value;
    } else if (flag == "--eval-every" || flag == "--eval-batches") {
      LOOM_ASSIGN_OR_RETURN(int64_t n, parseInt(flag, value));
      if (n < 1)
        return makeError("%s must be at least 1, got %lld", flag.c_str(),
                         (long long)n);
      (flag == "--eval-every" ? opts.evalEvery : opts.evalBatches) = n;
    } else if (flag == "--tokens-dtype") {
      if (value != "uint16" && value != "uint32")
        return makeError("--tokens-dtype must be uint16 or uint32, got '%s'",
                         value.c_str());
      opts.tokensDtype = value;
      sawTokensDtype = true;
    } else if (flag == "--order") {
      if (value != "sequential" && value != "shuffled")
        return makeError("--order must be sequential or shuffled, got '%s'",
                         value.c_str());
      shuffle = value == "shuffled";
    } else if (flag == "--init") {
      sawInit = true;
      if (value == "onnx") {
        opts.init.random = false;
      } else if (value == "random") {
        opts.init.random = true;
      } else if (value.compare(0, 7, "random:") == 0) {
        opts.init.random = true;
        StatusOr<int64_t> seed = parseInt(flag, value.substr(7));
        if (!seed.isOk())
          return makeError("--init random:SEED expects an integer SEED, got "
                           "'%s'",
                           value.substr(7).c_str());
        initSeed = *seed;
      } else {
        return makeError("--init must be onnx or random:SEED, got '%s'",
                         value.c_str());
      }
    } else if (flag == "--metrics") {
      opts.metricsPath = value;
    } else if (flag == "--export-onnx") {
      opts.exportOnnxPath = value;
    } else if (flag == "--model") {
      opts.modelPath = value;
    } else if (flag == "--output-dir") {
      opts.outputDir = value;
    } else if (flag == "--device") {
      if (value != "cpu" && value != "cuda")
        return makeError("--device must be cpu or cuda, got '%s'",
                         value.c_str());
      opts.device = value;
    } else if (flag == "--collectives") {
      sawCollectives = true;
      LOOM_ASSIGN_OR_RETURN(opts.collectives, parseCollectivesMode(value));
    } else if (flag == "--verify-against") {
      opts.verifyAgainst = value;
    } else if (flag == "--forward") {
      opts.forward = true;
      opts.planPath = value;
    } else if (flag == "--precision") {
      if (value != "fp32" && value != "bf16")
        return makeError("--precision must be fp32 or bf16, got '%s'",
                         value.c_str());
      opts.precision = value;
    } else if (flag == "--profile") {
      opts.profilePath = value;
    }
  }

  if (!opts.profilePath.empty()) {
    // Only --quiet goes with it (and --device cpu, the one it measures).
    bool others = !positional.empty() || opts.device != "cpu" ||
                  std::any_of(flags.begin(), flags.end(), [](auto &f) {
                    return f != "--profile" && f != "--quiet" &&
                           f != "--device";
                  });
    if (others)
      return makeError("--profile FILE takes --quiet only: it measures this "
                       "machine's CPU kernels and, under mpirun, its ranks' "
                       "all-reduce; give no plan");
    return opts;
  }

  bool validation = !opts.validData.empty() || !opts.validTokens.empty();
  if (opts.forward) {
    if (!positional.empty())
      return makeError("unexpected argument '%s' with --forward",
                       positional[0].c_str());
    if (sawData || !opts.tokens.empty() || validation || opts.steps != -1 || !opts.metricsPath.empty() ||
        !opts.exportOnnxPath.empty() || sawInit || !opts.modelPath.empty() ||
        opts.checkNumerics || sawCollectives || !opts.checkpointDir.empty())
      return makeError(
          "--forward takes --input, --output-dir and --precision only");
    if (opts.outputDir.empty())
      return makeError("--forward needs --output-dir DIR");
    if (opts.device != "cpu")
      return makeError("--forward runs on the cpu only (--device %s)",
                       opts.device.c_str());
    return opts;
  }
  if (sawInput || !opts.outputDir.empty())
    return makeError("--input and --output-dir belong to --forward; training "
                     "takes --data NAME=FILE.npy");
  if (!opts.precision.empty())
    return makeError("--precision belongs to --forward; a plan carries its "
                     "precision (loomc --precision)");
  if (opts.collectives != CollectivesMode::Auto && opts.device != "cuda")
    return makeError("--collectives %s applies to --device cuda (the cpu "
                     "backend's collectives are MPI's)",
                     collectivesModeName(opts.collectives));
  if (positional.empty())
    return makeError("no plan given; usage: loom-run PLAN --data "
                     "NAME=FILE.npy ... --steps K (see --help)");
  if (positional.size() > 1)
    return makeError("unexpected argument '%s' (one plan per run)",
                     positional[1].c_str());
  opts.planPath = positional[0];
  if (opts.steps == -1)
    return makeError("missing --steps K");
  if (!opts.verifyAgainst.empty() &&
      (sawData || !opts.tokens.empty() || validation ||
       !opts.metricsPath.empty() || !opts.exportOnnxPath.empty() ||
       opts.device != "cpu" || opts.checkNumerics))
    return makeError("--verify-against takes --steps, --init and --quiet only "
                     "(its data is synthetic, its ranks threads on the cpu)");
  if (opts.checkpointDir.empty() &&
      (opts.checkpointEvery || opts.keep || opts.resume))
    return makeError("--checkpoint-every, --keep and --resume need "
                     "--checkpoint-dir D");
  if (!opts.verifyAgainst.empty() && !opts.checkpointDir.empty())
    return makeError("--verify-against writes no checkpoints; drop "
                     "--checkpoint-dir");
  if (!opts.validData.empty() && !opts.validTokens.empty())
    return makeError("--valid-data and --valid-tokens both give validation "
                     "data; pass one");
  if (validation && opts.evalEvery == 0)
    return makeError("validation data needs --eval-every N (how often to "
                     "evaluate)");
  if (!validation && (opts.evalEvery || opts.evalBatches))
    return makeError("--eval-every and --eval-batches need validation data: "
                     "--valid-tokens FILE or --valid-data NAME=FILE.npy");
  if (sawTokensDtype && opts.tokens.empty() && opts.validTokens.empty())
    return makeError("--tokens-dtype applies to --tokens FILE");
  for (const auto &[name, file] : opts.data)
    if (!opts.tokens.empty() && name == "target")
      return makeError("--tokens gives the target (each window's next "
                       "tokens); drop --data target=%s",
                       file.c_str());
  opts.shuffle = shuffle ? *shuffle : sawSeed;
  opts.init.seed = static_cast<uint64_t>(initSeed ? *initSeed : opts.seed);
  return opts;
}

} // namespace loom::runtime
