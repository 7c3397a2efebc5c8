//===- BlockBucketTest.cpp - reduce_scatter / all_gather buckets ----------===//
//
// A bucket of reduce-scatters or all-gathers, started by one instruction
// and waited for by a later one with an instruction in between, gives each
// of its tensors what the blocking reduce_scatter or all_gather gives it,
// whichever dimension each is split along; staging that does not fit the
// bucket's tensors is refused.
//
//===----------------------------------------------------------------------===//

#include "CollectiveCases.h"
#include "TestPlans.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/comm/ThreadCommunicator.h"

#include <gtest/gtest.h>

using namespace loom::runtime;
using namespace loom::runtime::test;
using namespace loom::runtime::test::collective;

namespace {

/// Rank r's values of a tensor of `n` elements: 100 r + offset + i.
std::vector<float> values(int r, int64_t offset, int64_t n) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(static_cast<float>(100 * r + offset + i));
  return v;
}

/// Sets the attributes a bucket's start and wait carry.
void bucketAttrs(plan::Instruction &inst, bool scatter, int64_t bucket) {
  setInts(inst, "axes", {1});
  setInts(inst, "dims", {1, 0});
  setI(inst, "bucket", bucket);
  if (scatter)
    setS(inst, "reduction", "sum");
}

/// The blocking collective of `x` along `dim` over tp into `y`.
void blocking(plan::Program &prog, bool scatter, int32_t x, int32_t y,
              int64_t dim) {
  plan::Instruction &inst =
      addInst(prog, scatter ? "reduce_scatter" : "all_gather", {x}, {y});
  setInts(inst, "axes", {1});
  setI(inst, "axis", dim);
  if (scatter)
    setS(inst, "reduction", "sum");
}

/// Four programs on a 2 x 2 mesh. A reduce-scatter bucket over tp (mesh
/// axis 1) of a [2, 4] tensor along dim 1 and a [4, 2] one along dim 0, and
/// an all-gather bucket of a [2, 4] block along dim 1 and a [4, 2] one
/// along dim 0, each started, a relu run, and waited for into "bucket
/// <name>"; the same collectives, blocking, into "blocking <name>".
/// `recvElements` overrides the reduce-scatter's receive staging size.
plan::Plan blockBucketPlan(int64_t recvElements = 8) {
  plan::Plan p = meshPlan();
  for (int r = 0; r < 4; ++r) {
    plan::Program &prog = *p.add_programs();
    prog.add_ranks(r);
    prog.set_loss_buffer(-1);
    int32_t x = addBuffer(prog, "x", plan::CONSTANT, {2, 4});
    int32_t z = addBuffer(prog, "z", plan::CONSTANT, {4, 2});
    setData(buffer(prog, x), values(r, 0, 8));
    setData(buffer(prog, z), values(r, 50, 8));
    int32_t between = addBuffer(prog, "between", plan::TEMPORARY, {2, 4});
    // Reduce-scatter: 16 elements sent, this rank's 8 received.
    int32_t rsSend = addBuffer(prog, "bucket 0 send", plan::TEMPORARY, {16});
    int32_t rsRecv =
        addBuffer(prog, "bucket 0 recv", plan::TEMPORARY, {recvElements});
    int32_t rsX = addBuffer(prog, "bucket rs x", plan::TEMPORARY, {2, 2});
    int32_t rsZ = addBuffer(prog, "bucket rs z", plan::TEMPORARY, {2, 2});
    bucketAttrs(addInst(prog, "reduce_scatter_start", {x, z}, {rsSend, rsRecv}),
                true, 0);
    addInst(prog, "relu", {x}, {between});
    bucketAttrs(
        addInst(prog, "reduce_scatter_wait", {rsSend, rsRecv}, {rsX, rsZ}),
        true, 0);
    // All-gather: this rank's 16 elements sent, the group's 32 received.
    int32_t agSend = addBuffer(prog, "bucket 1 send", plan::TEMPORARY, {16});
    int32_t agRecv = addBuffer(prog, "bucket 1 recv", plan::TEMPORARY, {32});
    int32_t agX = addBuffer(prog, "bucket ag x", plan::TEMPORARY, {2, 8});
    int32_t agZ = addBuffer(prog, "bucket ag z", plan::TEMPORARY, {8, 2});
    bucketAttrs(addInst(prog, "all_gather_start", {x, z}, {agSend, agRecv}),
                false, 1);
    addInst(prog, "relu", {x}, {between});
    bucketAttrs(addInst(prog, "all_gather_wait", {agSend, agRecv}, {agX, agZ}),
                false, 1);
    blocking(prog, true, x,
             addBuffer(prog, "blocking rs x", plan::TEMPORARY, {2, 2}), 1);
    blocking(prog, true, z,
             addBuffer(prog, "blocking rs z", plan::TEMPORARY, {2, 2}), 0);
    blocking(prog, false, x,
             addBuffer(prog, "blocking ag x", plan::TEMPORARY, {2, 8}), 1);
    blocking(prog, false, z,
             addBuffer(prog, "blocking ag z", plan::TEMPORARY, {8, 2}), 0);
  }
  return p;
}

const char *const kResults[] = {"rs x", "rs z", "ag x", "ag z"};

TEST(BlockBucketTest, ABucketGivesEachTensorWhatItsBlockingCollectiveGives) {
  plan::Plan p = blockBucketPlan();
  Status valid = validatePlan(p, "tp.loomplan");
  ASSERT_TRUE(valid.isOk()) << valid.message();
  // got[rank][result]: {bucket, blocking}
  std::vector<std::vector<std::pair<std::vector<float>, std::vector<float>>>>
      got(4);
  std::vector<std::string> failures =
      runRanks(4, [&](Communicator &world) -> Status {
        LOOM_ASSIGN_OR_RETURN(auto exec,
                              Executor::create(p, world, "tp.loomplan"));
        for (int step = 0; step < 2; ++step)
          LOOM_RETURN_IF_ERROR(exec->runStep(step));
        for (const char *name : kResults) {
          auto read = [&](const std::string &prefix) {
            return exec->readBuffer(*exec->findBufferByName(prefix + name))
                .toF32();
          };
          got[world.rank()].emplace_back(read("bucket "), read("blocking "));
        }
        return Status::ok();
      });
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(failures[r], "") << "rank " << r;
    for (size_t i = 0; i < 4; ++i)
      EXPECT_EQ(got[r][i].first, got[r][i].second)
          << kResults[i] << " on rank " << r;
  }
  // Ranks 2 and 3 are the tp group of dp = 1. x is 200 + [[0..3], [4..7]]
  // on rank 2 and 300 + that on rank 3: their sum's columns 2 and 3 are
  // rank 3's block along dim 1.
  EXPECT_EQ(got[3][0].first, (std::vector<float>{504, 506, 512, 514}));
  // z (rank 2: 250 + [[0, 1], [2, 3], ...]) gathered along dim 0: rank 2's
  // four rows, then rank 3's.
  EXPECT_EQ(got[2][3].first,
            (std::vector<float>{250, 251, 252, 253, 254, 255, 256, 257, 350,
                                351, 352, 353, 354, 355, 356, 357}));
}

TEST(BlockBucketTest, AGatherBucketMovesBf16AsItIs) {
  // Each rank's [2, 2] bf16 block (bits 100 r + i) gathered along dim 1 over
  // tp, in a bucket and blocking.
  plan::Plan p = meshPlan();
  for (int r = 0; r < 4; ++r) {
    plan::Program &prog = *p.add_programs();
    prog.add_ranks(r);
    prog.set_loss_buffer(-1);
    int32_t x = addBuffer(prog, "x", plan::CONSTANT, {2, 2}, plan::BF16);
    std::string bits;
    for (int i = 0; i < 4; ++i) {
      uint16_t v = static_cast<uint16_t>(0x3f80 + 100 * r + i);
      bits.append(reinterpret_cast<const char *>(&v), sizeof v);
    }
    buffer(prog, x).set_data(bits);
    int32_t send =
        addBuffer(prog, "bucket 0 send", plan::TEMPORARY, {4}, plan::BF16);
    int32_t recv =
        addBuffer(prog, "bucket 0 recv", plan::TEMPORARY, {8}, plan::BF16);
    int32_t y = addBuffer(prog, "bucket", plan::TEMPORARY, {2, 4}, plan::BF16);
    for (const char *op : {"all_gather_start", "all_gather_wait"}) {
      bool start = op[11] == 's';
      plan::Instruction &inst = addInst(
          prog, op,
          start ? std::vector<int32_t>{x} : std::vector<int32_t>{send, recv},
          start ? std::vector<int32_t>{send, recv} : std::vector<int32_t>{y});
      setInts(inst, "axes", {1});
      setInts(inst, "dims", {1});
      setI(inst, "bucket", 0);
    }
    blocking(prog, false, x,
             addBuffer(prog, "blocking", plan::TEMPORARY, {2, 4}, plan::BF16),
             1);
  }
  Status valid = validatePlan(p, "tp.loomplan");
  ASSERT_TRUE(valid.isOk()) << valid.message();
  std::vector<std::vector<float>> bucketed(4), blocked(4);
  std::vector<std::string> failures =
      runRanks(4, [&](Communicator &world) -> Status {
        LOOM_ASSIGN_OR_RETURN(auto exec,
                              Executor::create(p, world, "tp.loomplan"));
        LOOM_RETURN_IF_ERROR(exec->runStep(0));
        bucketed[world.rank()] =
            exec->readBuffer(*exec->findBufferByName("bucket")).toF32();
        blocked[world.rank()] =
            exec->readBuffer(*exec->findBufferByName("blocking")).toF32();
        return Status::ok();
      });
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(failures[r], "") << "rank " << r;
    EXPECT_EQ(bucketed[r], blocked[r]) << "rank " << r;
  }
  EXPECT_NE(bucketed[0][0], bucketed[0][2]); // rank 0's, then rank 1's
}

TEST(BlockBucketTest, StagingMustFitTheBucketsTensors) {
  plan::Plan p = blockBucketPlan(/*recvElements=*/16);
  Status valid = validatePlan(p, "tp.loomplan");
  ASSERT_FALSE(valid.isOk());
  EXPECT_NE(valid.message().find("the bucket's staging holds 16 and 16 "
                                 "elements; its tensors need 16 to send and "
                                 "8 to receive"),
            std::string::npos)
      << valid.message();
}

} // namespace
