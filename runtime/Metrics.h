//===- Metrics.h - Per-step metrics as JSON lines -------------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_METRICS_H
#define LOOM_RUNTIME_METRICS_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::runtime {

/// One pipeline stage's figures of a step, from its first rank.
struct StageMetrics {
  /// The most micro-batches whose activations it held at once.
  int64_t microBatchesInFlight = 0;
  /// Seconds it waited in `recv`, and their share of its step.
  double waitS = 0, bubbleFraction = 0;
};

struct StepMetrics {
  int64_t step = 0; // 1-based
  float loss = 0;
  double stepTimeS = 0;
  double tokensPerS = 0;
  double samplesPerS = 0;
  /// The most tensor bytes the rank held at once in its steps so far (its
  /// ledger's high-water mark, runtime/support/MemoryLedger.h: measured), its
  /// program's arena (planned) and what its kernels hold besides it
  /// (measured after binding).
  int64_t peakMemoryBytes = 0, arenaBytes = 0, workspaceBytes = 0;
  /// GPUs: the device memory in use after the step (`cudaMemGetInfo`: the
  /// whole device, CUDA context and libraries included); negative: none.
  int64_t deviceMemoryUsedBytes = -1;
  /// Seconds the step waited on communication; negative: not measured.
  double commExposedS = -1;
  /// `--eval-every` steps: the validation loss after the step.
  std::optional<double> evalLoss;
  /// Pipeline plans: per stage (empty without stages).
  std::vector<StageMetrics> stages;
};

/// `{"step":1,"loss":...,...}` without a newline; the loss is printed with
/// %.9g (a float round-trips), NaN/inf as null.
std::string formatMetrics(const StepMetrics &m);

/// Writes one JSON object a line, flushed after every step. The file is
/// held under an exclusive lock (flock) while open: a second writer of the
/// same path is refused.
class MetricsWriter {
public:
  /// Opens `path` empty; with `keepThroughStep` >= 0 (a resumed run), keeps
  /// the file's leading lines of steps 1..keepThroughStep and writes after
  /// them (a later or cut line is dropped).
  static StatusOr<std::unique_ptr<MetricsWriter>>
  open(const std::string &path, int64_t keepThroughStep = -1);
  ~MetricsWriter();
  Status write(const StepMetrics &m);

private:
  MetricsWriter() = default;
  std::string path;
  FILE *file = nullptr;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_METRICS_H
