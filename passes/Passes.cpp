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

void mlir::loom::buildLoomTrainPipeline(OpPassManager &pm,
                                        const TrainPipelineOptions &options) {
  LoomAppendLossPassOptions loss;
  loss.loss = options.loss;
  loss.outputName = options.outputName;
  pm.addNestedPass<func::FuncOp>(createLoomAppendLossPass(loss));
  // The loss computes like the rest of the forward graph.
  buildLoomForwardPipeline(pm, {options.precision});
  pm.addNestedPass<func::FuncOp>(createLoomAutodiffPass());
  pm.addNestedPass<func::FuncOp>(createLoomFoldSliceGradsPass());
  LoomAppendOptimizerPassOptions opt;
  opt.optimizer = options.optimizer;
  opt.lr = options.lr;
  opt.weightDecay = options.weightDecay;
  opt.momentum = options.momentum;
  pm.addNestedPass<func::FuncOp>(createLoomAppendOptimizerPass(opt));
  pm.addPass(createCSEPass());
}

void mlir::loom::buildLoomForwardPipeline(
    OpPassManager &pm, const ForwardPipelineOptions &options) {
  if (options.precision == "fp32")
    return;
  LoomMixedPrecisionPassOptions mixed;
  mixed.precision = options.precision;
  pm.addNestedPass<func::FuncOp>(createLoomMixedPrecisionPass(mixed));
}

void mlir::loom::buildLoomPlanPipeline(OpPassManager &pm,
                                       const PlanPipelineOptions &options) {
  LoomChooseMeshPassOptions mesh;
  mesh.devices = options.devices;
  mesh.dp = options.dp;
  mesh.tp = options.tp;
  mesh.pp = options.pp;
  pm.addPass(createLoomChooseMeshPass(mesh));
  pm.addPass(createLoomShardDataParallelPass());
  // Forward only: from the split data through the step. Backward first would
  // take the replicated results' annotation back into the activations.
  shard::ShardingPropagationOptions propagation;
  propagation.traversal = shard::TraversalOrder::Forward;
  pm.addNestedPass<func::FuncOp>(shard::createShardingPropagation(propagation));
  if (!options.lower)
    return;
  pm.addNestedPass<func::FuncOp>(shard::createPartition());
  pm.addNestedPass<func::FuncOp>(createLoomFoldAllSlicesPass());
  pm.addNestedPass<func::FuncOp>(createLoomSinkAllReducesPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

namespace {
struct TrainPipelineCLOptions
    : public PassPipelineOptions<TrainPipelineCLOptions> {
  Option<std::string> loss{*this, "loss", llvm::cl::init("cross_entropy"),
                           llvm::cl::desc("cross_entropy | mse | output")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::init("adamw"),
                                llvm::cl::desc("adamw | sgd")};
  Option<double> lr{*this, "lr", llvm::cl::init(1e-3),
                    llvm::cl::desc("learning rate")};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0.0),
                          llvm::cl::desc("SGD momentum")};
  Option<std::string> precision{*this, "precision", llvm::cl::init("fp32"),
                                llvm::cl::desc("fp32 | bf16")};
};

struct ForwardPipelineCLOptions
    : public PassPipelineOptions<ForwardPipelineCLOptions> {
  Option<std::string> precision{*this, "precision", llvm::cl::init("fp32"),
                                llvm::cl::desc("fp32 | bf16")};
};

struct PlanPipelineCLOptions
    : public PassPipelineOptions<PlanPipelineCLOptions> {
  Option<int64_t> devices{*this, "devices", llvm::cl::init(1),
                          llvm::cl::desc("number of devices")};
};
} // namespace

void mlir::loom::registerLoomPipelines() {
  PassPipelineRegistration<>(
      "loom-raise", "Recognise fused ops (gelu, norms, linear) after import",
      [](OpPassManager &pm) { buildLoomRaisePipeline(pm); });
  PassPipelineRegistration<TrainPipelineCLOptions>(
      "loom-train", "Turn a forward function into a training step",
      [](OpPassManager &pm, const TrainPipelineCLOptions &cl) {
        TrainPipelineOptions options;
        options.loss = cl.loss;
        options.optimizer = cl.optimizer;
        options.lr = cl.lr;
        options.momentum = cl.momentum;
        options.precision = cl.precision;
        buildLoomTrainPipeline(pm, options);
      });
  PassPipelineRegistration<ForwardPipelineCLOptions>(
      "loom-forward", "Prepare a forward function for a forward plan",
      [](OpPassManager &pm, const ForwardPipelineCLOptions &cl) {
        ForwardPipelineOptions options;
        options.precision = cl.precision;
        buildLoomForwardPipeline(pm, options);
      });
  PassPipelineRegistration<PlanPipelineCLOptions>(
      "loom-plan", "Plan the mesh and partition the training step",
      [](OpPassManager &pm, const PlanPipelineCLOptions &cl) {
        PlanPipelineOptions options;
        options.devices = cl.devices;
        buildLoomPlanPipeline(pm, options);
      });
}
