//===- DriverTest.cpp - loom-run options, metrics and a 1-rank run ----------===//

#include "TestPlans.h"
#include "runtime/Metrics.h"
#include "runtime/Plan.h"
#include "runtime/data/Npy.h"
#include "runtime/driver/Driver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

StatusOr<RunOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "loom-run");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return parseOptions(argv.size(), argv.data());
}

TEST(OptionsTest, Training) {
  auto o = parse({"p.loomplan", "--data", "x=x.npy", "--data=target=t.npy",
                  "--steps", "5", "--metrics=m.jsonl", "--quiet",
                  "--log-every", "10"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->planPath, "p.loomplan");
  ASSERT_EQ(o->data.size(), 2u);
  EXPECT_EQ(o->data[1].first, "target");
  EXPECT_EQ(o->data[1].second, "t.npy");
  EXPECT_EQ(o->steps, 5);
  EXPECT_EQ(o->metricsPath, "m.jsonl");
  EXPECT_TRUE(o->quiet);
  EXPECT_EQ(o->logEvery, 10);
  EXPECT_FALSE(o->checkNumerics);
  EXPECT_TRUE(parse({"p", "--steps", "1", "--check-numerics"})->checkNumerics);
}

TEST(OptionsTest, Init) {
  auto dflt = parse({"p", "--steps", "1"});
  ASSERT_TRUE(dflt.isOk());
  EXPECT_FALSE(dflt->init.random);
  auto seeded = parse({"p", "--steps", "1", "--init", "random:7"});
  ASSERT_TRUE(seeded.isOk()) << seeded.status().message();
  EXPECT_TRUE(seeded->init.random);
  EXPECT_EQ(seeded->init.seed, 7u);
  // Without its own SEED, --init random takes --seed; its own SEED wins.
  auto fromSeed = parse({"p", "--steps", "1", "--init=random", "--seed", "3"});
  ASSERT_TRUE(fromSeed.isOk());
  EXPECT_TRUE(fromSeed->init.random);
  EXPECT_EQ(fromSeed->init.seed, 3u);
  auto both = parse({"p", "--seed", "3", "--init", "random:9", "--steps", "1"});
  ASSERT_TRUE(both.isOk());
  EXPECT_EQ(both->init.seed, 9u);
  auto onnx = parse({"p", "--steps", "1", "--init", "onnx"});
  ASSERT_TRUE(onnx.isOk());
  EXPECT_FALSE(onnx->init.random);
}

TEST(OptionsTest, DataOrderAndTokens) {
  // A seed shuffles the data unless the order says otherwise.
  EXPECT_FALSE(parse({"p", "--steps", "1"})->shuffle);
  EXPECT_TRUE(parse({"p", "--steps", "1", "--seed", "7"})->shuffle);
  EXPECT_FALSE(parse({"p", "--steps", "1", "--seed", "7", "--order", "sequential"})->shuffle);
  EXPECT_TRUE(parse({"p", "--steps", "1", "--order=shuffled"})->shuffle);
  auto tokens = parse({"p", "--steps", "1", "--tokens", "t.bin", "--tokens-dtype", "uint32"});
  ASSERT_TRUE(tokens.isOk()) << tokens.status().message();
  EXPECT_EQ(tokens->tokens, "t.bin");
  EXPECT_EQ(tokens->tokensDtype, "uint32");
  EXPECT_EQ(parse({"p", "--steps", "1", "--tokens", "t.bin"})->tokensDtype, "uint16");
  auto valid = parse({"p", "--steps", "1", "--valid-data", "x=v.npy", "--eval-every", "5",
                      "--eval-batches", "2"});
  ASSERT_TRUE(valid.isOk()) << valid.status().message();
  EXPECT_EQ(valid->validData.size(), 1u);
  EXPECT_EQ(valid->evalEvery, 5);
  EXPECT_EQ(valid->evalBatches, 2);
  for (auto [args, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"p", "--steps", "1", "--order", "random"},
            "--order must be sequential or shuffled, got 'random'"},
           {{"p", "--steps", "1", "--tokens", "t", "--tokens-dtype", "int8"},
            "--tokens-dtype must be uint16 or uint32, got 'int8'"},
           {{"p", "--steps", "1", "--tokens-dtype", "uint16"},
            "--tokens-dtype applies to --tokens FILE"},
           {{"p", "--steps", "1", "--tokens", "t", "--data", "target=y.npy"},
            "--tokens gives the target"},
           {{"--forward", "m.onnx", "--tokens", "t", "--output-dir", "o"},
            "--forward takes --input, --output-dir and --precision only"},
           {{"p", "--steps", "1", "--valid-tokens", "v"},
            "validation data needs --eval-every N"},
           {{"p", "--steps", "1", "--eval-batches", "2"},
            "--eval-every and --eval-batches need validation data"},
           {{"p", "--steps", "1", "--valid-tokens", "v", "--valid-data", "x=x.npy",
             "--eval-every", "1"},
            "--valid-data and --valid-tokens both give validation data"},
           {{"p", "--steps", "1", "--valid-tokens", "v", "--eval-every", "0"},
            "--eval-every must be at least 1, got 0"}}) {
    auto o = parse(args);
    ASSERT_FALSE(o.isOk()) << want;
    EXPECT_NE(o.status().message().find(want), std::string::npos) << o.status().message();
  }
}

TEST(OptionsTest, Forward) {
  auto o = parse({"--forward", "m.onnx", "--input", "x=x.npy", "--output-dir", "out"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_TRUE(o->forward);
  EXPECT_EQ(o->planPath, "m.onnx");
  EXPECT_EQ(o->outputDir, "out");
  EXPECT_EQ(o->precision, "");
  o = parse({"--forward", "m.onnx", "--input", "x=x.npy", "--output-dir", "out",
             "--precision", "bf16"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->precision, "bf16");
}

TEST(OptionsTest, Collectives) {
  auto dflt = parse({"p", "--steps", "1", "--device", "cuda"});
  ASSERT_TRUE(dflt.isOk()) << dflt.status().message();
  EXPECT_EQ(dflt->collectives, CollectivesMode::Auto);
  auto host =
      parse({"p", "--steps", "1", "--device", "cuda", "--collectives", "host"});
  ASSERT_TRUE(host.isOk()) << host.status().message();
  EXPECT_EQ(host->collectives, CollectivesMode::Host);
  auto nccl =
      parse({"p", "--steps", "1", "--device=cuda", "--collectives=nccl"});
  ASSERT_TRUE(nccl.isOk()) << nccl.status().message();
  EXPECT_EQ(nccl->collectives, CollectivesMode::Nccl);
  // auto is accepted on the cpu too, so one command line serves both.
  EXPECT_TRUE(parse({"p", "--steps", "1", "--collectives", "auto"}).isOk());
}

TEST(OptionsTest, Errors) {
  struct Case {
    std::vector<std::string> args;
    const char *text;
  } cases[] = {
      {{"p", "--data", "x=x.npy"}, "missing --steps"},
      {{"p", "--steps", "0"}, "--steps must be at least 1"},
      {{"p", "--steps", "two"}, "--steps expects an integer, got 'two'"},
      {{"p", "--steps", "1", "--data", "x"}, "--data expects NAME=FILE.npy"},
      {{"p", "--steps", "1", "--data", "x=a", "--data", "x=b"}, "given twice"},
      {{"p", "--steps", "1", "--bogus"}, "unknown option '--bogus'"},
      {{"p", "--steps", "1", "--log-every", "0"},
       "--log-every must be at least 1"},
      {{"--steps", "1"}, "no plan given"},
      {{"p", "q", "--steps", "1"}, "unexpected argument 'q'"},
      {{"p", "--steps"}, "--steps needs a value"},
      {{"--forward", "m.onnx", "--input", "x=x.npy"}, "needs --output-dir"},
      {{"p", "--steps", "1", "--input", "x=x.npy"}, "belong to --forward"},
      {{"p", "--steps", "1", "--init", "xavier"},
       "--init must be onnx or random:SEED, got 'xavier'"},
      {{"p", "--steps", "1", "--init", "random:x"},
       "--init random:SEED expects an integer SEED, got 'x'"},
      {{"--forward", "m.onnx", "--output-dir", "o", "--init", "random:1"},
       "--forward takes --input, --output-dir and --precision only"},
      {{"p", "--steps", "1", "--precision", "bf16"},
       "--precision belongs to --forward"},
      {{"--forward", "m.onnx", "--output-dir", "o", "--precision", "fp16"},
       "--precision must be fp32 or bf16, got 'fp16'"},
      {{"p", "--steps", "1", "--check-numerics=yes"},
       "--check-numerics takes no value, got 'yes'"},
      {{"--forward", "m.onnx", "--output-dir", "o", "--check-numerics"},
       "--forward takes --input, --output-dir and --precision only"},
      {{"p", "--steps", "1", "--device", "cuda", "--collectives", "mpi"},
       "--collectives must be nccl, host or auto, got 'mpi'"},
      {{"p", "--steps", "1", "--collectives", "host"},
       "--collectives host applies to --device cuda"},
      {{"p", "--steps", "1", "--device", "cuda", "--collectives"},
       "--collectives needs a value"},
      {{"--forward", "m.onnx", "--output-dir", "o", "--collectives", "auto"},
       "--forward takes --input, --output-dir and --precision only"},
  };
  for (const Case &c : cases) {
    auto o = parse(c.args);
    ASSERT_FALSE(o.isOk()) << c.text;
    EXPECT_NE(o.status().message().find(c.text), std::string::npos)
        << o.status().message();
  }
  EXPECT_TRUE(parse({"--help"})->help);
  EXPECT_TRUE(parse({"-h"})->help);
}

TEST(MetricsTest, Format) {
  StepMetrics m;
  m.step = 3;
  m.loss = 0.1f;
  m.stepTimeS = 0.5;
  m.samplesPerS = 64;
  m.tokensPerS = 128;
  m.peakMemoryBytes = 4096;
  m.arenaBytes = 4000;
  m.workspaceBytes = 96;
  EXPECT_EQ(formatMetrics(m),
            "{\"step\":3,\"loss\":0.100000001,\"step_time_s\":0.5,"
            "\"tokens_per_s\":128,\"samples_per_s\":64,"
            "\"peak_memory_bytes\":4096,\"arena_bytes\":4000,"
            "\"workspace_bytes\":96}");
  // On a GPU, the device's memory in use too.
  m.deviceMemoryUsedBytes = 1 << 20;
  EXPECT_NE(formatMetrics(m).find(",\"device_memory_used_bytes\":1048576"),
            std::string::npos);
  m.deviceMemoryUsedBytes = -1;
  m.loss = NAN;
  EXPECT_NE(formatMetrics(m).find("\"loss\":null"), std::string::npos);
  // Pipeline plans: one object a stage.
  m.loss = 0.1f;
  m.stages = {{2, 0.125, 0.25}, {1, 0.0, 0.0}};
  EXPECT_EQ(formatMetrics(m),
            "{\"step\":3,\"loss\":0.100000001,\"step_time_s\":0.5,"
            "\"tokens_per_s\":128,\"samples_per_s\":64,"
            "\"peak_memory_bytes\":4096,\"arena_bytes\":4000,"
            "\"workspace_bytes\":96,\"stages\":["
            "{\"micro_batches_in_flight\":2,\"pipeline_wait_s\":0.125,"
            "\"bubble_fraction\":0.25},{\"micro_batches_in_flight\":1,"
            "\"pipeline_wait_s\":0,\"bubble_fraction\":0}]}");
}

class RunMainTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "/runmain_" + std::to_string(getpid());
    mkdir(dir.c_str(), 0777);
    ASSERT_TRUE(savePlan(makeLinearRegressionPlan(1, 2, 2, 1, 0.1, {0.5, -1}),
                         dir + "/p.loomplan")
                    .isOk());
    ASSERT_TRUE(writeNpy(dir + "/x.npy",
                         HostTensor::fromF32({3, 2}, {1, 2, 0, 1, -1, 3}))
                    .isOk());
    ASSERT_TRUE(writeNpy(dir + "/y.npy", HostTensor::fromF32({3, 1}, {1, 0, -2}))
                    .isOk());
  }

  int run(std::vector<std::string> args) {
    args.insert(args.begin(), "loom-run");
    std::vector<char *> argv;
    for (std::string &a : args)
      argv.push_back(a.data());
    return runMain(argv.size(), argv.data());
  }

  std::string dir;
};

TEST_F(RunMainTest, TrainsAndWritesMetrics) {
  ASSERT_EQ(run({dir + "/p.loomplan", "--data", "x=" + dir + "/x.npy", "--data",
                 "target=" + dir + "/y.npy", "--steps", "3", "--quiet",
                 "--metrics", dir + "/m.jsonl"}),
            0);
  std::ifstream in(dir + "/m.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(line.rfind("{\"step\":" + std::to_string(lines) + ",\"loss\":", 0), 0u)
        << line;
  }
  EXPECT_EQ(lines, 3);
}

TEST_F(RunMainTest, ErrorsExitWithOne) {
  // Missing target data, unknown data name, wrong trailing dims, missing file.
  EXPECT_EQ(run({dir + "/p.loomplan", "--data", "x=" + dir + "/x.npy", "--steps", "1"}), 1);
  EXPECT_EQ(run({dir + "/p.loomplan", "--data", "x=" + dir + "/x.npy", "--data",
                 "target=" + dir + "/y.npy", "--data", "w=" + dir + "/y.npy",
                 "--steps", "1"}),
            1);
  EXPECT_EQ(run({dir + "/p.loomplan", "--data", "x=" + dir + "/y.npy", "--data",
                 "target=" + dir + "/y.npy", "--steps", "1"}),
            1);
  EXPECT_EQ(run({dir + "/p.loomplan", "--data", "x=" + dir + "/none.npy", "--data",
                 "target=" + dir + "/y.npy", "--steps", "1"}),
            1);
}

// Sample 2 holds a NaN; step 2 reads samples 2 and 0 (the global batch is 2
// of 3 samples), so its loss is the first that is not finite.
class NanDataTest : public RunMainTest {
protected:
  void SetUp() override {
    RunMainTest::SetUp();
    ASSERT_TRUE(writeNpy(dir + "/nan_x.npy",
                         HostTensor::fromF32({3, 2}, {1, 2, 0, 1, NAN, 3}))
                    .isOk());
  }

  /// Runs 5 steps on the NaN data with `extra` flags; returns the exit code
  /// and leaves stderr in `err`, the metrics lines in `lines`.
  int runOnNan(std::vector<std::string> extra) {
    std::vector<std::string> args = {
        dir + "/p.loomplan", "--data=x=" + dir + "/nan_x.npy",
        "--data=target=" + dir + "/y.npy", "--steps=5", "--quiet",
        "--metrics=" + dir + "/nan.jsonl"};
    args.insert(args.end(), extra.begin(), extra.end());
    testing::internal::CaptureStderr();
    int code = run(args);
    err = testing::internal::GetCapturedStderr();
    lines.clear();
    std::ifstream in(dir + "/nan.jsonl");
    for (std::string line; std::getline(in, line);)
      lines.push_back(line);
    return code;
  }

  std::string err;
  std::vector<std::string> lines;
};

TEST_F(NanDataTest, ANanLossStopsAfterItsStep) {
  EXPECT_EQ(runOnNan({}), kExitNonFinite);
  EXPECT_EQ(err, "loom-run: error: the loss is nan at step 2 (samples 2, 0 "
                 "of the data); rerun with --check-numerics to find the first "
                 "instruction that produced it\n");
  // The stopping step's metrics are written, and no step after it runs.
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].rfind("{\"step\":2,\"loss\":null,", 0), 0u) << lines[1];
}

TEST_F(NanDataTest, CheckNumericsNamesTheDataSample) {
  EXPECT_EQ(runOnNan({"--check-numerics"}), kExitNonFinite);
  EXPECT_EQ(err, "loom-run: error: step 2: the data 'x' has nan in sample 2 "
                 "(element 0 of the sample)\n");
  EXPECT_EQ(lines.size(), 2u);
}

TEST_F(RunMainTest, CheckNumericsLeavesAFiniteRunAlone) {
  EXPECT_EQ(run({dir + "/p.loomplan", "--data", "x=" + dir + "/x.npy", "--data",
                 "target=" + dir + "/y.npy", "--steps", "3", "--quiet",
                 "--check-numerics"}),
            0);
}

TEST_F(RunMainTest, ForwardReportsAMissingLoomc) {
  setenv("LOOMC", (dir + "/no-loomc").c_str(), 1);
  EXPECT_EQ(run({"--forward", dir + "/m.onnx", "--input", "x=" + dir + "/x.npy",
                 "--output-dir", dir + "/out"}),
            1);
  unsetenv("LOOMC");
}

} // namespace
