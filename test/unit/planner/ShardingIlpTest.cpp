//===- ShardingIlpTest.cpp - The auto-sharding ILP against brute force ----===//

#include "passes/planner/ShardingIlp.h"
#include "passes/planner/NoFit.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

using namespace mlir::loom::planner;

namespace {

/// The cheapest choice by enumerating every one (small requests only).
double bruteForce(const IlpRequest &request, std::vector<unsigned> &best) {
  size_t n = request.nodes.size();
  std::vector<unsigned> choice(n, 0);
  double bestSeconds = kForbidden;
  auto grouped = [&] { // the members of each group agree
    std::map<int, unsigned> taken;
    for (size_t i = 0; i < n; ++i)
      if (int g = request.nodes[i].group; g >= 0 &&
          taken.try_emplace(g, choice[i]).first->second != choice[i])
        return false;
    return true;
  };
  while (true) {
    IlpSolution s = evaluateChoice(request, choice);
    if (grouped() && s.memoryBytes <= request.memoryBudgetBytes &&
        s.seconds < bestSeconds) {
      bestSeconds = s.seconds;
      best = choice;
    }
    size_t i = 0;
    for (; i < n; ++i) {
      if (++choice[i] < request.nodes[i].cost.size())
        break;
      choice[i] = 0;
    }
    if (i == n)
      return bestSeconds;
  }
}

TEST(ShardingIlpTest, EdgeCostMakesNeighboursAgree) {
  // Two ops that each prefer a different strategy alone, but resharding
  // between them costs more than either's preference.
  IlpRequest r;
  r.nodes = {{{1.0, 2.0}, {}}, {{2.0, 1.0}, {}}};
  r.edges = {{0, 1, {0.0, 5.0, 5.0, 0.0}}};
  auto sol = solveShardingIlp(r);
  ASSERT_TRUE(static_cast<bool>(sol)) << llvm::toString(sol.takeError());
  EXPECT_DOUBLE_EQ(sol->seconds, 3.0);
  EXPECT_EQ(sol->choice[0], sol->choice[1]);
  EXPECT_TRUE(sol->optimal);
}

TEST(ShardingIlpTest, MemoryBudgetPicksTheSlowerShardedLayout) {
  // Strategy 0 replicates 8 bytes and is fast; strategy 1 shards to 2 and
  // is slower. Two such parameters fit a budget of 10 only if one shards.
  IlpRequest r;
  r.nodes = {{{1.0, 1.5}, {8, 2}}, {{1.0, 1.2}, {8, 2}}};
  r.memoryBudgetBytes = 10;
  auto sol = solveShardingIlp(r);
  ASSERT_TRUE(static_cast<bool>(sol)) << llvm::toString(sol.takeError());
  EXPECT_EQ(sol->choice, (std::vector<unsigned>{0, 1}));
  EXPECT_DOUBLE_EQ(sol->memoryBytes, 10);
}

TEST(ShardingIlpTest, TheBudgetHoldsOnEachDevice) {
  // The two parameters of the test above on two pipeline devices: each
  // holds its own 8 bytes, so both stay replicated.
  IlpRequest r;
  r.nodes = {{{1.0, 1.5}, {8, 2}}, {{1.0, 1.2}, {8, 2}}};
  r.nodes[1].device = 1;
  r.memoryBudgetBytes = 10;
  auto sol = solveShardingIlp(r);
  ASSERT_TRUE(static_cast<bool>(sol)) << llvm::toString(sol.takeError());
  EXPECT_EQ(sol->choice, (std::vector<unsigned>{0, 0}));
  EXPECT_DOUBLE_EQ(sol->memoryBytes, 8);
  // One layer's node on each device, grouped: the group's strategy must
  // fit on both; with a third node on device 1 only sharding fits there.
  r.nodes.push_back({{1.0, 1.0}, {8, 8}});
  r.nodes[2].device = 1;
  r.nodes[0].group = r.nodes[1].group = 0;
  sol = solveShardingIlp(r);
  ASSERT_TRUE(static_cast<bool>(sol)) << llvm::toString(sol.takeError());
  EXPECT_EQ(sol->choice[0], 1u);
  EXPECT_EQ(sol->choice[1], 1u);
  EXPECT_DOUBLE_EQ(sol->memoryBytes, 10);
}

TEST(ShardingIlpTest, RefusesWhatCannotFit) {
  IlpRequest r;
  r.nodes = {{{1.0, 1.5}, {8, 4}}, {{1.0}, {8}}};
  r.memoryBudgetBytes = 10;
  auto sol = solveShardingIlp(r);
  ASSERT_FALSE(static_cast<bool>(sol));
  // A memory error, which loomc reports with its own exit code.
  bool noFit = false;
  EXPECT_NE(takeMessage(sol.takeError(), noFit).find("budget"),
            std::string::npos);
  EXPECT_TRUE(noFit);
}

TEST(ShardingIlpTest, LeastMemoryWhenNothingFits) {
  // Nothing fits 4 bytes: asked to, the fastest choice of the least memory
  // (both sharded: 2 + 2 on device 0; device 1's 3 bytes are fixed) instead
  // of an error; ties in memory go to the faster strategy.
  IlpRequest r;
  r.nodes = {{{1.0, 1.5, 2.0}, {8, 2, 2}}, {{1.0, 1.2}, {8, 2}},
             {{1.0}, {3}}};
  r.nodes[2].device = 1;
  r.memoryBudgetBytes = 3.5;
  auto refused = solveShardingIlp(r);
  ASSERT_FALSE(static_cast<bool>(refused));
  llvm::consumeError(refused.takeError());
  r.leastMemoryOverBudget = true;
  auto sol = solveShardingIlp(r);
  ASSERT_TRUE(static_cast<bool>(sol)) << llvm::toString(sol.takeError());
  EXPECT_EQ(sol->choice, (std::vector<unsigned>{1, 1, 0}));
  EXPECT_DOUBLE_EQ(sol->memoryBytes, 4);
  EXPECT_TRUE(sol->overBudget);
}

TEST(ShardingIlpTest, ForbiddenPairsAreNeverChosen) {
  // A returned parameter must keep its argument's layout: every pair but
  // the diagonal is forbidden, however cheap.
  IlpRequest r;
  r.nodes = {{{0.0, 0.0, 0.0}, {}}, {{3.0, 1.0, 2.0}, {}}};
  r.edges = {{0, 1,
              {0, kForbidden, kForbidden, kForbidden, 5, kForbidden,
               kForbidden, kForbidden, 0}}};
  auto sol = solveShardingIlp(r);
  ASSERT_TRUE(static_cast<bool>(sol)) << llvm::toString(sol.takeError());
  EXPECT_EQ(sol->choice, (std::vector<unsigned>{2, 2}));
}

TEST(ShardingIlpTest, UsesOfOneValuePayEachReshardingOnce) {
  // A producer that may split (strategy 1, cheaper) or not; three users
  // that need it whole. Gathering the split value costs 2, once for all
  // three users: splitting wins (1 + 2 < 4), which it would not if each
  // use paid its own gather (1 + 6 > 4).
  IlpRequest r;
  r.nodes = {{{4.0, 1.0}, {}}, {{0.0}, {}}, {{0.0}, {}}, {{0.0}, {}}};
  for (unsigned user = 1; user <= 3; ++user) {
    IlpEdge edge{0, user, {0.0, 2.0}};
    edge.value = 0;
    edge.fromLayout = {-1, 0};
    edge.toLayout = {-1};
    r.edges.push_back(edge);
  }
  auto sol = solveShardingIlp(r);
  ASSERT_TRUE(static_cast<bool>(sol)) << llvm::toString(sol.takeError());
  EXPECT_EQ(sol->choice[0], 1u);
  EXPECT_DOUBLE_EQ(sol->seconds, 3.0);
  for (IlpEdge &edge : r.edges)
    edge.value = -1;
  sol = solveShardingIlp(r);
  ASSERT_TRUE(static_cast<bool>(sol)) << llvm::toString(sol.takeError());
  EXPECT_EQ(sol->choice[0], 0u);
  EXPECT_DOUBLE_EQ(sol->seconds, 4.0);
}

TEST(ShardingIlpTest, MatchesBruteForceOnRandomRequests) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 10);
  for (int trial = 0; trial < 40; ++trial) {
    IlpRequest r;
    size_t n = 2 + trial % 5;
    for (size_t i = 0; i < n; ++i) {
      IlpNode node;
      size_t k = 1 + (trial + i) % 3;
      for (size_t s = 0; s < k; ++s) {
        node.cost.push_back(u(rng));
        node.memory.push_back(std::floor(u(rng)));
      }
      r.nodes.push_back(node);
    }
    for (size_t e = 0; e + 1 < 2 * n; ++e) {
      IlpEdge edge;
      edge.from = rng() % n;
      edge.to = rng() % n;
      if (edge.from == edge.to)
        continue;
      size_t cells = r.nodes[edge.from].cost.size() * r.nodes[edge.to].cost.size();
      for (size_t c = 0; c < cells; ++c)
        edge.cost.push_back(u(rng) < 1 ? kForbidden : u(rng));
      r.edges.push_back(edge);
    }
    // Values read by several users: each pair of layouts costs the same
    // on every use, and once.
    for (unsigned v = 0; v < 2; ++v) {
      unsigned from = rng() % n;
      size_t fromCount = r.nodes[from].cost.size();
      std::vector<int> fromLayout;
      for (size_t i = 0; i < fromCount; ++i)
        fromLayout.push_back(rng() % 3);
      double pair[3][3];
      for (auto &row : pair)
        for (double &c : row)
          c = u(rng) < 1 ? kForbidden : u(rng);
      for (unsigned use = 0; use < 3; ++use) {
        IlpEdge edge;
        edge.from = from;
        edge.to = rng() % n;
        if (edge.to == from)
          continue;
        edge.value = v;
        edge.fromLayout = fromLayout;
        for (size_t j = 0; j < r.nodes[edge.to].cost.size(); ++j)
          edge.toLayout.push_back(rng() % 3);
        for (int a : edge.fromLayout)
          for (int b : edge.toLayout)
            edge.cost.push_back(pair[a][b]);
        r.edges.push_back(edge);
      }
    }
    // Odd trials: nodes with as many strategies form groups (identical
    // layers), including edges within a group.
    if (trial % 2)
      for (size_t i = 0; i < n; ++i)
        r.nodes[i].group = static_cast<int>(r.nodes[i].cost.size()) +
                           10 * static_cast<int>(rng() % 2);
    // Every third trial: the nodes on two devices (pipeline stages), a
    // group's members on either.
    if (trial % 3 == 0)
      for (IlpNode &node : r.nodes)
        node.device = static_cast<int>(rng() % 2);
    r.memoryBudgetBytes = 4.0 * n;
    std::vector<unsigned> best;
    double expected = bruteForce(r, best);
    auto sol = solveShardingIlp(r);
    if (expected == kForbidden) {
      EXPECT_FALSE(static_cast<bool>(sol)) << "trial " << trial;
      if (!sol)
        llvm::consumeError(sol.takeError());
      continue;
    }
    ASSERT_TRUE(static_cast<bool>(sol))
        << "trial " << trial << ": " << llvm::toString(sol.takeError());
    EXPECT_NEAR(sol->seconds, expected, 1e-5) << "trial " << trial;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j)
        if (r.nodes[i].group >= 0 && r.nodes[i].group == r.nodes[j].group)
          EXPECT_EQ(sol->choice[i], sol->choice[j]) << "trial " << trial;
    EXPECT_LE(sol->memoryBytes, r.memoryBudgetBytes) << "trial " << trial;
  }
}

} // namespace
