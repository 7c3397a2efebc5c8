//===- Passes.cpp - Pass and pipeline registration --------------*- C++ -*-===//

#include "passes/Passes.h"

#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::loom;

void mlir::loom::buildLoomRaisePipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createLoomRaiseGeluPass());
  pm.addNestedPass<func::FuncOp>(createLoomRaiseLayerNormPass());
  pm.addNestedPass<func::FuncOp>(createLoomRaiseRmsNormPass());
  pm.addNestedPass<func::FuncOp>(createLoomRaiseLinearPass());
  pm.addNestedPass<func::FuncOp>(createLoomRaiseAttentionPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

/// Mixed precision, when the precision is not fp32.
static void addMixedPrecision(OpPassManager &pm, Precision precision) {
  if (precision == Precision::Fp32)
    return;
  LoomMixedPrecisionPassOptions mixed;
  mixed.precision = precision;
  pm.addNestedPass<func::FuncOp>(createLoomMixedPrecisionPass(mixed));
}

void mlir::loom::buildLoomTrainPipeline(OpPassManager &pm,
                                        const TrainPipelineOptions &options) {
  LoomAppendLossPassOptions loss;
  loss.loss = options.loss;
  loss.outputName = options.outputName;
  pm.addNestedPass<func::FuncOp>(createLoomAppendLossPass(loss));
  // The loss computes like the rest of the forward graph.
  addMixedPrecision(pm, options.precision);
  pm.addNestedPass<func::FuncOp>(createLoomAutodiffPass());
  pm.addNestedPass<func::FuncOp>(createLoomFoldSliceGradsPass());
  LoomAppendOptimizerPassOptions opt;
  opt.optimizer = options.optimizer;
  opt.lr = options.lr;
  opt.weightDecay = options.weightDecay;
  opt.momentum = options.momentum;
  pm.addNestedPass<func::FuncOp>(createLoomAppendOptimizerPass(opt));
  pm.addNestedPass<func::FuncOp>(createLoomAppendRunningStatsPass());
  pm.addPass(createCSEPass());
}

void mlir::loom::buildLoomForwardPipeline(
    OpPassManager &pm, const ForwardPipelineOptions &options) {
  addMixedPrecision(pm, options.precision);
}

/// The lowering's first passes: the planned step as one rank's step for one
/// micro-batch (local shapes, the collectives of the shardings).
static void addPartition(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createLoomVerifyShardingPass());
  pm.addNestedPass<func::FuncOp>(createLoomRecordArgShardingsPass());
  pm.addNestedPass<func::FuncOp>(createLoomStepReshardsPass());
  pm.addNestedPass<func::FuncOp>(shard::createPartition());
}

/// The clean-ups of a partitioned step: sums sunk and merged, slices folded
/// into what they slice, (with ZeRO >= 2 or tp > 1) sums and slices fused
/// into reduce-scatters, canonicalisation and CSE.
static void addPartitionCleanup(OpPassManager &pm, int64_t zero, int64_t tp) {
  // Sums first: two that meet in an addition become one before a slice of
  // the addition is moved up to its operands.
  pm.addNestedPass<func::FuncOp>(createLoomSinkAllReducesPass());
  pm.addNestedPass<func::FuncOp>(createLoomFoldAllSlicesPass());
  if (zero >= 2 || tp > 1) {
    LoomFuseReduceScatterPassOptions fuse;
    fuse.dataParallel = zero >= 2;
    pm.addNestedPass<func::FuncOp>(createLoomFuseReduceScatterPass(fuse));
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::loom::buildLoomPlanPipeline(OpPassManager &pm,
                                       const PlanPipelineOptions &options) {
  LoomChooseMeshPassOptions mesh;
  mesh.devices = options.devices;
  mesh.dp = options.dp;
  mesh.tp = options.tp;
  mesh.pp = options.pp;
  mesh.micro = options.micro;
  mesh.microBatch = options.microBatch;
  pm.addPass(createLoomChooseMeshPass(mesh));
  if (options.pp > 1) {
    LoomPartitionStagesPassOptions stages;
    stages.schedule = options.schedule;
    stages.virtualStages = options.virtualStages;
    stages.cluster = options.cluster;
    stages.memoryBudgetGib =
        options.searched ? -1.0 : options.memoryBudgetGib.getValue();
    pm.addPass(createLoomPartitionStagesPass(stages));
  }
  // Batch statistics over the global batch; CSE then merges them with the
  // running statistics' (loom-append-running-stats builds the same ops).
  if (!options.localBatchNorm) {
    pm.addPass(createLoomSyncBatchNormPass());
    pm.addPass(createCSEPass());
  }
  pm.addPass(createLoomShardDataParallelPass());
  // Forward first: from the split data through the step. Backward first
  // would take the replicated results' annotation back into the activations.
  // The backward sweep then annotates what only its users constrain: a
  // constant mask expanded to the batch takes the split of the op it feeds.
  shard::ShardingPropagationOptions propagation;
  propagation.traversal = shard::TraversalOrder::ForwardBackward;
  pm.addNestedPass<func::FuncOp>(shard::createShardingPropagation(propagation));
  if (options.tp > 1) {
    LoomAutoShardPassOptions autoShard;
    autoShard.cluster = options.cluster;
    autoShard.memoryBudgetGib = options.memoryBudgetGib;
    autoShard.searched = options.searched;
    pm.addPass(createLoomAutoShardPass(autoShard));
  }
  if (options.zero > 0) {
    LoomShardZeroPassOptions zero;
    zero.stage = options.zero;
    pm.addPass(createLoomShardZeroPass(zero));
  }
  if (!options.lower)
    return;
  LowerPipelineOptions lower;
  lower.zero = options.zero;
  lower.tp = options.tp;
  lower.pp = options.pp;
  lower.remat = options.remat;
  lower.cluster = options.cluster;
  lower.memoryBudgetGib = options.memoryBudgetGib;
  lower.bucketBytes = options.bucketBytes;
  lower.blockBucketBytes = options.blockBucketBytes;
  buildLoomLowerPipeline(pm, lower);
}

void mlir::loom::buildLoomLowerPipeline(OpPassManager &pm,
                                        const LowerPipelineOptions &options) {
  addPartition(pm);
  // First after partition: the passes after it see one rank's whole step.
  LoomUnrollMicroBatchesPassOptions unroll;
  unroll.writtenMicroBatches = options.writtenMicroBatches;
  pm.addPass(createLoomUnrollMicroBatchesPass(unroll));
  // Then one function per pipeline device: the passes after it see one
  // device's ops in the order they run.
  if (options.pp > 1)
    pm.addPass(createLoomSplitStagesPass());
  addPartitionCleanup(pm, options.zero, options.tp);
  // After CSE, which would merge the two gathers again.
  if (options.zero >= 3)
    pm.addNestedPass<func::FuncOp>(createLoomRegatherParametersPass());
  // After CSE, which would merge the clones with their originals, and
  // before the buckets, so that their places follow the clones. Under
  // tensor parallelism also without recomputation: the backward gathers
  // sequence-parallel activations again.
  if (options.remat != "none" || options.tp > 1) {
    LoomChooseRecomputePassOptions remat;
    remat.mode = options.remat;
    remat.cluster = options.cluster;
    remat.memoryBudgetGib = options.memoryBudgetGib;
    pm.addPass(createLoomChooseRecomputePass(remat));
    pm.addNestedPass<func::FuncOp>(createLoomRecomputePass());
  }
  // Last: buckets are placed among the ops as they will run.
  LoomBucketAllReducesPassOptions buckets;
  buckets.bucketBytes = options.bucketBytes;
  buckets.cluster = options.cluster;
  pm.addNestedPass<func::FuncOp>(createLoomBucketAllReducesPass(buckets));
  LoomBucketBlockCollectivesPassOptions blocks;
  blocks.bucketBytes = options.blockBucketBytes;
  blocks.cluster = options.cluster;
  pm.addNestedPass<func::FuncOp>(createLoomBucketBlockCollectivesPass(blocks));
}

void mlir::loom::buildLoomCompilerPipeline(
    OpPassManager &pm, const CompilerPipelineOptions &options) {
  if (options.raise)
    buildLoomRaisePipeline(pm);
  if (options.last == Phase::Raise)
    return;
  if (!options.training) {
    buildLoomForwardPipeline(pm, options.forward);
    return;
  }
  // Under tensor parallelism a fused q/k/v projection becomes one linear
  // per block before the step is built, so each rank can hold its heads.
  if (options.plan.tp > 1)
    pm.addNestedPass<func::FuncOp>(createLoomSplitFusedProjectionsPass());
  buildLoomTrainPipeline(pm, options.train);
  if (options.last == Phase::Train)
    return;
  // The plan phase annotates; lowering rewrites.
  PlanPipelineOptions plan;
  plan.devices = options.plan.devices;
  plan.dp = options.plan.dp;
  plan.tp = options.plan.tp;
  plan.pp = options.plan.pp;
  plan.micro = options.plan.micro.getValue();
  plan.schedule = options.plan.schedule.getValue();
  plan.virtualStages = options.plan.virtualStages.getValue();
  plan.microBatch = options.plan.microBatch.getValue();
  plan.cluster = options.plan.cluster.getValue();
  plan.memoryBudgetGib = options.plan.memoryBudgetGib.getValue();
  plan.searched = options.plan.searched.getValue();
  plan.zero = options.plan.zero.getValue();
  plan.bucketBytes = options.plan.bucketBytes.getValue();
  plan.blockBucketBytes = options.plan.blockBucketBytes.getValue();
  plan.remat = options.plan.remat.getValue();
  plan.localBatchNorm = options.plan.localBatchNorm;
  plan.lower = options.last == Phase::Lower;
  buildLoomPlanPipeline(pm, plan);
}

void mlir::loom::registerLoomPipelines() {
  PassPipelineRegistration<>(
      "loom-raise", "Recognise fused ops (gelu, norms, linear) after import",
      [](OpPassManager &pm) { buildLoomRaisePipeline(pm); });
  PassPipelineRegistration<TrainPipelineOptions>(
      "loom-train", "Turn a forward function into a training step",
      buildLoomTrainPipeline);
  PassPipelineRegistration<ForwardPipelineOptions>(
      "loom-forward", "Prepare a forward function for a forward plan",
      buildLoomForwardPipeline);
  PassPipelineRegistration<PlanPipelineOptions>(
      "loom-plan", "Plan the mesh and partition the training step",
      buildLoomPlanPipeline);
}
