//===- Passes.h - Loom passes and pipelines ---------------------*- C++ -*-===//

#ifndef LOOM_PASSES_PASSES_H
#define LOOM_PASSES_PASSES_H

#include "ir/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <string>

namespace mlir::loom {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Options of the pipeline that turns an imported forward function into a
/// training step.
struct TrainPipelineOptions {
  std::string loss = "cross_entropy";
  std::string outputName;
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double weightDecay = -1; // optimizer default
  double momentum = 0;
  /// "fp32" or "bf16" (mixed precision with f32 master weights).
  std::string precision = "fp32";
};

/// Appends loss, mixed precision (for bf16), autodiff and optimizer passes on
/// `@main`.
void buildLoomTrainPipeline(OpPassManager &pm,
                            const TrainPipelineOptions &options);

/// Options of the pipeline that prepares a forward function for a forward
/// plan.
struct ForwardPipelineOptions {
  std::string precision = "fp32";
};

/// Appends the passes a forward plan needs: mixed precision for bf16.
void buildLoomForwardPipeline(OpPassManager &pm,
                              const ForwardPipelineOptions &options);

/// Options of the planning + lowering pipeline.
struct PlanPipelineOptions {
  int64_t devices = 1;
  int64_t dp = 0, tp = 1, pp = 1;
  /// False: only annotate the plan (the mesh), leave the step unpartitioned.
  bool lower = true;
};

/// Chooses the mesh and (with `lower`) partitions the step into one rank's
/// program.
void buildLoomPlanPipeline(OpPassManager &pm,
                           const PlanPipelineOptions &options);

/// Recognises fused ops in an imported forward function: GELU, layer norm,
/// RMS norm, then matmul + bias as `loom.linear`; then canonicalize and CSE.
void buildLoomRaisePipeline(OpPassManager &pm);

/// Registers the pipelines `loom-raise`, `loom-train`, `loom-forward` and
/// `loom-plan` (the
/// passes themselves are registered by the generated `registerLoomPasses()`).
void registerLoomPipelines();

} // namespace mlir::loom

#endif // LOOM_PASSES_PASSES_H
