//===- JointSearchTest.cpp - Model specs, candidate costs, the search -----===//

#include "passes/planner/JointSearch.h"

#include "gtest/gtest.h"

using namespace mlir::loom;
using namespace mlir::loom::planner;

namespace {

GptSpec spec(llvm::StringRef text) {
  llvm::Expected<GptSpec> s = parseModelSpec(text);
  EXPECT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
  return *s;
}

Cluster cluster(llvm::StringRef text) {
  llvm::Expected<Cluster> c = parseCluster(text);
  EXPECT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  return *c;
}

SearchRequest request(llvm::StringRef model, llvm::StringRef where,
                      int64_t batch) {
  SearchRequest r;
  r.spec = spec(model);
  r.cluster = cluster(where);
  r.setup.globalBatch = batch;
  r.timeBudgetSeconds = 1e9; // the tests compare complete searches
  return r;
}

constexpr const char *kGpt3 = "gpt:l=96,h=12288,a=96,s=2048,v=51200";

TEST(ModelSpec, CountsGpt3AndLlamaParametersExactly) {
  GptSpec gpt3 = spec(kGpt3);
  int64_t l = 96, h = 12288, s = 2048, v = 51200;
  // 12h^2 + 13h a layer, token and position tables, the final norm; the
  // head is tied.
  EXPECT_EQ(gpt3.parameters(), l * (12 * h * h + 13 * h) + v * h + s * h + 2 * h);
  // LLaMA-7B as published: 6,738,415,616 parameters.
  GptSpec llama =
      spec("gpt:arch=llama,l=32,h=4096,a=32,s=2048,v=32000,ffn=11008");
  EXPECT_EQ(llama.parameters(), 6738415616);
  // LLaMA's default MLP width: 8h/3 rounded up to 256.
  EXPECT_EQ(spec("gpt:arch=llama,l=2,h=4096,a=32,s=8,v=8").ffn, 11008);
  EXPECT_EQ(spec("gpt:l=2,h=64,a=4,s=8,v=8").kvHeads, 4);
}

TEST(ModelSpec, KeepsKorthikantisActivationsForAGpt2Layer) {
  // Per token, before tp: 16h elements (32 sbh bytes in bf16), selective
  // 10h (20 sbh), full the input (2 sbh), plus a float of softmax
  // statistics per head (docs/planner.md, "Recomputation").
  GptSpec g = spec("gpt:l=12,h=768,a=12,s=1024,v=50257");
  EXPECT_DOUBLE_EQ(g.keptElementsPerToken("none"), 16 * 768 + 2 * 12);
  EXPECT_DOUBLE_EQ(g.keptElementsPerToken("selective"), 10 * 768 + 2 * 12);
  EXPECT_DOUBLE_EQ(g.keptElementsPerToken("full"), 768);
}

TEST(ModelSpec, RefusesBadSpecsInOneLine) {
  for (const char *bad :
       {"bert:l=1,h=8,a=2,s=4,v=8", "gpt:l=1,h=8,a=3,s=4,v=8",
        "gpt:l=1,h=8,a=2,s=4", "gpt:l=0,h=8,a=2,s=4,v=8",
        "gpt:l=1,h=8,a=2,s=4,v=8,x=1", "gpt:l=1,h=8,a=2,s=4,v=8,arch=bert",
        "gpt:l=1,h=8,a=4,kv_heads=3,s=4,v=8", "gpt:l=1,h=99999999,a=1,s=4,v=8",
        "gpt"}) {
    llvm::Expected<GptSpec> s = parseModelSpec(bad);
    ASSERT_FALSE(static_cast<bool>(s)) << bad;
    std::string message = llvm::toString(s.takeError());
    EXPECT_NE(message.find("bad --model-spec"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(CostModel, GemmEfficiencyGrowsWithTheShapeAndStaysBelowItsMax) {
  Cluster a100 = cluster("a100-80g:1x8");
  auto tflops = [&](double m, double n, double k) {
    return 2 * m * n * k / gemmSeconds(m, n, k, Precision::Bf16, a100) / 1e12;
  };
  EXPECT_LT(tflops(128, 128, 128), tflops(1024, 1024, 1024));
  EXPECT_LT(tflops(1024, 1024, 1024), tflops(8192, 8192, 8192));
  EXPECT_LT(tflops(8192, 8192, 8192), 0.8 * 312);
  EXPECT_GT(tflops(8192, 8192, 8192), 0.75 * 312);
}

TEST(PlanChoice, ParsesPinsAndRefusesBadOnes) {
  llvm::Expected<ChoicePins> pins =
      parseChoicePins("tp=8,pp=16,schedule=interleaved,virtual=2,remat=auto");
  ASSERT_TRUE(static_cast<bool>(pins));
  EXPECT_EQ(*pins->tp, 8);
  EXPECT_EQ(*pins->chunks, 2);
  EXPECT_FALSE(pins->dp.has_value());
  for (const char *bad : {"tp=0", "zero=4", "remat=some", "schedule=x",
                          "dpp=2", "micro=-1"}) {
    llvm::Expected<ChoicePins> p = parseChoicePins(bad);
    EXPECT_FALSE(static_cast<bool>(p)) << bad;
    llvm::consumeError(p.takeError());
  }
}

/// The search's plan against costing every valid choice.
void expectExhaustiveOptimum(const SearchRequest &r) {
  llvm::Expected<SearchResult> found = searchPlan(r);
  ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  double optimum = 0;
  for (const PlanChoice &c : enumerateChoices(r)) {
    CandidatePrediction p = predictCandidate(r.spec, r.cluster, r.setup, c);
    if (p.fits && (optimum == 0 || p.stepSeconds < optimum))
      optimum = p.stepSeconds;
  }
  ASSERT_GT(optimum, 0);
  EXPECT_LE(found->best.prediction.stepSeconds, optimum * 1.02);
  EXPECT_TRUE(found->best.prediction.fits);
}

TEST(JointSearch, FindsTheExhaustiveOptimumOnSmallCases) {
  // Roomy, and tight enough that ZeRO and recomputation must be used.
  expectExhaustiveOptimum(
      request("gpt:l=8,h=1024,a=16,s=1024,v=32000", "a100-80g:2x4", 64));
  SearchRequest tight =
      request("gpt:l=24,h=4096,a=32,s=2048,v=51200", "a100-80g:1x8", 64);
  expectExhaustiveOptimum(tight);
  expectExhaustiveOptimum(request(
      "gpt:arch=llama,l=16,h=2048,a=16,kv_heads=4,s=2048,v=32000",
      "h100:2x8", 128));
  tight.cluster.memoryGiB = 24;
  expectExhaustiveOptimum(tight);
}

TEST(JointSearch, Gpt3On1024A100sFitsAndExplainsItself) {
  SearchRequest r = request(kGpt3, "a100-80g:128x8", 1536);
  llvm::Expected<SearchResult> found = searchPlan(r);
  ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  const RankedPlan &best = found->best;
  EXPECT_TRUE(found->complete);
  EXPECT_LE(double(best.prediction.memory.total()),
            r.cluster.usableMemoryBytes());
  // 175B parameters cannot be replicated: the model is split over tp and
  // pp beyond a node, or its shards gathered by ZeRO-3 (prefetched behind
  // the compute).
  EXPECT_TRUE(best.choice.tp * best.choice.pp > 8 || best.choice.zero == 3)
      << best.choice.text();
  EXPECT_GT(best.prediction.mfu, 0.2);
  EXPECT_LT(best.prediction.mfu, 0.8);
  EXPECT_EQ(found->reasons.size(), 5u);
  ASSERT_FALSE(found->alternatives.empty());
  EXPECT_EQ(found->alternatives.front().choice.text(), best.choice.text());
  // Deterministic.
  llvm::Expected<SearchResult> again = searchPlan(r);
  ASSERT_TRUE(static_cast<bool>(again));
  EXPECT_EQ(again->best.choice.text(), best.choice.text());
}

TEST(JointSearch, HonoursPins) {
  SearchRequest r = request(kGpt3, "a100-80g:128x8", 1536);
  r.pins = *parseChoicePins("tp=8,pp=16,remat=full,schedule=1f1b");
  llvm::Expected<SearchResult> found = searchPlan(r);
  ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  EXPECT_EQ(found->best.choice.tp, 8);
  EXPECT_EQ(found->best.choice.pp, 16);
  EXPECT_EQ(found->best.choice.dp, 8);
  EXPECT_EQ(found->best.choice.remat, Remat::Full);
  EXPECT_EQ(found->best.choice.schedule, ScheduleKind::OneFOneB);
}

TEST(JointSearch, MemoryPicksZeroOrRecomputationAndSaysWhy) {
  // 24 layers of h=4096 (4.9B parameters) on 8 devices of 40 GiB.
  SearchRequest r =
      request("gpt:l=24,h=4096,a=32,s=2048,v=51200", "a100-80g:1x8", 64);
  r.cluster.memoryGiB = 40;
  llvm::Expected<SearchResult> found = searchPlan(r);
  ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  EXPECT_EQ(found->binding.rfind("memory:", 0), 0u) << found->binding;
  bool saysNeeds = false;
  for (const ChoiceReason &reason : found->reasons)
    saysNeeds |= reason.text.find("needs") != std::string::npos;
  EXPECT_TRUE(saysNeeds);
}

TEST(JointSearch, RefusesWhatFitsNowhereAndNamesTheSmallestCluster) {
  SearchRequest r = request(kGpt3, "a100-80g:1x8", 64);
  llvm::Expected<SearchResult> found = searchPlan(r);
  ASSERT_FALSE(static_cast<bool>(found));
  std::string message = llvm::toString(found.takeError());
  EXPECT_EQ(message.find('\n'), std::string::npos);
  size_t at = message.find("smallest such cluster that fits is a100-80g:");
  ASSERT_NE(at, std::string::npos) << message;
  int64_t nodes = std::stoll(message.substr(at + 44));
  // That many nodes fit; one fewer does not.
  r.cluster.nodes = nodes;
  EXPECT_TRUE(static_cast<bool>(searchPlan(r)));
  r.cluster.nodes = nodes - 1;
  llvm::Expected<SearchResult> fewer = searchPlan(r);
  EXPECT_FALSE(static_cast<bool>(fewer));
  if (!fewer)
    llvm::consumeError(fewer.takeError());
}

TEST(JointSearch, RefusesABatchNoMeshCanSplit) {
  SearchRequest r = request("gpt:l=4,h=64,a=4,s=8,v=64", "cpu:4", 8);
  r.pins = *parseChoicePins("dp=3");
  llvm::Expected<SearchResult> found = searchPlan(r);
  ASSERT_FALSE(static_cast<bool>(found));
  EXPECT_NE(llvm::toString(found.takeError()).find("is valid"),
            std::string::npos);
}

} // namespace
