//===- MemoryEstimateTest.cpp - The estimate from the planned step -------===//
//
// The memory estimate of a planned step (passes/MemoryEstimate.h) against
// the live-set bound the emitter gives the same step lowered, for every plan
// shape: equal, including the shortened step of many micro-batches and the
// pipeline schedules (docs/planner.md, "Memory before emission").

#include "passes/MemoryEstimate.h"
#include "TestModels.h"
#include "emit/PlanEmitter.h"
#include "ir/LoomDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// A plan shape of a test model.
struct Shape {
  const char *name;
  /// The model: four GPT-2 layers, two MLP layers, or two MLP layers
  /// between a tied embedding and its logits.
  enum Model { Gpt, Mlp, Tied } model = Gpt;
  int64_t devices = 1, tp = 1, pp = 1, micro = 1, zero = 0;
  const char *remat = "none", *schedule = "1f1b";
  int64_t virtualStages = 1;
};

class MemoryEstimateTest : public ::testing::TestWithParam<Shape> {
protected:
  MemoryEstimateTest() {
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect,
                    tensor::TensorDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// The shape's model planned (`lower` false) or lowered with `shape`.
  OwningOpRef<ModuleOp> compile(const Shape &shape, bool lower) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
        shape.model == Shape::Gpt   ? test::gptLayers(8, 32, 64, 4, 4)
        : shape.model == Shape::Mlp ? test::kMlpLayers.str()
                                    : test::kTiedEmbedding.str(),
        &ctx);
    if (!module)
      return nullptr;
    PassManager pm(&ctx);
    buildLoomTrainPipeline(pm, TrainPipelineOptions());
    PlanPipelineOptions plan;
    plan.devices = shape.devices;
    plan.tp = shape.tp;
    plan.pp = shape.pp;
    plan.micro = shape.micro;
    plan.zero = shape.zero;
    plan.remat = shape.remat;
    plan.schedule = shape.schedule;
    plan.virtualStages = shape.virtualStages;
    plan.cluster = "cpu:" + std::to_string(shape.devices);
    plan.lower = lower;
    buildLoomPlanPipeline(pm, plan);
    if (failed(pm.run(*module)))
      return nullptr;
    return module;
  }

  DialectRegistry registry;
  MLIRContext ctx;
};

TEST_P(MemoryEstimateTest, AgreesWithTheLoweredArena) {
  const Shape &shape = GetParam();
  OwningOpRef<ModuleOp> planned = compile(shape, false);
  ASSERT_TRUE(planned);
  MemoryEstimateOptions options;
  options.remat = shape.remat;
  options.cluster = "cpu:" + std::to_string(shape.devices);
  llvm::Expected<MemoryEstimate> estimate = estimateMemory(*planned, options);
  ASSERT_TRUE(static_cast<bool>(estimate))
      << llvm::toString(estimate.takeError());
  ASSERT_EQ(static_cast<int64_t>(estimate->devices.size()), shape.pp);

  OwningOpRef<ModuleOp> lowered = compile(shape, true);
  ASSERT_TRUE(lowered);
  EmitOptions emit;
  emit.modelPath = "/m.onnx";
  MemoryBreakdown memory;
  FailureOr<::loom::plan::Plan> plan = emitPlan(*lowered, emit, &memory);
  ASSERT_TRUE(succeeded(plan));
  int64_t arena = 0;
  for (const ::loom::plan::Program &p : plan->programs())
    arena = std::max(arena, p.arena_bytes());
  int64_t estimated = estimate->peakBytes();
  double gap = double(estimated - memory.liveBytes) / memory.liveBytes;
  std::printf("%-22s estimate %9lld  live set %9lld (%+.2f%%)  arena %9lld\n",
              shape.name, static_cast<long long>(estimated),
              static_cast<long long>(memory.liveBytes), 100 * gap,
              static_cast<long long>(arena));
  EXPECT_EQ(estimated, memory.liveBytes);
  // What the step holds besides activations.
  const planner::DeviceMemory &busiest = *std::max_element(
      estimate->devices.begin(), estimate->devices.end(),
      [](const planner::DeviceMemory &a, const planner::DeviceMemory &b) {
        return a.total() < b.total();
      });
  if (shape.pp == 1) {
    EXPECT_EQ(busiest.parameters, memory.parameters);
    EXPECT_EQ(busiest.optimizerState, memory.optimizerState);
    EXPECT_EQ(busiest.gradients, memory.gradients);
  }
}

INSTANTIATE_TEST_SUITE_P(
    PlanShapes, MemoryEstimateTest,
    ::testing::Values(
        Shape{"gpt_one_device"}, Shape{"gpt_tp2", Shape::Gpt, 2, 2},
        Shape{"gpt_dp2_tp2", Shape::Gpt, 4, 2},
        Shape{"gpt_selective", Shape::Gpt, 1, 1, 1, 1, 0, "selective"},
        Shape{"gpt_full", Shape::Gpt, 1, 1, 1, 1, 0, "full"},
        Shape{"mlp_dp2", Shape::Mlp, 2},
        Shape{"mlp_dp2_zero1", Shape::Mlp, 2, 1, 1, 1, 1},
        Shape{"mlp_dp2_zero3", Shape::Mlp, 2, 1, 1, 1, 3},
        Shape{"mlp_dp2_full", Shape::Mlp, 2, 1, 1, 1, 0, "full"},
        Shape{"mlp_micro2", Shape::Mlp, 1, 1, 1, 2},
        Shape{"mlp_micro8", Shape::Mlp, 1, 1, 1, 8},
        Shape{"mlp_dp2_micro4", Shape::Mlp, 2, 1, 1, 4},
        Shape{"mlp_dp2_zero3_micro4", Shape::Mlp, 2, 1, 1, 4, 3},
        Shape{"mlp_micro8_auto", Shape::Mlp, 1, 1, 1, 8, 0, "auto"},
        Shape{"gpt_micro4", Shape::Gpt, 1, 1, 1, 4},
        Shape{"gpt_tp2_micro4_selective", Shape::Gpt, 2, 2, 1, 4, 0,
              "selective"},
        Shape{"gpt_dp2_zero2_micro2", Shape::Gpt, 2, 1, 1, 2, 2},
        Shape{"gpt_dp2_zero3", Shape::Gpt, 2, 1, 1, 1, 3},
        Shape{"gpt_micro4_full", Shape::Gpt, 1, 1, 1, 4, 0, "full"},
        Shape{"mlp_pp2", Shape::Mlp, 2, 1, 2, 4},
        Shape{"mlp_pp2_full", Shape::Mlp, 2, 1, 2, 4, 0, "full"},
        Shape{"mlp_pp2_gpipe", Shape::Mlp, 2, 1, 2, 4, 0, "none", "gpipe"},
        Shape{"mlp_pp2_zb", Shape::Mlp, 2, 1, 2, 4, 0, "none", "zb-h1"},
        Shape{"gpt_pp2", Shape::Gpt, 2, 1, 2, 4},
        Shape{"gpt_pp2_interleaved", Shape::Gpt, 2, 1, 2, 4, 0, "none",
              "interleaved", 2},
        Shape{"tied_dp2", Shape::Tied, 2},
        Shape{"tied_pp2", Shape::Tied, 2, 1, 2, 4},
        Shape{"tied_pp2_micro1", Shape::Tied, 2, 1, 2, 1}),
    [](const ::testing::TestParamInfo<Shape> &info) {
      return std::string(info.param.name);
    });

} // namespace
