//===- StagePartitionTest.cpp - Layers into pipeline stages ---------------===//

#include "passes/planner/StagePartition.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace mlir::loom::planner;

namespace {

StageRequest evenLayers(int64_t layers, int64_t stages) {
  StageRequest r;
  r.layerSeconds.assign(layers, 1.0);
  r.inFlight.assign(stages, 1);
  return r;
}

TEST(StagePartitionTest, EqualLayersSplitEvenly) {
  llvm::Expected<StageSplit> two = partitionStages(evenLayers(4, 2));
  ASSERT_TRUE(static_cast<bool>(two));
  EXPECT_EQ(two->layers, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {2, 3}}));
  llvm::Expected<StageSplit> four = partitionStages(evenLayers(4, 4));
  ASSERT_TRUE(static_cast<bool>(four));
  EXPECT_EQ(four->layers, (std::vector<std::pair<int64_t, int64_t>>{
                              {0, 0}, {1, 1}, {2, 2}, {3, 3}}));
}

TEST(StagePartitionTest, EmbeddingAndHeadWeighTheEndStages) {
  // The head and loss cost two layers: the last stage takes fewer layers.
  StageRequest r = evenLayers(6, 2);
  r.lastSeconds = 2;
  llvm::Expected<StageSplit> s = partitionStages(r);
  ASSERT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s->layers, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {4, 5}}));
  EXPECT_DOUBLE_EQ(s->seconds[0], 4);
  EXPECT_DOUBLE_EQ(s->seconds[1], 4);
}

TEST(StagePartitionTest, OneLargeLayerIsBalancedAround) {
  // One layer 5 times the others: the stages' times differ by less than
  // that layer's.
  StageRequest r;
  r.layerSeconds = {1, 1, 5, 1, 1, 1, 1, 1};
  for (int64_t stages : {2, 3, 4}) {
    r.inFlight.assign(stages, 1);
    llvm::Expected<StageSplit> s = partitionStages(r);
    ASSERT_TRUE(static_cast<bool>(s));
    auto [lo, hi] = std::minmax_element(s->seconds.begin(), s->seconds.end());
    EXPECT_LT(*hi - *lo, 5.0) << stages << " stages";
    EXPECT_EQ(static_cast<int64_t>(s->layers.size()), stages);
  }
}

TEST(StagePartitionTest, MemoryBudgetMovesLayersOffTheFirstStage) {
  // 1F1B: the first of 2 stages holds 2 micro-batches' activations, the
  // last 1. Without a budget the split is even; a budget that 2 x 2 layers'
  // activations overflow gives the first stage fewer layers.
  StageRequest r = evenLayers(4, 2);
  r.layerActivationBytes.assign(4, 10);
  r.inFlight = {2, 1};
  llvm::Expected<StageSplit> free = partitionStages(r);
  ASSERT_TRUE(static_cast<bool>(free));
  EXPECT_EQ(free->layers[0], (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(free->bytes[0], 40);
  r.budgetBytes = 30;
  llvm::Expected<StageSplit> tight = partitionStages(r);
  ASSERT_TRUE(static_cast<bool>(tight));
  EXPECT_EQ(tight->layers[0], (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(tight->layers[1], (std::pair<int64_t, int64_t>{1, 3}));
  r.budgetBytes = 15;
  llvm::Expected<StageSplit> none = partitionStages(r);
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_EQ(llvm::toString(none.takeError()),
            "no split of the 4 layers into 2 stages fits 15 bytes a device");
}

TEST(StagePartitionTest, TooFewLayers) {
  llvm::Expected<StageSplit> s = partitionStages(evenLayers(2, 4));
  ASSERT_FALSE(static_cast<bool>(s));
  EXPECT_EQ(llvm::toString(s.takeError()),
            "pp = 4 needs at least 4 layers, the model has 2");
}

} // namespace
