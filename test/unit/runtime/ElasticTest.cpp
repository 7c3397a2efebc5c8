//===- ElasticTest.cpp - loom-elastic's pieces ---------------------------===//
//
// The split of its command line between loom-run and loomc, the slots of a
// hostfile and the cluster spec of a count, and which ranks of an attempt
// count as lost. The whole launcher, killing real ranks: test/e2e/elastic.sh.
//
//===----------------------------------------------------------------------===//

#include "runtime/elastic/ElasticOptions.h"
#include "runtime/elastic/RankRecord.h"
#include "runtime/elastic/Slots.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace loom::runtime;

namespace {

StatusOr<ElasticOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "loom-elastic");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return parseElasticOptions(static_cast<int>(argv.size()), argv.data());
}

TEST(ElasticOptionsTest, TrainingFlagsGoToLoomRunTheRestToLoomc) {
  auto opts =
      parse({"--np", "4", "--model", "m.onnx", "--global-batch", "12", "--data",
             "x=x.npy", "--lr=1e-3", "--verify-plan", "--steps", "30",
             "--checkpoint-dir", "ck", "--quiet", "--precision", "bf16",
             "--metrics=m.jsonl", "--mpirun-arg=--oversubscribe"});
  ASSERT_TRUE(opts) << opts.status().message();
  EXPECT_EQ(opts->np, 4);
  EXPECT_EQ(opts->model, "m.onnx");
  EXPECT_EQ(opts->checkpointDir, "ck");
  EXPECT_EQ(opts->loomcArgs,
            (std::vector<std::string>{"--global-batch=12", "--lr=1e-3",
                                      "--verify-plan", "--precision=bf16"}));
  EXPECT_EQ(opts->runArgs,
            (std::vector<std::string>{"--data", "x=x.npy", "--steps", "30",
                                      "--checkpoint-dir", "ck", "--quiet",
                                      "--metrics", "m.jsonl"}));
  EXPECT_EQ(opts->mpirunArgs, std::vector<std::string>{"--oversubscribe"});
}

TEST(ElasticOptionsTest, RefusesWhatItMustChoose) {
  std::vector<std::string> base = {"--np",    "2", "--model",          "m.onnx",
                                   "--steps", "3", "--checkpoint-dir", "ck"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    auto opts = parse(args);
    return opts ? std::string() : opts.status().message();
  };
  EXPECT_EQ(with({}), "");
  EXPECT_NE(with({"--resume"}).find("--resume is what loom-elastic does"),
            std::string::npos);
  EXPECT_NE(with({"-o", "p.loomplan"}).find("-o is loom-elastic's to choose"),
            std::string::npos);
  EXPECT_NE(with({"--cluster", "h100:2x8"}).find("without a count"),
            std::string::npos);
  EXPECT_NE(with({"--np", "0"}).find("--np expects an integer from 1"),
            std::string::npos);
  EXPECT_NE(with({"--backoff", "-1"}).find("--backoff expects seconds"),
            std::string::npos);
  EXPECT_NE(with({"m.onnx"}).find("unexpected argument 'm.onnx'"),
            std::string::npos);
  auto noSteps =
      parse({"--np", "2", "--model", "m.onnx", "--checkpoint-dir", "ck"});
  ASSERT_FALSE(noSteps);
  EXPECT_NE(noSteps.status().message().find("missing --steps"),
            std::string::npos);
}

TEST(SlotsTest, HostfilesAsOpenMpiReadsThem) {
  auto hosts = parseHostfile("# cluster\nnode1 slots=4 max_slots=8\n\n"
                             "node2\nnode1 slots=2 # more\n",
                             "hosts");
  ASSERT_TRUE(hosts) << hosts.status().message();
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ((*hosts)[0].name, "node1");
  EXPECT_EQ((*hosts)[0].slots, 6);
  EXPECT_EQ((*hosts)[1].slots, 1);
  EXPECT_EQ(totalSlots(*hosts), 7);
  EXPECT_EQ(hostfileFor(*hosts, 7), "node1 slots=6\nnode2 slots=1\n");
  EXPECT_EQ(hostfileFor(*hosts, 4), "node1 slots=4\n");

  std::vector<Host> left = usableHosts(*hosts, {{"node2", 1}, {"node1", 2}});
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].slots, 4);

  auto bad = parseHostfile("node1 slots=x\n", "hosts");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(),
            "hosts:1: slots=x is not a count from 1 to 1000000");
  EXPECT_FALSE(parseHostfile("# nothing\n", "hosts"));
}

TEST(SlotsTest, PlansUseWholeNodesOfGpuPresets) {
  EXPECT_EQ(clusterSpec("cpu", 0, 3), "cpu:3");
  EXPECT_EQ(usableDevices("cpu", 4, 7), 7);
  EXPECT_EQ(usableDevices("h100", 8, 15), 8);
  EXPECT_EQ(clusterSpec("h100", 8, 16), "h100:2x8");
  EXPECT_EQ(usableDevices("h100", 8, 7), 7);
  EXPECT_EQ(clusterSpec("h100", 8, 7), "h100:1x7");
  EXPECT_EQ(clusterSpec("h200", 0, 4), "h200:1x4");
}

class RankRecordTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = (std::filesystem::temp_directory_path() /
           ("loom-elastic-test-" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  void record(int64_t rank, RankRecord::Outcome outcome, int code) {
    RankRecord r;
    r.rank = rank;
    r.host = "node" + std::to_string(rank / 2);
    r.pid = 100 + rank;
    r.outcome = outcome;
    r.code = code;
    ASSERT_TRUE(writeRecord(dir, r));
  }
  std::string dir;
};

TEST_F(RankRecordTest, RoundTrips) {
  record(3, RankRecord::Outcome::Stopped, 15);
  std::optional<RankRecord> r = readRecord(dir, 3);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->host, "node1");
  EXPECT_EQ(r->pid, 103);
  EXPECT_EQ(r->outcome, RankRecord::Outcome::Stopped);
  EXPECT_EQ(r->code, 15);
  EXPECT_FALSE(readRecord(dir, 4));
}

TEST_F(RankRecordTest, TheKilledAreLostNotThoseTornDown) {
  using O = RankRecord::Outcome;
  record(0, O::Stopped, 15);
  record(1, O::Killed, 9);
  record(2, O::Running, 0); // its wrapper killed by the teardown
  record(3, O::Exited, 1);  // a peer's failure seen as an MPI error
  std::vector<LostRank> lost = lostRanks(dir, 4);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].rank, 1);
  EXPECT_EQ(lost[0].host, "node0");
  EXPECT_EQ(lost[0].why, "killed by signal 9 (Killed)");
}

TEST_F(RankRecordTest, WithoutAKillTheSilentAreLost) {
  using O = RankRecord::Outcome;
  record(0, O::Exited, 1);
  record(1, O::Running, 0);
  // rank 2 left no record: its host went down before it started.
  std::vector<LostRank> lost = lostRanks(dir, 3);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].rank, 1);
  EXPECT_EQ(lost[1].rank, 2);
  EXPECT_EQ(lost[1].host, "");
}

TEST_F(RankRecordTest, ErrorsOfTheirOwnLoseNoRank) {
  using O = RankRecord::Outcome;
  record(0, O::Exited, 1);
  record(1, O::Stopped, 15);
  EXPECT_TRUE(lostRanks(dir, 2).empty());
}

} // namespace
