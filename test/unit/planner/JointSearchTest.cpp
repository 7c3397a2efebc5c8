//===- JointSearchTest.cpp - Model specs, candidate costs, the search -----===//

#include "passes/planner/JointSearch.h"
#include "passes/planner/ModelSpec.h"
#include "passes/planner/StagePartition.h"

#include "gtest/gtest.h"

#include <limits>
#include <optional>

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
  r.model = modelCostOf(spec(model), r.setup.precision);
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

TEST(ModelSpec, CostTableCountsWhatTheShapeDoes) {
  // GPT-2 small: 12 alike layers between the embedding and the tied head.
  GptSpec g = spec("gpt:l=12,h=768,a=12,s=1024,v=50257");
  ModelCost m = modelCostOf(g, Precision::Bf16);
  EXPECT_EQ(m.name, g.text);
  EXPECT_EQ(m.family, "gpt");
  ASSERT_EQ(m.numLayers(), 12);
  EXPECT_TRUE(m.uniformLayers());
  EXPECT_EQ(m.layers[3].name, "layer.3");
  EXPECT_EQ(m.parameters, g.parameters());
  double parameters = m.first.parameters() + m.last.parameters();
  for (const PartCost &layer : m.layers)
    parameters += layer.parameters();
  EXPECT_EQ(int64_t(parameters), g.parameters());
  EXPECT_EQ(m.layers[0].wholeParameters, double(g.layerNormParameters()));
  EXPECT_EQ(m.tiedParameters, 50257.0 * 768);
  // The products' FLOPs and attention's (not halved, as Megatron counts
  // model FLOPs) give the shape's forward FLOPs.
  auto flops = [](const PartCost &part) {
    double f = 2 * part.attentionFlops;
    for (const ProductCost &p : part.products)
      f += 2 * p.rows * p.columns * p.inner;
    return f;
  };
  double forward = flops(m.first) + flops(m.last);
  for (const PartCost &layer : m.layers)
    forward += flops(layer);
  EXPECT_DOUBLE_EQ(forward, g.forwardFlopsPerSequence());
  EXPECT_DOUBLE_EQ(m.modelFlopsPerSample, 3 * forward);
  // Korthikanti's 34 sbh bytes a layer in bf16 (16h elements a token, and
  // the softmax statistics), selective 10h.
  double s = 1024, h = 768;
  EXPECT_DOUBLE_EQ(m.layers[0].kept[size_t(Remat::None)].bytes,
                   g.keptElementsPerToken("none") * s * 2);
  EXPECT_DOUBLE_EQ(m.layers[0].kept[size_t(Remat::Selective)].bytes,
                   (10 * h + 24) * s * 2);
  EXPECT_DOUBLE_EQ(m.layers[0].kept[size_t(Remat::Full)].bytes, h * s * 2);
  EXPECT_EQ(m.tpDivides, (std::vector<int64_t>{12, 12, 3072}));

  // LLaMA's head is its own.
  GptSpec llama =
      spec("gpt:arch=llama,l=32,h=4096,a=32,s=2048,v=32000,ffn=11008");
  ModelCost ml = modelCostOf(llama, Precision::Fp32);
  EXPECT_EQ(ml.family, "llama");
  EXPECT_EQ(ml.tiedParameters, 0);
  EXPECT_EQ(ml.last.splitParameters, 32000.0 * 4096);
  EXPECT_EQ(ml.layers[0].boundaryBytes, 2048.0 * 4096 * 4);
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
    CandidatePrediction p = predictCandidate(r.model, r.cluster, r.setup, c);
    if (p.fits && (optimum == 0 || p.stepSeconds < optimum))
      optimum = p.stepSeconds;
  }
  ASSERT_GT(optimum, 0);
  EXPECT_LE(found->best.prediction.stepSeconds, optimum * 1.02);
  EXPECT_TRUE(found->best.prediction.fits);
}

/// Costs every valid choice of `r` and keeps the search's winner: the
/// fastest that fits, then the smaller, then the first.
RankedPlan exhaustiveBest(const SearchRequest &r) {
  std::optional<RankedPlan> best;
  for (const PlanChoice &c : enumerateChoices(r)) {
    RankedPlan p{c, predictCandidate(r.model, r.cluster, r.setup, c)};
    if (!p.prediction.fits)
      continue;
    if (!best || p.prediction.stepSeconds < best->prediction.stepSeconds ||
        (p.prediction.stepSeconds == best->prediction.stepSeconds &&
         p.prediction.memory.total() < best->prediction.memory.total()))
      best = p;
  }
  EXPECT_TRUE(best.has_value());
  return best.value_or(RankedPlan{});
}

/// A convolutional network's table as an importer would give it: 8 layers
/// each costlier than the one before (fewer pixels, more channels, wider
/// filters), a stem first and a classifier last, nothing alike.
ModelCost risingLayers() {
  ModelCost m;
  m.name = "rising.onnx";
  m.family = "onnx";
  double act = 2;
  for (int64_t i = 0; i < 8; ++i) {
    double channels = 32 * double(i + 1), pixels = 4096 / double(1 + i / 2);
    PartCost layer;
    layer.name = "layer." + std::to_string(i);
    layer.products = {{pixels, channels, 9 * channels, TpSplit::Columns},
                      {pixels, channels, 9 * channels, TpSplit::Inner}};
    layer.forwardBytes = 6 * pixels * channels * act;
    layer.backwardBytes = 2 * layer.forwardBytes;
    layer.selectiveBytes = 2 * pixels * channels * act;
    layer.splitParameters = 2 * 9 * channels * channels;
    layer.wholeParameters = 2 * channels;
    layer.largestWeight = 9 * channels * channels;
    double out = pixels * channels * act;
    layer.tpCollectives = {
        {CollectiveKind::AllReduce, out, TpPhase::Forward, 1},
        {CollectiveKind::AllReduce, out, TpPhase::Backward, 1},
        {CollectiveKind::AllReduce, out, TpPhase::FullRecompute, 1}};
    double kept = 4 * pixels * channels * act;
    layer.kept[size_t(Remat::None)] = {kept, kept / 2, kept};
    layer.kept[size_t(Remat::Selective)] = {kept / 2, kept / 4, kept / 2};
    layer.kept[size_t(Remat::Full)] = {kept / 4, kept / 4, kept / 4};
    layer.boundaryBytes = pixels * channels * act;
    m.layers.push_back(layer);
  }
  m.first.name = "stem";
  m.first.products = {{4096, 32, 27, TpSplit::None}};
  m.first.forwardBytes = 4 * 4096 * 32 * act;
  m.first.splitParameters = 27 * 32;
  m.first.kept.fill({4096 * 32 * act, 4096 * 32 * act, 4096 * 32 * act});
  m.last.name = "classifier";
  m.last.products = {{1, 1000, 256, TpSplit::None}};
  m.last.wholeParameters = 256 * 1000;
  m.last.transientBytes = 1000 * 4;
  m.tpDivides = {32};
  m.maxTp = 32;
  double parameters = m.first.parameters() + m.last.parameters();
  double forward = 2 * 4096 * 32 * 27 + 2 * 1000 * 256;
  for (const PartCost &layer : m.layers) {
    parameters += layer.parameters();
    for (const ProductCost &p : layer.products)
      forward += 2 * p.rows * p.columns * p.inner;
  }
  m.parameters = int64_t(parameters);
  m.modelFlopsPerSample = 3 * forward;
  return m;
}

TEST(JointSearch, CostsLayersThatDifferAsExhaustively) {
  ModelCost m = risingLayers();
  ASSERT_FALSE(m.uniformLayers());
  for (llvm::StringRef where : {"cpu:4", "a100-80g:1x8"}) {
    SearchRequest r;
    r.model = m;
    r.cluster = cluster(where);
    r.setup.globalBatch = 32;
    r.timeBudgetSeconds = 1e9;
    llvm::Expected<SearchResult> found = searchPlan(r);
    ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
    RankedPlan best = exhaustiveBest(r);
    EXPECT_EQ(found->best.choice.text(), best.choice.text()) << where.str();
    EXPECT_EQ(found->best.prediction.stepSeconds, best.prediction.stepSeconds);
    // Each layer is costed from its own row: the same model with every
    // layer as cheap as the first computes for less on every choice.
    ModelCost flat = m;
    for (PartCost &layer : flat.layers)
      layer = m.layers.front();
    bool piped = false;
    for (const PlanChoice &c : enumerateChoices(r)) {
      CandidatePrediction p = predictCandidate(m, r.cluster, r.setup, c);
      CandidatePrediction q = predictCandidate(flat, r.cluster, r.setup, c);
      EXPECT_GT(p.time.compute, q.time.compute) << c.text();
      EXPECT_GT(p.memory.total(), q.memory.total()) << c.text();
      piped |= c.pp > 1;
    }
    EXPECT_TRUE(piped) << where.str();
  }
}

TEST(JointSearch, LayersMarkedUniqueCostAsAlikeOnes) {
  // The same GPT costed through the path of layers that differ: without
  // a stage split to choose (one stage, or interleaved chunks) every
  // figure agrees with the alike layers' to rounding.
  SearchRequest r =
      request("gpt:l=8,h=1024,a=16,s=1024,v=32000", "a100-80g:1x8", 64);
  ModelCost unique = r.model;
  for (PartCost &layer : unique.layers)
    layer.kind = -1;
  ASSERT_FALSE(unique.uniformLayers());
  int64_t compared = 0;
  for (const PlanChoice &c : enumerateChoices(r)) {
    if (c.pp > 1 && c.chunks == 1)
      continue;
    CandidatePrediction a = predictCandidate(r.model, r.cluster, r.setup, c);
    CandidatePrediction b = predictCandidate(unique, r.cluster, r.setup, c);
    EXPECT_NEAR(a.stepSeconds, b.stepSeconds, 1e-9 * a.stepSeconds) << c.text();
    EXPECT_NEAR(double(a.memory.total()), double(b.memory.total()),
                1e-9 * double(a.memory.total()) + 8)
        << c.text();
    ++compared;
  }
  EXPECT_GT(compared, 100);
}

/// The least slowest stage over every split of `seconds` into `stages`
/// non-empty contiguous runs.
double bruteForceSlowest(const std::vector<double> &seconds, size_t from,
                         int64_t stages) {
  if (stages == 1) {
    double sum = 0;
    for (size_t j = from; j < seconds.size(); ++j)
      sum += seconds[j];
    return sum;
  }
  double best = std::numeric_limits<double>::infinity(), sum = 0;
  for (size_t end = from; end + stages <= seconds.size(); ++end) {
    sum += seconds[end];
    best = std::min(
        best, std::max(sum, bruteForceSlowest(seconds, end + 1, stages - 1)));
  }
  return best;
}

TEST(StagePartition, SplitByTimeIsAsFastAsEverySplit) {
  // Rising layers (the first and last with their ends' seconds glued on)
  // and a deterministic spread of others, every stage count.
  std::vector<std::vector<double>> cases = {
      {5, 2, 3, 4, 5, 6, 7, 12},
      {1, 1, 1, 1, 1, 1, 1, 1},
      {9, 1, 1, 1, 1, 9},
      {0.5, 8, 0.25, 0.25, 3, 3},
      {7},
      {1e-3, 2e-3, 4e-3, 1e-3, 0, 3e-3, 5e-3}};
  uint64_t x = 12345;
  for (int n = 0; n < 40; ++n) {
    std::vector<double> seconds(1 + n % 9);
    for (double &s : seconds) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      s = double(x >> 40) / double(1 << 24);
    }
    cases.push_back(seconds);
  }
  for (const std::vector<double> &seconds : cases)
    for (int64_t p = 1; p <= int64_t(seconds.size()); ++p) {
      std::vector<int64_t> counts = splitLayersByTime(seconds, p);
      ASSERT_EQ(int64_t(counts.size()), p);
      size_t j = 0;
      double slowest = 0;
      for (int64_t n : counts) {
        EXPECT_GE(n, 1);
        double sum = 0;
        for (int64_t k = 0; k < n && j < seconds.size(); ++k)
          sum += seconds[j++];
        slowest = std::max(slowest, sum);
      }
      EXPECT_EQ(j, seconds.size());
      double best = bruteForceSlowest(seconds, 0, p);
      EXPECT_LE(slowest, best * (1 + 1e-9) + 1e-300) << "p=" << p;
    }
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
