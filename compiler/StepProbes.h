//===- StepProbes.h - What loomc reads off the pipeline as it runs -*- C++
//-*-===//
//
// Pass instrumentations of loomc's one compile: the norms sequence
// parallelism splits, read just before partition, and the planned step's
// memory estimate, just before the lowering (passes/MemoryEstimate.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_STEPPROBES_H
#define LOOM_COMPILER_STEPPROBES_H

#include "passes/MemoryEstimate.h"

#include "mlir/Pass/PassInstrumentation.h"

#include <optional>

namespace mlir::loom::loomc {

/// Counts the forward's norms, and those split along the tokens over tp
/// (sequence parallelism), as the plan annotates them just before
/// partition makes the step local (the summary reports it).
class SequenceParallelProbe : public PassInstrumentation {
public:
  SequenceParallelProbe(int64_t &norms, int64_t &split)
      : norms(norms), split(split) {}

  void runBeforePass(Pass *pass, Operation *op) override;

private:
  int64_t &norms, &split;
};

/// Estimates the planned step's memory (MemoryEstimate.h) just before the
/// lowering starts, once.
class MemoryEstimateProbe : public PassInstrumentation {
public:
  MemoryEstimateProbe(MemoryEstimateOptions options,
                      std::optional<MemoryEstimate> &out)
      : options(std::move(options)), out(out) {}

  void runBeforePass(Pass *pass, Operation *op) override;

private:
  MemoryEstimateOptions options;
  std::optional<MemoryEstimate> &out;
};

} // namespace mlir::loom::loomc

#endif // LOOM_COMPILER_STEPPROBES_H
