//===- RecomputePlanTest.cpp - Recomputation's choice against the plan ----===//
//
// The peak loom-choose-recompute predicts for a program is the live-set
// bound of the arena the emitter then places for it, with and without
// recomputation, and every plan shape keeps it.

#include "passes/RecomputePlan.h"
#include "TestModels.h"
#include "emit/PlanEmitter.h"
#include "ir/EntryFunction.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;
using test::gptLayers;

namespace {

class RecomputePlanTest : public ::testing::Test {
protected:
  RecomputePlanTest() {
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect,
                    tensor::TensorDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// The lowered step of `kMlpLayers` on `devices` CPU ranks with `remat`.
  OwningOpRef<ModuleOp> lower(llvm::StringRef remat, int64_t devices = 1,
                              int64_t pp = 1, int64_t micro = 1) {
    return lowerText(test::kMlpLayers, remat, devices, pp, micro);
  }

  OwningOpRef<ModuleOp> lowerText(llvm::StringRef text, llvm::StringRef remat,
                                  int64_t devices = 1, int64_t pp = 1,
                                  int64_t micro = 1, int64_t tp = 1,
                                  Precision precision = Precision::Fp32,
                                  double budgetGib = 0,
                                  llvm::StringRef cluster = "",
                                  int64_t blockBucketBytes = 0) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
    if (!module)
      return nullptr;
    PassManager pm(&ctx);
    TrainPipelineOptions train;
    train.precision = precision;
    buildLoomTrainPipeline(pm, train);
    PlanPipelineOptions plan;
    plan.devices = devices;
    plan.pp = pp;
    plan.micro = micro;
    plan.tp = tp;
    plan.cluster =
        cluster.empty() ? "cpu:" + std::to_string(devices) : cluster.str();
    plan.remat = remat.str();
    plan.memoryBudgetGib = budgetGib;
    plan.blockBucketBytes = blockBucketBytes;
    buildLoomPlanPipeline(pm, plan);
    if (failed(pm.run(*module)))
      return nullptr;
    return module;
  }

  /// Each program's simulated peak, in program order; sets `busiestLive`
  /// to the emitted live-set bound (the most of any program).
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
    // The gradient buckets, placed after the choice, hold their sums as one
    // range: they can only add to what it predicted.
    EXPECT_LE(predictedPeak(f), bytes) << f.getSymName().str();
  }
  EXPECT_EQ(*std::max_element(live.begin(), live.end()), busiestLive);
}

TEST_F(RecomputePlanTest, KeptActivationsFollowKorthikantisFormula) {
  // Korthikanti et al. count a GPT layer's activations at sbh(34 + 5as/h)
  // bytes in 16-bit storage: 4 for the two layer-norm inputs, 2 + 6 for
  // the q/k/v input and q, k, v, 2 for the output projection's input, 2 + 8
  // + 8 for the MLP's input, GELU input and output, 2 for the two dropout
  // masks, and 5as/h for the attention scores, their softmax and dropout.
  // Loom's layers have no dropout and its attention keeps no scores (its
  // gradient recomputes them): 32 sbh in bf16, 64 in fp32. Selective
  // recomputation drops the norms' outputs and the GELU's (12), full
  // keeps the layer's input (2, counted as the previous layer's output).
  // With Megatron's tensor-parallel split over t, 8 + 24/t: the norms'
  // inputs and outputs whole, the rest split (here at t = 4, fp32). Where
  // the plan holds the residuals split between the layers (cpu:4's) and the
  // backward gathers the norms' inputs again (under a budget), 4 + 28/t.
  const int64_t s = 32, b = 4, h = 64, sbh = s * b * h;
  struct Case {
    Precision precision;
    int64_t tp;
    RematMode mode;
    int64_t bytes;
    bool regather = false;
  } cases[] = {
      {Precision::Fp32, 1, RematMode::None, 64 * sbh},
      {Precision::Bf16, 1, RematMode::None, 32 * sbh},
      {Precision::Bf16, 1, RematMode::Selective, 20 * sbh},
      {Precision::Bf16, 1, RematMode::Full, 2 * sbh},
      {Precision::Fp32, 4, RematMode::None, 2 * (8 + 24 / 4) * sbh},
      {Precision::Fp32, 4, RematMode::None, 2 * (4 + 28 / 4) * sbh, true}};
  for (const Case &c : cases) {
    OwningOpRef<ModuleOp> module = lowerText(gptLayers(b, s, h, 4, 2), "none",
                                             c.tp, 1, 1, c.tp, c.precision);
    ASSERT_TRUE(module);
    func::FuncOp f = programFunctions(*module)[0];
    ProgramLayers layers = findLayers(f);
    ASSERT_EQ(layers.keys.size(), 2u);
    EXPECT_EQ(
        keptActivationBytes(layers.instances[0], c.mode, layers, c.regather),
        c.bytes)
        << "tp " << c.tp << ", " << stringifyRematMode(c.mode).str()
        << (c.precision == Precision::Bf16 ? ", bf16" : ", fp32");
  }
}

TEST_F(RecomputePlanTest, SequenceParallelLayersKeepTheirShare) {
  // Three GPT layers (batch 4 x sequence 256 x width 256) at tp = 4 of an
  // H100 node under 0.019 GiB a device: the ILP splits every layer norm
  // along the sequence, and the program without gathers made again does
  // not fit, so the backward gathers the norms' outputs (and the residuals
  // their gradients read whole) again. A middle layer then keeps
  // Korthikanti et al.'s tensor- and sequence-parallel share, the figures
  // of KeptActivationsFollowKorthikantisFormula over t: 64/t sbh in fp32,
  // selective 40/t (the split norms run again with their gathers); full
  // keeps its input and the attention's reduce-scattered output (a
  // collective is not run again), 2 x 4/t.
  const int64_t s = 256, b = 4, h = 256, t = 4, sbh = s * b * h;
  const double budgetGib = 0.019;
  // (The sequence's gathers stay blocking, -1: in buckets, a gather made
  // again is a loom.all_gather_start without its loom.recomputed mark.)
  OwningOpRef<ModuleOp> module =
      lowerText(gptLayers(b, s, h, 4, 3), "none", t, 1, 1, t, Precision::Fp32,
                budgetGib, "h100:1x4", /*blockBucketBytes=*/-1);
  ASSERT_TRUE(module);
  func::FuncOp f = programFunctions(*module)[0];
  int64_t splitNorms = 0, regathered = 0;
  f.walk([&](Operation *op) {
    if (isa<LayerNormOp>(op))
      splitNorms +=
          cast<RankedTensorType>(op->getResult(0).getType()).getDimSize(1) ==
          s / t;
    regathered += isa<shard::AllGatherOp>(op) && op->hasAttr("loom.recomputed");
  });
  ASSERT_EQ(splitNorms, 2 * 3);
  EXPECT_GE(regathered, 2 * 3);
  // The buckets, placed after the choice, can only add to its peak.
  emittedLiveBytes(*module);
  EXPECT_LE(predictedPeak(f), busiestLive);

  ProgramLayers layers = findLayers(f);
  ASSERT_EQ(layers.keys.size(), 3u);
  const LayerInstance &middle = layers.instances[1];
  EXPECT_EQ(keptActivationBytes(middle, RematMode::None, layers), 64 * sbh / t);
  EXPECT_EQ(keptActivationBytes(middle, RematMode::Selective, layers),
            40 * sbh / t);
  EXPECT_EQ(keptActivationBytes(middle, RematMode::Full, layers),
            2 * 4 * sbh / t);
}

} // namespace
