//===- BucketTest.cpp - all_reduce_start / all_reduce_wait ----------------===//
//
// Buckets in flight meet by id (InFlightBuckets), a bucket started by one
// instruction and waited for by a later one sums over its group like a
// blocking all_reduce, with instructions running in between, and a plan
// that starts a bucket it never waits for, or reduces it out of place, is
// refused.
//
//===----------------------------------------------------------------------===//

#include "CollectiveCases.h"
#include "TestPlans.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/comm/InFlightBuckets.h"
#include "runtime/comm/ThreadCommunicator.h"

#include <gtest/gtest.h>

using namespace loom::runtime;
using namespace loom::runtime::test;
using namespace loom::runtime::test::collective;

namespace {

/// Done after `tests` calls of `test`; counts the waits that had to block
/// (a wait for a done collective returns at once).
class CountingCollective final : public PendingCollective {
public:
  CountingCollective(int tests, int *waits) : left(tests), waits(waits) {}
  StatusOr<bool> test() override { return --left <= 0; }
  Status wait() override {
    if (left > 0)
      ++*waits;
    left = 0;
    return Status::ok();
  }

private:
  int left;
  int *waits;
};

TEST(BucketTest, BucketsMeetByIdAndAdvanceUntilDone) {
  InFlightBuckets buckets;
  int waits = 0;
  ASSERT_TRUE(buckets.put(0, std::make_unique<CountingCollective>(2, &waits))
                  .isOk());
  ASSERT_TRUE(buckets.put(1, std::make_unique<CountingCollective>(9, &waits))
                  .isOk());
  Status twice =
      buckets.put(0, std::make_unique<CountingCollective>(1, &waits));
  EXPECT_EQ(twice.message(), "bucket 0 is started again before its wait");
  ASSERT_TRUE(buckets.progress().isOk());
  ASSERT_TRUE(buckets.progress().isOk()); // bucket 0 is done now
  EXPECT_TRUE(buckets.wait(0).isOk());
  EXPECT_EQ(waits, 0); // finished while progressing: nothing to wait for
  EXPECT_TRUE(buckets.wait(1).isOk());
  EXPECT_EQ(waits, 1);
  EXPECT_TRUE(buckets.empty());
  EXPECT_EQ(buckets.wait(1).message(),
            "bucket 1 is waited for but was not started");
  ASSERT_TRUE(buckets.put(4, std::make_unique<CountingCollective>(9, &waits))
                  .isOk());
  EXPECT_EQ(buckets.finishStep().message(),
            "the step ended with bucket(s) 4 started and never waited for");
  EXPECT_EQ(waits, 2); // waited for, so the next step starts clean
  EXPECT_TRUE(buckets.finishStep().isOk());
}

/// Four programs on a 2 x 2 mesh: x (rank r's values 10 r + i) copied into
/// the bucket, its sum over dp (axis 0) started, a relu of x in between,
/// the sum waited for and copied out. With `wait` false the bucket is
/// never waited for.
plan::Plan bucketPlan(bool wait = true) {
  plan::Plan p = meshPlan();
  for (int r = 0; r < 4; ++r) {
    plan::Program &prog = *p.add_programs();
    prog.add_ranks(r);
    prog.set_loss_buffer(-1);
    int32_t x = addBuffer(prog, "x", plan::CONSTANT, {2, 2});
    std::vector<float> v;
    for (int i = 0; i < 4; ++i)
      v.push_back(static_cast<float>(10 * r + i));
    setData(buffer(prog, x), v);
    int32_t b = addBuffer(prog, "bucket 0", plan::TEMPORARY, {4});
    int32_t z = addBuffer(prog, "between", plan::TEMPORARY, {2, 2});
    int32_t y = addBuffer(prog, "sum", plan::TEMPORARY, {4});
    addInst(prog, "copy", {x}, {b});
    plan::Instruction &start = addInst(prog, "all_reduce_start", {b}, {b});
    setInts(start, "axes", {0});
    setI(start, "bucket", 0);
    setS(start, "reduction", "sum");
    addInst(prog, "relu", {x}, {z});
    if (wait)
      setI(addInst(prog, "all_reduce_wait", {b}, {b}), "bucket", 0);
    addInst(prog, "copy", {b}, {y});
  }
  return p;
}

TEST(BucketTest, ABucketSumsOverItsGroupWithInstructionsInBetween) {
  plan::Plan p = bucketPlan();
  Status valid = validatePlan(p, "dp.loomplan");
  ASSERT_TRUE(valid.isOk()) << valid.message();
  std::vector<std::vector<float>> sums(4);
  std::vector<double> exposed(4, -2);
  std::vector<std::string> failures =
      runRanks(4, [&](Communicator &world) -> Status {
        LOOM_ASSIGN_OR_RETURN(auto exec,
                              Executor::create(p, world, "dp.loomplan"));
        for (int step = 0; step < 2; ++step)
          LOOM_RETURN_IF_ERROR(exec->runStep(step));
        sums[world.rank()] =
            exec->readBuffer(*exec->findBufferByName("sum")).toF32();
        exposed[world.rank()] = exec->exposedCommSeconds();
        return Status::ok();
      });
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(failures[r], "") << "rank " << r;
  // dp groups: ranks {0, 2} and {1, 3}.
  EXPECT_EQ(sums[0], (std::vector<float>{20, 22, 24, 26}));
  EXPECT_EQ(sums[2], sums[0]);
  EXPECT_EQ(sums[1], (std::vector<float>{40, 42, 44, 46}));
  EXPECT_EQ(sums[3], sums[1]);
  for (int r = 0; r < 4; ++r)
    EXPECT_GE(exposed[r], 0.0) << "rank " << r; // measured on CPU ranks
}

TEST(BucketTest, AStepMustWaitForEveryBucketItStarts) {
  plan::Plan p = bucketPlan(/*wait=*/false);
  ASSERT_TRUE(validatePlan(p, "dp.loomplan").isOk());
  std::vector<std::string> failures =
      runRanks(4, [&](Communicator &world) -> Status {
        LOOM_ASSIGN_OR_RETURN(auto exec,
                              Executor::create(p, world, "dp.loomplan"));
        return exec->runStep(0);
      });
  EXPECT_NE(failures[0].find("the step ended with bucket(s) 0 started and "
                             "never waited for"),
            std::string::npos)
      << failures[0];
}

TEST(BucketTest, ABucketIsReducedInPlace) {
  plan::Plan p = bucketPlan();
  for (plan::Program &prog : *p.mutable_programs())
    prog.mutable_instructions(1)->set_outputs(0, 3); // "sum", not the bucket
  Status valid = validatePlan(p, "dp.loomplan");
  ASSERT_FALSE(valid.isOk());
  EXPECT_NE(valid.message().find("a bucket is reduced in place: input buffer "
                                 "1 and output buffer 3 must be one"),
            std::string::npos)
      << valid.message();
}

} // namespace
