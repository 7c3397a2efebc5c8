//===- ModelSpecPlan.h - loomc --model-spec: plan by shape -------*- C++ -*-===//
//
// `loomc --model-spec gpt:...`: the joint search (passes/planner/
// JointSearch.h) over a transformer given by its shape, its plan and why
// printed and written to the summary JSON. No weights, no IR, no plan file.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_MODELSPECPLAN_H
#define LOOM_COMPILER_MODELSPECPLAN_H

#include <cstdint>
#include <string>

namespace mlir::loom {

struct ModelSpecOptions {
  std::string spec, cluster, precision, optimizer, force, summaryJson;
  int64_t globalBatch = 0;
  double momentum = 0; // SGD's
  double searchSeconds = 5;
  bool explain = false, quiet = false;
};

/// Plans `options.spec`; returns the exit code (1 with one error line on
/// stderr).
int planModelSpec(const ModelSpecOptions &options);

} // namespace mlir::loom

#endif // LOOM_COMPILER_MODELSPECPLAN_H
