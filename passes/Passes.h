//===- Passes.h - Loom passes and pipelines ---------------------*- C++ -*-===//

#ifndef LOOM_PASSES_PASSES_H
#define LOOM_PASSES_PASSES_H

#include "ir/LoomDialect.h"
#include "passes/Options.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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
/// training step (`loom-train`; `loomc` sets them from its flags).
struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  Option<LossKind> loss{*this, "loss", llvm::cl::desc("the loss"),
                        llvm::cl::init(LossKind::CrossEntropy),
                        llvm::cl::values(LOOM_LOSS_VALUES)};
  Option<std::string> outputName{
      *this, "output-name",
      llvm::cl::desc("graph output the loss is computed from (default: the "
                     "first)")};
  Option<OptimizerKind> optimizer{*this, "optimizer",
                                  llvm::cl::desc("the optimizer"),
                                  llvm::cl::init(OptimizerKind::AdamW),
                                  llvm::cl::values(LOOM_OPTIMIZER_VALUES)};
  Option<double> lr{*this, "lr", llvm::cl::desc("learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("weight decay (negative: the optimizer's default)"),
      llvm::cl::init(-1)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0)};
  Option<Precision> precision{
      *this, "precision",
      llvm::cl::desc("bf16: mixed precision with f32 master weights"),
      llvm::cl::init(Precision::Fp32),
      llvm::cl::values(LOOM_PRECISION_VALUES)};
};

/// Appends loss, mixed precision (for bf16), autodiff, optimizer and
/// running-statistics passes on the entry function.
void buildLoomTrainPipeline(OpPassManager &pm,
                            const TrainPipelineOptions &options);

/// Options of the pipeline that prepares a forward function for a forward
/// plan (`loom-forward`).
struct ForwardPipelineOptions
    : public PassPipelineOptions<ForwardPipelineOptions> {
  Option<Precision> precision{*this, "precision",
                              llvm::cl::desc("the compute precision"),
                              llvm::cl::init(Precision::Fp32),
                              llvm::cl::values(LOOM_PRECISION_VALUES)};
};

/// Appends the passes a forward plan needs: mixed precision for bf16.
void buildLoomForwardPipeline(OpPassManager &pm,
                              const ForwardPipelineOptions &options);

/// Options of the planning + lowering pipeline (`loom-plan`).
struct PlanPipelineOptions : public PassPipelineOptions<PlanPipelineOptions> {
  Option<int64_t> devices{*this, "devices",
                          llvm::cl::desc("number of devices"),
                          llvm::cl::init(1)};
  Option<int64_t> dp{*this, "dp",
                     llvm::cl::desc("force the data-parallel degree (0: "
                                    "choose)"),
                     llvm::cl::init(0)};
  Option<int64_t> tp{*this, "tp",
                     llvm::cl::desc("force the tensor-parallel degree"),
                     llvm::cl::init(1)};
  Option<int64_t> pp{*this, "pp",
                     llvm::cl::desc("force the pipeline-parallel degree"),
                     llvm::cl::init(1)};
  Option<int64_t> micro{*this, "micro",
                        llvm::cl::desc("micro-batches a step accumulates "
                                       "gradients over"),
                        llvm::cl::init(1)};
  Option<int64_t> microBatch{
      *this, "micro-batch",
      llvm::cl::desc("samples per rank per micro-batch (0: from micro)"),
      llvm::cl::init(0)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("the pipeline schedule with pp > 1: gpipe, 1f1b, "
                     "interleaved or zb-h1"),
      llvm::cl::init("1f1b")};
  Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("model chunks a pipeline device (interleaved)"),
      llvm::cl::init(1)};
  Option<std::string> cluster{
      *this, "cluster",
      llvm::cl::desc("the cluster the plan is for (docs/cluster-spec.md); "
                     "loom-auto-shard's costs come from it"),
      llvm::cl::init("cpu:1")};
  Option<double> memoryBudgetGib{
      *this, "memory-budget-gib",
      llvm::cl::desc("per-device memory for parameters and optimizer state, "
                     "in GiB (0: the cluster's device memory)"),
      llvm::cl::init(0)};
  Option<bool> searched{
      *this, "searched",
      llvm::cl::desc("a plan search that weighed the whole plan's memory "
                     "chose the mesh and stages: loom-partition-stages takes "
                     "no memory limit, and loom-auto-shard the sharding of "
                     "least memory when none fits (the emitted arena is "
                     "checked)"),
      llvm::cl::init(false)};
  Option<int64_t> zero{*this, "zero",
                       llvm::cl::desc("the ZeRO stage, 0 to 3 (loom-shard-zero)"),
                       llvm::cl::init(0)};
  Option<bool> localBatchNorm{
      *this, "local-batch-norm",
      llvm::cl::desc("under data parallelism, normalise each rank's block of "
                     "the batch with its own statistics (PyTorch DDP without "
                     "SyncBatchNorm) instead of the global batch's"),
      llvm::cl::init(false)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("bytes per bucket of overlapped all-reduces (0: from "
                     "the cluster's link, -1: none; loom-bucket-all-reduces)"),
      llvm::cl::init(0)};
  Option<int64_t> blockBucketBytes{
      *this, "block-bucket-bytes",
      llvm::cl::desc("bytes per bucket of overlapped reduce-scatters and "
                     "all-gathers (0: from the cluster's link, -1: none; "
                     "loom-bucket-block-collectives)"),
      llvm::cl::init(0)};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("activation recomputation: none, selective, full or "
                     "auto (the cheapest that fits memory-budget-gib; "
                     "loom-choose-recompute)"),
      llvm::cl::init("none")};
  Option<bool> lower{*this, "lower",
                     llvm::cl::desc("partition into one rank's program "
                                    "(false: only annotate the plan)"),
                     llvm::cl::init(true)};
};

/// Chooses the mesh, synchronises batch norms over the data-parallel ranks
/// (unless `localBatchNorm`) and (with `lower`) partitions the step into one
/// rank's program.
void buildLoomPlanPipeline(OpPassManager &pm,
                           const PlanPipelineOptions &options);

/// What the lowering is asked for beside the planned module.
struct LowerPipelineOptions {
  /// The plan's ZeRO stage and tensor- and pipeline-parallel degrees.
  int64_t zero = 0, tp = 1, pp = 1;
  /// loom-choose-recompute's mode, cluster and budget.
  std::string remat = "none", cluster = "cpu:1";
  double memoryBudgetGib = 0;
  /// loom-bucket-all-reduces' bucket size (0: from the cluster, -1: none).
  int64_t bucketBytes = 0;
  /// loom-bucket-block-collectives' bucket size (0: from the cluster, -1:
  /// none).
  int64_t blockBucketBytes = 0;
  /// loom-unroll-micro-batches' written-micro-batches (0: all).
  int64_t writtenMicroBatches = 0;
};

/// The lowering of a planned step into one rank's program (one function a
/// pipeline device): partition, micro-batches written out, stages split,
/// clean-ups, ZeRO-3's regathers, recomputation, gradient buckets.
void buildLoomLowerPipeline(OpPassManager &pm,
                            const LowerPipelineOptions &options);

/// The compiler's phases after import, in order (`loomc --emit=mlir-raised`,
/// `mlir-train`, `mlir-planned`, `mlir-lowered` stop after each).
enum class Phase { Raise, Train, Plan, Lower };

/// Options of the whole pipeline: which phases run, and each phase's own.
struct CompilerPipelineOptions {
  /// False: import straight into training (`loomc --no-raise`).
  bool raise = true;
  /// False: a forward plan (the forward passes instead of train and plan).
  bool training = true;
  Phase last = Phase::Lower;
  TrainPipelineOptions train;
  ForwardPipelineOptions forward;
  /// `lower` is set from `last`.
  PlanPipelineOptions plan;
};

/// raise -> train -> plan -> lower, up to `options.last`, as one pipeline
/// (`loomc` runs it on the imported module; the phases' own pipelines are
/// `loom-opt`'s `loom-raise`, `loom-train`, `loom-plan`).
void buildLoomCompilerPipeline(OpPassManager &pm,
                               const CompilerPipelineOptions &options);

/// Recognises fused ops in an imported forward function: GELU, layer norm,
/// RMS norm, then matmul + bias as `loom.linear`; then canonicalize and CSE.
void buildLoomRaisePipeline(OpPassManager &pm);

/// Registers the pipelines `loom-raise`, `loom-train`, `loom-forward` and
/// `loom-plan` (the
/// passes themselves are registered by the generated `registerLoomPasses()`).
void registerLoomPipelines();

} // namespace mlir::loom

#endif // LOOM_PASSES_PASSES_H
