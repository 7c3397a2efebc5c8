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

/// GPT-2 layers as loom ops after raising (batch `b`, sequence `s`, width
/// `h`, `heads` heads), each op named by its layer: the shape whose
/// activations Korthikanti et al. count.
std::string gptLayers(int64_t b, int64_t s, int64_t h, int64_t heads,
                      int layers) {
  int64_t e = h / heads, f = 4 * h;
  auto t = [](std::initializer_list<int64_t> dims) {
    std::string r = "tensor<";
    for (int64_t d : dims)
      r += std::to_string(d) + "x";
    return r + "f32>";
  };
  std::string t3 = t({b, s, h}), t4 = t({b, s, heads, e}),
              th = t({b, heads, s, e}),
              v = "tensor<" + std::to_string(h) + "xf32>";
  std::string args = "%x: " + t3 + " {loom.input = \"x\"}", body;
  std::string x = "%x";
  for (int l = 0; l < layers; ++l) {
    std::string n = std::to_string(l);
    auto param = [&](const std::string &name, const std::string &type,
                     const std::string &onnx) {
      args += ", %" + name + n + ": " + type + " {loom.param = \"h." + n + "." +
              onnx + "\"}";
    };
    param("g1", v, "ln_1.weight");
    param("c1", v, "ln_1.bias");
    param("wqkv",
          "tensor<" + std::to_string(h) + "x" + std::to_string(3 * h) + "xf32>",
          "attn.c_attn.weight");
    param("bqkv", "tensor<" + std::to_string(3 * h) + "xf32>",
          "attn.c_attn.bias");
    param("wo",
          "tensor<" + std::to_string(h) + "x" + std::to_string(h) + "xf32>",
          "attn.c_proj.weight");
    param("bo", v, "attn.c_proj.bias");
    param("g2", v, "ln_2.weight");
    param("c2", v, "ln_2.bias");
    param("w1",
          "tensor<" + std::to_string(h) + "x" + std::to_string(f) + "xf32>",
          "mlp.c_fc.weight");
    param("b1", "tensor<" + std::to_string(f) + "xf32>", "mlp.c_fc.bias");
    param("w2",
          "tensor<" + std::to_string(f) + "x" + std::to_string(h) + "xf32>",
          "mlp.c_proj.weight");
    param("b2", v, "mlp.c_proj.bias");
    auto loc = [&](const std::string &what) {
      return " loc(\"/h." + n + "/" + what + "\")\n";
    };
    auto ln = [&](const std::string &out, const std::string &in,
                  const std::string &g, const std::string &c) {
      body += "  " + out + " = loom.layer_norm " + in + ", " + g + ", " + c +
              " axis 2 {epsilon = 1.0E-5 : f64} : (" + t3 + ", " + v + ", " +
              v + ") -> " + t3 + loc(out.substr(1));
    };
    auto linear = [&](const std::string &out, const std::string &in,
                      const std::string &w, const std::string &bias,
                      const std::string &tin, const std::string &wt,
                      const std::string &bt, const std::string &tout) {
      body += "  " + out + " = loom.linear " + in + ", " + w + ", " + bias +
              " : (" + tin + ", " + wt + ", " + bt + ") -> " + tout +
              loc(out.substr(1));
    };
    std::string tqkv = t({b, s, 3 * h}), tf = t({b, s, f});
    ln("%n1_" + n, x, "%g1" + n, "%c1" + n);
    linear("%qkv" + n, "%n1_" + n, "%wqkv" + n, "%bqkv" + n, t3,
           "tensor<" + std::to_string(h) + "x" + std::to_string(3 * h) +
               "xf32>",
           "tensor<" + std::to_string(3 * h) + "xf32>", tqkv);
    const char *names[] = {"q", "k", "v"};
    for (int i = 0; i < 3; ++i) {
      std::string q = std::string(names[i]) + n;
      body += "  %" + q + "s = loom.slice %qkv" + n + " axes [2] starts [" +
              std::to_string(i * h) + "] ends [" + std::to_string((i + 1) * h) +
              "] steps [1] : " + tqkv + " -> " + t3 + loc(q + "s");
      body += "  %" + q + "r = loom.reshape %" + q + "s [0, 0, -1, " +
              std::to_string(e) + "] : " + t3 + " -> " + t4 + loc(q + "r");
      body += "  %" + q + " = loom.transpose %" + q + "r [0, 2, 1, 3] : " + t4 +
              " -> " + th + loc(q);
    }
    body += "  %a" + n + " = loom.attention %q" + n + ", %k" + n + ", %v" + n +
            " {causal, scale = 0.125 : f64} : (" + th + ", " + th + ", " + th +
            ") -> " + th + loc("a");
    body += "  %at" + n + " = loom.transpose %a" + n + " [0, 2, 1, 3] : " + th +
            " -> " + t4 + loc("at");
    body += "  %ar" + n + " = loom.reshape %at" + n + " [0, 0, -1] : " + t4 +
            " -> " + t3 + loc("ar");
    linear("%o" + n, "%ar" + n, "%wo" + n, "%bo" + n, t3,
           "tensor<" + std::to_string(h) + "x" + std::to_string(h) + "xf32>", v,
           t3);
    body += "  %r" + n + " = loom.add %o" + n + ", " + x + " : (" + t3 + ", " +
            t3 + ") -> " + t3 + loc("r");
    ln("%n2_" + n, "%r" + n, "%g2" + n, "%c2" + n);
    linear("%fc" + n, "%n2_" + n, "%w1" + n, "%b1" + n, t3,
           "tensor<" + std::to_string(h) + "x" + std::to_string(f) + "xf32>",
           "tensor<" + std::to_string(f) + "xf32>", tf);
    body += "  %ge" + n + " = loom.gelu %fc" + n + " {approximate} : " + tf +
            loc("ge");
    linear("%m" + n, "%ge" + n, "%w2" + n, "%b2" + n, tf,
           "tensor<" + std::to_string(f) + "x" + std::to_string(h) + "xf32>", v,
           t3);
    body += "  %y" + n + " = loom.add %r" + n + ", %m" + n + " : (" + t3 +
            ", " + t3 + ") -> " + t3 + loc("y");
    x = "%y" + n;
  }
  return "func.func @main(" + args + ") -> (" + t3 +
         " {loom.output = \"y\"}) {\n" + body + "  return " + x + " : " + t3 +
         "\n}\n";
}

class RecomputePlanTest : public ::testing::Test {
protected:
  RecomputePlanTest() {
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect,
                    tensor::TensorDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// The lowered step of `kLayers` on `devices` CPU ranks with `remat`.
  OwningOpRef<ModuleOp> lower(llvm::StringRef remat, int64_t devices = 1,
                              int64_t pp = 1, int64_t micro = 1) {
    return lowerText(kLayers, remat, devices, pp, micro);
  }

  OwningOpRef<ModuleOp> lowerText(llvm::StringRef text, llvm::StringRef remat,
                                  int64_t devices = 1, int64_t pp = 1,
                                  int64_t micro = 1, int64_t tp = 1,
                                  Precision precision = Precision::Fp32,
                                  double budgetGib = 0) {
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
    plan.cluster = "cpu:" + std::to_string(devices);
    plan.remat = remat.str();
    plan.memoryBudgetGib = budgetGib;
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
  // inputs and outputs whole, the rest split (here at t = 4, fp32).
  const int64_t s = 32, b = 4, h = 64, sbh = s * b * h;
  struct Case {
    Precision precision;
    int64_t tp;
    RematMode mode;
    int64_t bytes;
  } cases[] = {{Precision::Fp32, 1, RematMode::None, 64 * sbh},
               {Precision::Bf16, 1, RematMode::None, 32 * sbh},
               {Precision::Bf16, 1, RematMode::Selective, 20 * sbh},
               {Precision::Bf16, 1, RematMode::Full, 2 * sbh},
               {Precision::Fp32, 4, RematMode::None, 2 * (8 + 24 / 4) * sbh}};
  for (const Case &c : cases) {
    OwningOpRef<ModuleOp> module = lowerText(gptLayers(b, s, h, 4, 2), "none",
                                             c.tp, 1, 1, c.tp, c.precision);
    ASSERT_TRUE(module);
    func::FuncOp f = programFunctions(*module)[0];
    ProgramLayers layers = findLayers(f);
    ASSERT_EQ(layers.keys.size(), 2u);
    EXPECT_EQ(keptActivationBytes(layers.instances[0], c.mode, layers),
              c.bytes)
        << "tp " << c.tp << ", " << stringifyRematMode(c.mode).str()
        << (c.precision == Precision::Bf16 ? ", bf16" : ", fp32");
  }
}

} // namespace
