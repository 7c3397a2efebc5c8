//===- MemoryEstimateTest.cpp - The estimate before lowering, checked -----===//
//
// The memory estimate of a planned step (passes/MemoryEstimate.h) against
// the arena and the live-set bound the emitter gives the same step lowered,
// for every plan shape. One micro-batch on any dp / tp / ZeRO mesh is the
// partitioned step itself, so its estimate is the live set exactly;
// micro-batches and pipeline stages are added to it arithmetically, within
// the bands pinned here (docs/planner.md, "Memory before lowering").

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

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// A plan shape of a test model, and how far from the emitted live set its
/// estimate may be (relative; 0: equal). The bands are the gaps measured
/// today, which docs/planner.md reports as not yet closed.
struct Shape {
  const char *name;
  /// The model: four GPT-2 layers, or two MLP layers.
  bool gpt = true;
  int64_t devices = 1, tp = 1, pp = 1, micro = 1, zero = 0;
  const char *remat = "none";
  double within = 0;
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
        shape.gpt ? test::gptLayers(8, 32, 64, 4, 4) : test::kMlpLayers.str(),
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
  options.remat = *parseRematMode(shape.remat).value();
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
  if (shape.within == 0)
    EXPECT_EQ(estimated, memory.liveBytes);
  else
    EXPECT_LE(std::abs(gap), shape.within);
  // What the step holds besides activations is exact.
  const planner::DeviceMemory &busiest =
      std::max_element(estimate->devices.begin(), estimate->devices.end(),
                       [](const DeviceEstimate &a, const DeviceEstimate &b) {
                         return a.memory.total() < b.memory.total();
                       })
          ->memory;
  if (shape.pp == 1) {
    EXPECT_EQ(busiest.parameters, memory.parameters);
    EXPECT_EQ(busiest.optimizerState, memory.optimizerState);
    EXPECT_EQ(busiest.gradients, memory.gradients);
  }
}

INSTANTIATE_TEST_SUITE_P(
    PlanShapes, MemoryEstimateTest,
    ::testing::Values(
        Shape{"gpt_one_device"}, Shape{"gpt_tp2", true, 2, 2},
        Shape{"gpt_dp2_tp2", true, 4, 2},
        Shape{"gpt_selective", true, 1, 1, 1, 1, 0, "selective"},
        Shape{"gpt_full", true, 1, 1, 1, 1, 0, "full"},
        Shape{"mlp_dp2", false, 2},
        Shape{"mlp_dp2_zero1", false, 2, 1, 1, 1, 1},
        Shape{"mlp_dp2_zero3", false, 2, 1, 1, 1, 3},
        Shape{"mlp_dp2_full", false, 2, 1, 1, 1, 0, "full"},
        Shape{"mlp_micro4", false, 1, 1, 1, 4, 0, "none", 0.10},
        Shape{"mlp_dp2_micro2", false, 2, 1, 1, 2, 0, "none", 0.10},
        Shape{"mlp_pp2", false, 2, 1, 2, 4, 0, "none", 0.20},
        Shape{"mlp_pp2_full", false, 2, 1, 2, 4, 0, "full", 0.20}),
    [](const ::testing::TestParamInfo<Shape> &info) {
      return std::string(info.param.name);
    });

} // namespace
