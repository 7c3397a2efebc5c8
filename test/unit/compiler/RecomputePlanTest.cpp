//===- RecomputePlanTest.cpp - Recomputation's choice against the plan ----===//
//
// The peak loom-choose-recompute predicts for a program is the live-set
// bound of the arena the emitter then places for it, with and without
// recomputation, and every plan shape keeps it.

#include "passes/RecomputePlan.h"
#include "emit/PlanEmitter.h"
#include "ir/EntryFunction.h"
#include "ir/LoomDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Two residual MLP layers with numbered node names, batch 512.
constexpr llvm::StringLiteral kLayers = R"(
func.func @main(%x: tensor<512x32xf32> {loom.input = "x"},
    %w0: tensor<32x128xf32> {loom.param = "h.0.fc.weight"}, %b0: tensor<128xf32> {loom.param = "h.0.fc.bias"},
    %v0: tensor<128x32xf32> {loom.param = "h.0.proj.weight"}, %c0: tensor<32xf32> {loom.param = "h.0.proj.bias"},
    %w1: tensor<32x128xf32> {loom.param = "h.1.fc.weight"}, %b1: tensor<128xf32> {loom.param = "h.1.fc.bias"},
    %v1: tensor<128x32xf32> {loom.param = "h.1.proj.weight"}, %c1: tensor<32xf32> {loom.param = "h.1.proj.bias"})
    -> (tensor<512x32xf32> {loom.output = "y"}) {
  %h0 = loom.linear %x, %w0, %b0 : (tensor<512x32xf32>, tensor<32x128xf32>, tensor<128xf32>) -> tensor<512x128xf32> loc("/h.0/fc/Gemm")
  %a0 = loom.gelu %h0 {approximate} : tensor<512x128xf32> loc("/h.0/act/Gelu")
  %p0 = loom.linear %a0, %v0, %c0 : (tensor<512x128xf32>, tensor<128x32xf32>, tensor<32xf32>) -> tensor<512x32xf32> loc("/h.0/proj/Gemm")
  %y0 = loom.add %x, %p0 : (tensor<512x32xf32>, tensor<512x32xf32>) -> tensor<512x32xf32> loc("/h.0/Add")
  %h1 = loom.linear %y0, %w1, %b1 : (tensor<512x32xf32>, tensor<32x128xf32>, tensor<128xf32>) -> tensor<512x128xf32> loc("/h.1/fc/Gemm")
  %a1 = loom.gelu %h1 {approximate} : tensor<512x128xf32> loc("/h.1/act/Gelu")
  %p1 = loom.linear %a1, %v1, %c1 : (tensor<512x128xf32>, tensor<128x32xf32>, tensor<32xf32>) -> tensor<512x32xf32> loc("/h.1/proj/Gemm")
  %y1 = loom.add %y0, %p1 : (tensor<512x32xf32>, tensor<512x32xf32>) -> tensor<512x32xf32> loc("/h.1/Add")
  return %y1 : tensor<512x32xf32>
}
)";

class RecomputePlanTest : public ::testing::Test {
protected:
  RecomputePlanTest() {
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect,
                    tensor::TensorDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// The lowered step on `devices` CPU ranks with `remat`.
  OwningOpRef<ModuleOp> lower(llvm::StringRef remat, int64_t devices = 1,
                              int64_t pp = 1, int64_t micro = 1) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kLayers, &ctx);
    if (!module)
      return nullptr;
    PassManager pm(&ctx);
    TrainPipelineOptions train;
    buildLoomTrainPipeline(pm, train);
    PlanPipelineOptions plan;
    plan.devices = devices;
    plan.pp = pp;
    plan.micro = micro;
    plan.cluster = "cpu:" + std::to_string(devices);
    plan.remat = remat.str();
    buildLoomPlanPipeline(pm, plan);
    if (failed(pm.run(*module)))
      return nullptr;
    return module;
  }

  /// Each program's simulated peak, in program order; sets `busiestLive`
  /// to the emitted live-set bound of the program of largest arena.
  std::vector<int64_t> emittedLiveBytes(ModuleOp module) {
    EmitOptions options;
    options.modelPath = "/m.onnx";
    std::vector<int64_t> bytes;
    for (func::FuncOp f : programFunctions(module))
      bytes.push_back(simulatePeakBytes(f, {}));
    MemoryBreakdown memory;
    FailureOr<::loom::plan::Plan> plan = emitPlan(module, options, &memory);
    EXPECT_TRUE(succeeded(plan));
    busiestLive = memory.liveBytes;
    return bytes;
  }

  int64_t predictedPeak(func::FuncOp f) {
    auto remat = f->getAttrOfType<DictionaryAttr>("loom.remat");
    return remat ? remat.getAs<IntegerAttr>("peak_bytes").getInt() : -1;
  }

  DialectRegistry registry;
  MLIRContext ctx;
  int64_t busiestLive = 0;
};

TEST_F(RecomputePlanTest, PredictedPeakIsTheEmittedLiveSet) {
  // Without recomputation the simulation of the program is the emitter's
  // live-set bound; with it, the peak the choice predicted before the
  // clones existed is the bound of the program with them.
  OwningOpRef<ModuleOp> none = lower("none");
  ASSERT_TRUE(none);
  std::vector<int64_t> base = emittedLiveBytes(*none);
  ASSERT_EQ(base.size(), 1u);
  EXPECT_EQ(base[0], busiestLive);
  for (llvm::StringRef mode : {"selective", "full"}) {
    OwningOpRef<ModuleOp> module = lower(mode);
    ASSERT_TRUE(module);
    func::FuncOp f = programFunctions(*module)[0];
    std::vector<int64_t> live = emittedLiveBytes(*module);
    EXPECT_EQ(live[0], busiestLive) << mode.str();
    EXPECT_EQ(predictedPeak(f), busiestLive) << mode.str();
    EXPECT_LT(busiestLive, base[0]) << mode.str();
  }
}

TEST_F(RecomputePlanTest, SelectiveRecomputesTheActivationsFull) {
  // Selective: each layer's GELU (its input is kept for its gradient);
  // full: also the first linear, whose output the GELU needs. The residual
  // sums are the next layer's input and stay.
  auto recomputed = [&](llvm::StringRef mode) {
    OwningOpRef<ModuleOp> module = lower(mode);
    std::string ops;
    module->walk([&](Operation *op) {
      if (op->hasAttr("loom.recomputed"))
        ops += op->getName().stripDialect().str() + " ";
    });
    return ops;
  };
  EXPECT_EQ(recomputed("selective"), "gelu gelu ");
  EXPECT_EQ(recomputed("full"), "linear gelu linear gelu ");
  EXPECT_EQ(recomputed("none"), "");
}

TEST_F(RecomputePlanTest, EveryPipelineDeviceAndMicroBatchRecomputes) {
  // pp = 2 with 2 micro-batches: each device's program recomputes its own
  // layer for each micro-batch, and the figures hold per program.
  OwningOpRef<ModuleOp> module = lower("full", 2, 2, 2);
  ASSERT_TRUE(module);
  SmallVector<func::FuncOp> programs = programFunctions(*module);
  ASSERT_EQ(programs.size(), 2u);
  std::vector<int64_t> live = emittedLiveBytes(*module);
  for (auto [f, bytes] : llvm::zip(programs, live)) {
    int64_t clones = 0;
    f.walk([&](Operation *op) { clones += op->hasAttr("loom.recomputed"); });
    EXPECT_EQ(clones, 2 * 2) << f.getSymName().str(); // linear + gelu, 2 mbs
    EXPECT_EQ(predictedPeak(f), bytes) << f.getSymName().str();
  }
}

} // namespace
