//===- Options.h - loom-run's command line -------------------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_DRIVER_OPTIONS_H
#define LOOM_RUNTIME_DRIVER_OPTIONS_H

#include "runtime/driver/Collectives.h"
#include "runtime/init/RandomInit.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::runtime {

struct RunOptions {
  bool help = false;
  bool forward = false;    // --forward MODEL.onnx
  std::string planPath;    // training: PLAN; forward: MODEL.onnx
  std::vector<std::pair<std::string, std::string>> data; // --data / --input
  std::string tokens;                // --tokens FILE
  std::string tokensDtype = "uint16"; // --tokens-dtype uint16|uint32
  // Validation: --valid-data NAME=FILE.npy ... or --valid-tokens FILE,
  // evaluated every --eval-every steps on --eval-batches batches (0: all).
  std::vector<std::pair<std::string, std::string>> validData;
  std::string validTokens;
  int64_t evalEvery = 0;
  int64_t evalBatches = 0;
  int64_t steps = -1;
  int64_t seed = 0;   // --seed: the default of --init random
  bool shuffle = false; // --order: shuffled (the default with --seed)
  ParameterInit init; // --init onnx|random[:SEED]
  std::string metricsPath;
  std::string exportOnnxPath;
  std::string modelPath; // --model: where the plan's ONNX model is now
  std::string outputDir;
  int64_t logEvery = 1; // print every N-th step (and the last)
  bool quiet = false;
  bool checkNumerics = false; // --check-numerics
  std::string device = "cpu"; // --device cpu|cuda
  CollectivesMode collectives = CollectivesMode::Auto; // --collectives
  std::string precision;      // --forward: loomc --precision (fp32 | bf16)
  std::string verifyAgainst;  // --verify-against REF.loomplan
  std::string profilePath;    // --profile FILE.json
  // Checkpoints (docs/checkpoint.md): written to --checkpoint-dir after every
  // --checkpoint-every N-th step (0: the last step only), the newest --keep K
  // kept (0: all); --resume continues from the newest that loads.
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  int64_t keep = 0;
  bool resume = false;
};

/// Parses loom-run's arguments (`--flag value` or `--flag=value`).
StatusOr<RunOptions> parseOptions(int argc, char **argv);

/// The text `loom-run --help` prints.
const char *helpText();

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_OPTIONS_H
