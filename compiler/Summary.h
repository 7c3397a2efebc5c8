//===- Summary.h - What a plan does, for people and tools -------*- C++ -*-===//

#ifndef LOOM_COMPILER_SUMMARY_H
#define LOOM_COMPILER_SUMMARY_H

#include "compiler/Cluster.h"
#include "emit/PlanEmitter.h"

#include "llvm/Support/JSON.h"

#include <string>

namespace mlir::loom {

/// First-order prediction of one step of a plan on a cluster: the FLOPs of
/// the GEMMs and attention (causal at half) at the device's peak, the other
/// instructions' traffic at its memory bandwidth, and all-reduces with the
/// ring cost 2(n-1)/n bytes over the slowest link the group spans.
struct Prediction {
  double flopsPerDevice = 0;
  double computeSeconds = 0, memorySeconds = 0, commSeconds = 0;
  double stepSeconds = 0;
  double modelTflopsPerDevice = 0, mfu = 0;
};

Prediction predictStep(const plan::Plan &plan, const Cluster &cluster);

/// The `--summary-json` object (docs/loomc.md).
llvm::json::Object summaryJson(const plan::Plan &plan, const Cluster &cluster,
                               const MemoryBreakdown &memory,
                               const Prediction &prediction,
                               double planningSeconds);

/// The human summary `loomc` prints.
std::string summaryText(const plan::Plan &plan, const Cluster &cluster,
                        const MemoryBreakdown &memory,
                        const Prediction &prediction);

} // namespace mlir::loom

#endif // LOOM_COMPILER_SUMMARY_H
