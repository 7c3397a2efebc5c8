//===- SbatchTest.cpp - loomc --emit-sbatch's scripts ---------------------===//
//
// The batch script's lines for a plan and for loom-elastic; the script run
// by a real Slurm: test/e2e/slurm.sh.
//
//===----------------------------------------------------------------------===//

#include "compiler/Sbatch.h"

#include <gtest/gtest.h>

using namespace mlir::loom;

namespace {

bool hasLine(const std::string &text, const std::string &line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(SbatchTest, APlanRunsUnderSrunAndResumesWhenRequeued) {
  SbatchJob job;
  job.jobName = "loom-gpt2";
  job.nodes = 2;
  job.tasksPerNode = 8;
  job.gpus = true;
  job.loomRun = "/opt/loom/bin/loom-run";
  job.plan = "/work/my plan.loomplan";
  std::string s = sbatchScript(job);
  EXPECT_EQ(s.rfind("#!/bin/bash\n", 0), 0u);
  EXPECT_TRUE(hasLine(s, "#SBATCH --nodes=2"));
  EXPECT_TRUE(hasLine(s, "#SBATCH --ntasks-per-node=8"));
  EXPECT_TRUE(hasLine(s, "#SBATCH --gpus-per-node=8"));
  EXPECT_TRUE(hasLine(s, "#SBATCH --requeue"));
  EXPECT_TRUE(hasLine(s, "#SBATCH --output=loom-gpt2-%j.out"));
  EXPECT_TRUE(hasLine(s, "exec srun --mpi=pmix /opt/loom/bin/loom-run "
                         "'/work/my plan.loomplan' --device cuda "
                         "\"${args[@]}\""));
  EXPECT_NE(s.find("--checkpoint-dir|--checkpoint-dir=*) args+=(--resume)"),
            std::string::npos);
}

TEST(SbatchTest, ElasticJobsRunTheLauncherOnTheAllocation) {
  SbatchJob job;
  job.jobName = "loom-m";
  job.nodes = 1;
  job.tasksPerNode = 4;
  job.elastic = true;
  job.loomElastic = "/b/loom-elastic";
  job.elasticArgs = {"--model", "/m/model.onnx", "--cluster", "cpu",
                     "--lr=0.0003"};
  std::string s = sbatchScript(job);
  EXPECT_FALSE(hasLine(s, "#SBATCH --gpus-per-node=4"));
  EXPECT_TRUE(hasLine(s, "exec /b/loom-elastic --model /m/model.onnx "
                         "--cluster cpu --lr=0.0003 \"$@\""));
  EXPECT_EQ(s.find("srun"), std::string::npos);
}

TEST(SbatchTest, QuotesWhatBashWouldSplit) {
  EXPECT_EQ(shellQuote("--force=dp=2,tp=2"), "--force=dp=2,tp=2");
  EXPECT_EQ(shellQuote("a b"), "'a b'");
  EXPECT_EQ(shellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(shellQuote("--train=h\\.[0-9]+"), "'--train=h\\.[0-9]+'");
  EXPECT_EQ(shellQuote(""), "''");
}

} // namespace
