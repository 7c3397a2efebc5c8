//===- PlanOutputs.cpp - What loomc records of the plan it emits ----------===//

#include "compiler/PlanOutputs.h"
#include "compiler/PlanCost.h"
#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/RecomputePlan.h"
#include "runtime/Workspace.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loomc;

int64_t loomc::batchOf(ModuleOp module) {
  auto func = lookupEntryFunction(module);
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), "loom.input"))
      if (auto t = dyn_cast<RankedTensorType>(arg.getType()))
        if (t.getRank() > 0)
          return t.getDimSize(0);
  return 0;
}

void loomc::setTrainingSettings(plan::Training &t, ModuleOp module,
                                const Options &o, const Checked &c,
                                int64_t globalBatch, int64_t dp,
                                int64_t numMicroBatches, int64_t zero) {
  if (c.training) {
    t.set_loss(o.loss);
    t.set_optimizer(stringifyOptimizer(c.optimizer).str());
    // The optimizer's settings as the step applies them (with
    // loom-append-optimizer's defaults), read from its first update.
    t.set_lr(o.lr);
    module->walk([&](Operation *op) {
      if (auto adamw = dyn_cast<AdamwOp>(op)) {
        t.set_lr(adamw.getLrAttr().getValueAsDouble());
        t.set_beta1(adamw.getBeta1Attr().getValueAsDouble());
        t.set_beta2(adamw.getBeta2Attr().getValueAsDouble());
        t.set_eps(adamw.getEpsAttr().getValueAsDouble());
        t.set_weight_decay(adamw.getWeightDecayAttr().getValueAsDouble());
      } else if (auto sgd = dyn_cast<SgdOp>(op)) {
        t.set_lr(sgd.getLrAttr().getValueAsDouble());
        t.set_momentum(sgd.getMomentumAttr().getValueAsDouble());
        t.set_weight_decay(sgd.getWeightDecayAttr().getValueAsDouble());
      } else {
        return WalkResult::advance();
      }
      return WalkResult::interrupt();
    });
    t.set_global_batch(globalBatch);
    t.set_micro_batch(globalBatch / (dp * numMicroBatches));
    t.set_num_micro_batches(numMicroBatches);
  } else {
    t.set_global_batch(batchOf(module));
    t.set_micro_batch(t.global_batch());
    t.set_num_micro_batches(1);
  }
  t.set_tokens_per_sample(1);
  t.set_precision(stringifyPrecision(c.precision).str());
  t.set_zero_stage(zero);
}

PlanFigures loomc::stepFigures(ModuleOp module, const plan::Plan &plan,
                               MemoryBreakdown memory, const Cluster &cluster,
                               Precision precision) {
  // On GPUs the kernels add workspace of their own (attention scores above
  // all); the CPU kernels' is small and not counted.
  if (cluster.deviceName != "cpu")
    for (const plan::Program &prog : plan.programs())
      memory.workspace = std::max(
          memory.workspace, ::loom::runtime::estimateCudaWorkspaceBytes(prog));
  // The step and memory figures come from the planner's models: each
  // program's step (one a pipeline device), the busiest one's stretched by
  // the schedule's waits.
  planner::Precision costPrecision = precision == Precision::Bf16
                                         ? planner::Precision::Bf16
                                         : planner::Precision::Fp32;
  planner::MeshTopology topology = meshTopologyOf(module, cluster);
  planner::StepRequest request;
  planner::StepEstimate step;
  std::vector<double> deviceSeconds;
  for (func::FuncOp f : programFunctions(module)) {
    planner::StepRequest r =
        stepRequestOf(f, costPrecision, cluster.hostKernels());
    r.workingSetBytes = double(memory.liveBytes);
    planner::StepEstimate e = planner::estimateStep(r, cluster, topology);
    deviceSeconds.push_back(e.stepSeconds);
    if (deviceSeconds.size() == 1 || e.stepSeconds > step.stepSeconds) {
      request = std::move(r);
      step = std::move(e);
    }
  }
  PipelineStages stages = pipelineStagesOf(module);
  if (stages.stretch > 1) {
    step.stepSeconds *= stages.stretch;
    step.modelTflops /= stages.stretch;
    step.mfu /= stages.stretch;
  }
  PlanFigures figures = planFigures(plan, memory, request, std::move(step));
  setPipelineFigures(figures, plan, stages, deviceSeconds);
  figures.liveBytes = memory.liveBytes;
  return figures;
}
