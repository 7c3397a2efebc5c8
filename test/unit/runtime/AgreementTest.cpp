//===- AgreementTest.cpp - How ranks agree to stop ------------------------===//
//
// One process plays one rank of a larger world: a scripted communicator
// stands for the other ranks by returning the minimum of this rank's value
// and the one the others would contribute.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/Agreement.h"

#include <gtest/gtest.h>

#include <climits>
#include <deque>

using namespace loom::runtime;

namespace {

class ScriptedCommunicator final : public Communicator {
public:
  ScriptedCommunicator(int rank, int size, std::deque<int> others)
      : myRank(rank), mySize(size), others(std::move(others)) {}
  int rank() const override { return myRank; }
  int size() const override { return mySize; }
  Status allReduceSum(float *, int64_t) override { return Status::ok(); }
  Status allGather(const void *, void *, int64_t) override {
    return makeError("not scripted");
  }
  Status reduceScatterSum(const float *, float *, int64_t) override {
    return makeError("not scripted");
  }
  Status allToAll(const void *, void *, int64_t) override {
    return makeError("not scripted");
  }
  StatusOr<int> allReduceMin(int value) override {
    EXPECT_FALSE(others.empty()) << "more collectives than scripted";
    if (others.empty())
      return makeError("unscripted collective");
    int other = others.front();
    others.pop_front();
    seen.push_back(value);
    return std::min(value, other);
  }
  Status barrier() override { return Status::ok(); }
  Status broadcast(void *, int64_t, int) override { return Status::ok(); }
  StatusOr<std::unique_ptr<Communicator>> split(int, int) override {
    return makeError("not scripted");
  }

  int myRank, mySize;
  std::deque<int> others; // the other ranks' minimum, one per collective
  std::vector<int> seen;  // this rank's contributions
};

const Status kOk = Status::ok();
const Status kNan = Status::error("the loss is nan at step 2");
const Status kBroken = Status::error("bad index");

TEST(AgreementTest, OneRankStepOutcomes) {
  LocalCommunicator world;
  testing::internal::CaptureStderr();
  EXPECT_EQ(agreeOnStep(world, kOk, kOk), StepOutcome::Ok);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  EXPECT_EQ(agreeOnStep(world, kOk, kNan), StepOutcome::NonFinite);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "loom-run: error: the loss is nan at step 2\n");
  // An error outranks the non-finite loss it may have caused.
  testing::internal::CaptureStderr();
  EXPECT_EQ(agreeOnStep(world, kBroken, kNan), StepOutcome::Failed);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "loom-run: error: bad index\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(agreeOnStep(world, kOk, kNan, /*printNonFinite=*/false),
            StepOutcome::NonFinite);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// Rank 1 of 2 with a finite loss while rank 0's is NaN (rank 0 sends
// 2 + 0): both stop, and rank 0 is the one that prints.
TEST(AgreementTest, ARankWithAFiniteLossStopsWithTheOthers) {
  ScriptedCommunicator world(1, 2, {2});
  testing::internal::CaptureStderr();
  EXPECT_EQ(agreeOnStep(world, kOk, kOk), StepOutcome::NonFinite);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(world.seen, std::vector<int>{INT_MAX});
}

TEST(AgreementTest, TheLowestRankOfTheWinningKindPrints) {
  // Both ranks NaN: rank 0 prints, rank 1 does not.
  ScriptedCommunicator second(1, 2, {2});
  testing::internal::CaptureStderr();
  EXPECT_EQ(agreeOnStep(second, kOk, kNan), StepOutcome::NonFinite);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(second.seen, std::vector<int>{3});
  // Rank 1's error beats rank 0's NaN, and rank 1 prints it with its rank.
  ScriptedCommunicator failing(1, 2, {2});
  testing::internal::CaptureStderr();
  EXPECT_EQ(agreeOnStep(failing, kBroken, kNan), StepOutcome::Failed);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "loom-run: error: rank 1: bad index\n");
  // Rank 0 hears of an error elsewhere: it fails without printing.
  ScriptedCommunicator first(0, 2, {1});
  testing::internal::CaptureStderr();
  EXPECT_EQ(agreeOnStep(first, kOk, kNan), StepOutcome::Failed);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(AgreementTest, PhasesAgreeOnErrorsOnly) {
  ScriptedCommunicator world(1, 2, {INT_MAX, 0});
  EXPECT_TRUE(agree(world, kOk));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(agree(world, kBroken));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// Rank 1 found NaN in its data (position 0), rank 0 only later, in the
// all-reduce that brought rank 1's NaN over (position 3): rank 1 prints.
TEST(AgreementTest, TheEarliestFaultIsReported) {
  NumericsFault data{0, "step 8: the data 'x' has nan in sample 61"};
  ScriptedCommunicator second(1, 2, {3, INT_MAX});
  testing::internal::CaptureStderr();
  reportFirstFault(second, data, "the loss is nan at step 8");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "loom-run: error: rank 1: step 8: the data 'x' has nan in sample "
            "61\n");
  EXPECT_EQ(second.seen, (std::vector<int>{0, 1}));

  // The same step seen from rank 0: its fault comes later, it is silent.
  NumericsFault reduce{3, "step 8: instruction 2 'all_reduce' wrote nan"};
  ScriptedCommunicator first(0, 2, {0, 1});
  testing::internal::CaptureStderr();
  reportFirstFault(first, reduce, "the loss is nan at step 8");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(first.seen, (std::vector<int>{3, INT_MAX}));

  // Equal positions: the lower rank prints.
  ScriptedCommunicator tie(1, 2, {0, 0});
  testing::internal::CaptureStderr();
  reportFirstFault(tie, data, "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// No rank saw a fault, but the loss is not finite: the loss is reported.
TEST(AgreementTest, ALossWithoutAFaultIsReportedLast) {
  LocalCommunicator world;
  testing::internal::CaptureStderr();
  reportFirstFault(world, std::nullopt, "the loss is nan at step 8");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "loom-run: error: the loss is nan at step 8\n");
}

} // namespace
