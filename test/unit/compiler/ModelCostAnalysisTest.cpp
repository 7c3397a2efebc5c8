//===- ModelCostAnalysisTest.cpp - The planner's request from the IR -----===//
//
// The table the joint search costs, read off a training step
// (passes/ModelCostAnalysis.h): a GPT layer's products, attention,
// parameters and tensor-parallel exchanges equal the closed forms of the
// same shape given as a model spec (planner/ModelSpec.h), and Megatron-LM's
// split of an MLP is what the analysis finds.
//
//===----------------------------------------------------------------------===//

#include "passes/ModelCostAnalysis.h"
#include "TestModels.h"
#include "ir/LoomDialect.h"
#include "passes/Passes.h"
#include "passes/planner/ModelSpec.h"
#include "passes/planner/PlanChoice.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::planner;

namespace {

class ModelCostAnalysisTest : public ::testing::Test {
protected:
  ModelCostAnalysisTest() {
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// The table of `source`'s training step (MSE loss, AdamW, fp32).
  ModelCost analyze(llvm::StringRef source) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &ctx);
    EXPECT_TRUE(module);
    PassManager pm(&ctx);
    buildLoomTrainPipeline(pm, TrainPipelineOptions());
    EXPECT_TRUE(succeeded(pm.run(*module)));
    FailureOr<ModelCost> cost = analyzeModelCost(*module, "test");
    EXPECT_TRUE(succeeded(cost));
    return succeeded(cost) ? *cost : ModelCost();
  }

  DialectRegistry registry;
  MLIRContext ctx;
};

int64_t count(const PartCost &part, TpSplit split) {
  return llvm::count_if(part.products, [&](const ProductCost &p) {
    return p.split == split;
  });
}

int64_t collectives(const PartCost &part, TpPhase phase) {
  int64_t n = 0;
  for (const TpCollective &c : part.tpCollectives)
    if (c.phase == phase)
      n += c.count;
  return n;
}

TEST_F(ModelCostAnalysisTest, GptLayersMatchTheirModelSpec) {
  // 8 sequences of 32 tokens, width 64, 4 heads, 4 layers.
  ModelCost ir = analyze(test::gptLayers(8, 32, 64, 4, 4));
  llvm::Expected<GptSpec> spec =
      parseModelSpec("gpt:l=4,h=64,a=4,s=32,v=128");
  ASSERT_TRUE(bool(spec));
  ModelCost closed = modelCostOf(*spec, planner::Precision::Fp32);
  ASSERT_EQ(ir.numLayers(), 4);
  EXPECT_TRUE(ir.uniformLayers());
  const PartCost &a = ir.layers[1], &b = closed.layers[1];
  // The products: q/k/v and the MLP's first column-split, the two
  // projections row-split; the same shapes and FLOPs.
  ASSERT_EQ(a.products.size(), b.products.size());
  for (auto [x, y] : llvm::zip(a.products, b.products)) {
    EXPECT_EQ(x.split, y.split);
    EXPECT_DOUBLE_EQ(x.rows * x.columns * x.inner,
                     y.rows * y.columns * y.inner);
  }
  EXPECT_DOUBLE_EQ(a.attentionFlops, b.attentionFlops);
  EXPECT_DOUBLE_EQ(a.parameters(), b.parameters());
  // The norms whole, and the two row-split projections' biases, added after
  // the sum over tp (the spec's closed form splits those 2h too).
  EXPECT_DOUBLE_EQ(a.wholeParameters, b.wholeParameters + 2 * 64);
  EXPECT_DOUBLE_EQ(a.largestWeight, b.largestWeight);
  // Megatron's two all-reduces forward (after each row-split product) and
  // two backward (the column-split products' input gradients).
  EXPECT_EQ(collectives(a, TpPhase::Forward), 2);
  EXPECT_EQ(collectives(a, TpPhase::Backward), 2);
  // The heads and kv heads of each layer's attention, and the split widths'
  // greatest common divisor (h).
  EXPECT_EQ(ir.tpDivides,
            std::vector<int64_t>({4, 4, 4, 4, 4, 4, 4, 4, 64}));
  EXPECT_EQ(ir.maxTp, 4);
  // What a layer keeps: less under selective recomputation, its input
  // (32 tokens x 64 floats) under full.
  const auto &kept = a.kept;
  EXPECT_GT(kept[size_t(Remat::None)].bytes,
            kept[size_t(Remat::Selective)].bytes);
  EXPECT_DOUBLE_EQ(kept[size_t(Remat::Full)].bytes, 32 * 64 * 4);
  EXPECT_DOUBLE_EQ(a.boundaryBytes, 32 * 64 * 4);
  // Model FLOPs: three times the forward's, attention counted whole; the
  // spec's also count its head (32 tokens by 128 words), this step has none.
  EXPECT_NEAR(ir.modelFlopsPerSample,
              closed.modelFlopsPerSample - 3 * 2 * 32 * 128 * 64, 1);
}

TEST_F(ModelCostAnalysisTest, SplitsAnMlpAsMegatronDoes) {
  ModelCost ir = analyze(test::kMlpLayers);
  ASSERT_EQ(ir.numLayers(), 2);
  EXPECT_EQ(ir.layers[0].kind, ir.layers[1].kind);
  for (const PartCost &layer : ir.layers) {
    EXPECT_EQ(count(layer, TpSplit::Columns), 1);
    EXPECT_EQ(count(layer, TpSplit::Inner), 1);
    // fc's weight and bias and proj's weight split; proj's bias (added
    // after the sum) whole.
    EXPECT_DOUBLE_EQ(layer.splitParameters, 32 * 128 + 128 + 128 * 32);
    EXPECT_DOUBLE_EQ(layer.wholeParameters, 32);
    EXPECT_DOUBLE_EQ(layer.products[0].rows, 1);
  }
  // No attention: tp divides the split widths (128 and 128).
  EXPECT_EQ(ir.tpDivides, std::vector<int64_t>({128}));
  EXPECT_EQ(ir.maxTp, 128);
  EXPECT_EQ(ir.parameters, 2 * (32 * 128 + 128 + 128 * 32 + 32));
}

TEST_F(ModelCostAnalysisTest, FindsATiedEmbedding) {
  ModelCost ir = analyze(test::kTiedEmbedding);
  EXPECT_DOUBLE_EQ(ir.tiedParameters, 256 * 32);
  EXPECT_DOUBLE_EQ(ir.first.splitParameters, 256 * 32);
  ASSERT_EQ(ir.last.products.size(), 1u);
  EXPECT_EQ(ir.last.products[0].split, TpSplit::Columns);
  EXPECT_DOUBLE_EQ(ir.last.products[0].rows, 16);
}

} // namespace
