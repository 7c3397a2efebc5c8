//===- PointToPointTest.cpp - send and recv between pipeline stages -------===//

#include "TestPlans.h"

#include "runtime/Executor.h"
#include "runtime/PlanFormat.h"
#include "runtime/comm/ThreadCommunicator.h"

#include <gtest/gtest.h>

using namespace loom::runtime;
using namespace loom::runtime::test;
namespace plan = loom::plan;

namespace {

/// A pp = 2 x dp = 2 mesh, one program a rank: each rank's x is 10 r + i;
/// stage 0 sends x to stage 1 (tag 7) and receives stage 1's x (tag 8),
/// stage 1 receives first and sends after, both with a relu in between.
/// `peer` overrides the peer stage of rank 0's send.
plan::Plan exchangePlan(int64_t peer = 1) {
  plan::Plan p = makePlan(4, false);
  p.clear_mesh();
  for (const char *name : {"pp", "dp"}) {
    plan::MeshAxis *axis = p.add_mesh();
    axis->set_name(name);
    axis->set_size(2);
  }
  for (int r = 0; r < 4; ++r) {
    plan::Program &prog = *p.add_programs();
    prog.add_ranks(r);
    prog.set_loss_buffer(-1);
    int32_t x = addBuffer(prog, "x", plan::CONSTANT, {2, 2});
    std::vector<float> v;
    for (int i = 0; i < 4; ++i)
      v.push_back(static_cast<float>(10 * r + i));
    setData(buffer(prog, x), v);
    int32_t got = addBuffer(prog, "got", plan::TEMPORARY, {2, 2});
    int32_t z = addBuffer(prog, "between", plan::TEMPORARY, {2, 2});
    int32_t out = addBuffer(prog, "out", plan::TEMPORARY, {2, 2});
    bool first = r < 2; // pp coordinate 0
    auto send = [&] {
      plan::Instruction &s = addInst(prog, "send", {x}, {});
      setI(s, "peer_stage", first ? (r == 0 ? peer : 1) : 0);
      setI(s, "tag", first ? 7 : 8);
    };
    auto recv = [&] {
      plan::Instruction &s = addInst(prog, "recv", {}, {got});
      setI(s, "peer_stage", first ? 1 : 0);
      setI(s, "tag", first ? 8 : 7);
    };
    if (first) {
      send();
      addInst(prog, "relu", {x}, {z});
      recv();
    } else {
      recv();
      addInst(prog, "relu", {x}, {z});
      send();
    }
    addInst(prog, "copy", {got}, {out});
  }
  return p;
}

TEST(PointToPointTest, StagesExchangeAlongThePipelineAxis) {
  plan::Plan p = exchangePlan();
  Status valid = validatePlan(p, "pp.loomplan");
  ASSERT_TRUE(valid.isOk()) << valid.message();
  std::vector<std::vector<float>> got(4);
  std::vector<std::string> failures =
      runRanks(4, [&](Communicator &world) -> Status {
        LOOM_ASSIGN_OR_RETURN(auto exec,
                              Executor::create(p, world, "pp.loomplan"));
        for (int step = 0; step < 3; ++step)
          LOOM_RETURN_IF_ERROR(exec->runStep(step));
        got[world.rank()] =
            exec->readBuffer(*exec->findBufferByName("out")).toF32();
        return Status::ok();
      });
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(failures[r], "") << "rank " << r;
  // Rank r = 2 pp + dp talks to the rank of the other stage and its dp.
  EXPECT_EQ(got[0], (std::vector<float>{20, 21, 22, 23}));
  EXPECT_EQ(got[1], (std::vector<float>{30, 31, 32, 33}));
  EXPECT_EQ(got[2], (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(got[3], (std::vector<float>{10, 11, 12, 13}));
}

TEST(PointToPointTest, APeerMustBeAnotherStage) {
  auto bindErrors = [](const plan::Plan &p) {
    return runRanks(4, [&](Communicator &world) -> Status {
      return Executor::create(p, world, "pp.loomplan").status();
    });
  };
  // Every rank binds (the communicators are made before any kernel), so a
  // bad peer fails on its own rank only.
  std::vector<std::string> outside = bindErrors(exchangePlan(2));
  EXPECT_NE(outside[0].find("peer_stage 2 is not one of the 2 pipeline "
                            "stages"),
            std::string::npos)
      << outside[0];
  std::vector<std::string> self = bindErrors(exchangePlan(0));
  EXPECT_NE(self[0].find("peer_stage 0 is this rank's own stage"),
            std::string::npos)
      << self[0];
  for (int r = 1; r < 4; ++r)
    EXPECT_EQ(self[r], "") << "rank " << r;
}

TEST(PointToPointTest, ThreadRanksKeepTheOrderOfOneTag) {
  std::vector<std::vector<int>> got(2);
  std::vector<std::string> failures =
      runRanks(2, [&](Communicator &world) -> Status {
        if (world.rank() == 0) {
          for (int v : {1, 2, 3}) {
            LOOM_ASSIGN_OR_RETURN(auto sent,
                                  world.startSend(&v, sizeof v, 1, 5));
            LOOM_RETURN_IF_ERROR(sent->wait());
          }
          return Status::ok();
        }
        for (int i = 0; i < 3; ++i) {
          int v = 0;
          LOOM_RETURN_IF_ERROR(world.recv(&v, sizeof v, 0, 5));
          got[1].push_back(v);
        }
        return Status::ok();
      });
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  EXPECT_EQ(got[1], (std::vector<int>{1, 2, 3}));
  // A size other than the one sent is an error, not a partial copy.
  failures = runRanks(2, [&](Communicator &world) -> Status {
    int64_t v = 4;
    if (world.rank() == 0) {
      LOOM_ASSIGN_OR_RETURN(auto sent, world.startSend(&v, 4, 1, 0));
      return sent->wait();
    }
    return world.recv(&v, 8, 0, 0);
  });
  EXPECT_EQ(failures[1], "rank 1 expected 8 bytes from rank 0 (tag 0), got 4");
  LocalCommunicator alone;
  EXPECT_EQ(alone.recv(nullptr, 0, 1, 0).message(),
            "rank 0 cannot receive from rank 1: this communicator has no "
            "point-to-point transfers");
}

} // namespace
