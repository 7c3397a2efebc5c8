//===- PipelineScheduleTest.cpp - Pipeline schedules ----------------------===//

#include "passes/planner/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

using namespace mlir::loom::planner;

namespace {

/// Runs `s` with each device taking its tasks in order as soon as what they
/// need is done: a forward the previous stage's forward of the micro-batch,
/// a backward the next stage's backward and its own forward, a weight
/// gradient its backward. True when every task runs (no deadlock).
bool runs(const PipelineSchedule &s) {
  int64_t p = s.devices, stages = p * s.chunks;
  std::set<std::tuple<int, int64_t, int64_t>> done; // kind, stage, micro
  std::vector<size_t> next(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t d = 0; d < p; ++d) {
      if (next[d] == s.order[d].size())
        continue;
      const PipelineTask &t = s.order[d][next[d]];
      int64_t stage = t.chunk * p + d;
      auto has = [&](PipelineTask::Kind k, int64_t st) {
        return done.count({k, st, t.microBatch}) > 0;
      };
      bool ready =
          t.kind == PipelineTask::Forward
              ? stage == 0 || has(PipelineTask::Forward, stage - 1)
          : t.kind == PipelineTask::Backward
              ? has(PipelineTask::Forward, stage) &&
                    (stage == stages - 1 ||
                     has(PipelineTask::Backward, stage + 1))
              : has(PipelineTask::Backward, stage);
      if (!ready)
        continue;
      done.insert({t.kind, stage, t.microBatch});
      ++next[d];
      progress = true;
    }
  }
  for (int64_t d = 0; d < p; ++d)
    if (next[d] != s.order[d].size())
      return false;
  return true;
}

/// `startTimes` runs `s`, and each device's tasks start one after another.
void expectTimed(const PipelineSchedule &s) {
  llvm::Expected<std::vector<std::vector<int64_t>>> t = s.startTimes();
  ASSERT_TRUE(static_cast<bool>(t)) << llvm::toString(t.takeError());
  for (int64_t d = 0; d < s.devices; ++d) {
    ASSERT_EQ((*t)[d].size(), s.order[d].size());
    for (size_t i = 1; i < (*t)[d].size(); ++i)
      EXPECT_LT((*t)[d][i - 1], (*t)[d][i]) << s.text(d);
  }
}

/// Every micro-batch's forward and backward (and W) once per chunk.
void expectComplete(const PipelineSchedule &s) {
  int64_t parts = s.kind == ScheduleKind::ZeroBubbleH1 ? 3 : 2;
  for (int64_t d = 0; d < s.devices; ++d) {
    std::set<std::tuple<int, int64_t, int64_t>> seen;
    for (const PipelineTask &t : s.order[d])
      EXPECT_TRUE(seen.insert({t.kind, t.microBatch, t.chunk}).second)
          << s.text(d);
    EXPECT_EQ(static_cast<int64_t>(seen.size()),
              parts * s.microBatches * s.chunks)
        << s.text(d);
  }
}

TEST(PipelineScheduleTest, OneFOneBForFourDevicesAndEightMicroBatches) {
  llvm::Expected<PipelineSchedule> s =
      buildSchedule(ScheduleKind::OneFOneB, 4, 8);
  ASSERT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s->text(0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(s->text(3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  // Device d holds p - d micro-batches at once.
  for (int64_t d = 0; d < 4; ++d)
    EXPECT_EQ(s->inFlight(d), 4 - d);
  EXPECT_TRUE(runs(*s));
  expectComplete(*s);
}

TEST(PipelineScheduleTest, GPipeHoldsEveryMicroBatch) {
  llvm::Expected<PipelineSchedule> s = buildSchedule(ScheduleKind::GPipe, 2, 4);
  ASSERT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s->text(1), "F0 F1 F2 F3 B0 B1 B2 B3");
  EXPECT_EQ(s->inFlight(0), 4);
  EXPECT_EQ(s->inFlight(1), 4);
  EXPECT_TRUE(runs(*s));
}

TEST(PipelineScheduleTest, InterleavedTwoDevicesTwoChunks) {
  llvm::Expected<PipelineSchedule> s =
      buildSchedule(ScheduleKind::Interleaved, 2, 4, 2);
  ASSERT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s->text(0),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 "
            "B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(s->text(1),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 "
            "F3.1 B3.1 B2.0 B3.0");
  EXPECT_TRUE(runs(*s));
  expectComplete(*s);
}

TEST(PipelineScheduleTest, ZeroBubbleH1DefersWeightGradients) {
  llvm::Expected<PipelineSchedule> s =
      buildSchedule(ScheduleKind::ZeroBubbleH1, 4, 8);
  ASSERT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s->text(0), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 "
                        "W4 B5 W5 B6 W6 B7 W7");
  EXPECT_EQ(s->text(3), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 "
                        "W3 F7 B7 W4 W5 W6 W7");
  // The same peak as 1F1B's first device on every device.
  for (int64_t d = 0; d < 4; ++d)
    EXPECT_EQ(s->inFlight(d), 4);
  EXPECT_TRUE(runs(*s));
  expectComplete(*s);
}

TEST(PipelineScheduleTest, EveryShapeRunsWithoutDeadlock) {
  for (int64_t p : {1, 2, 3, 4, 8})
    for (int64_t m : {1, 2, 3, 4, 8, 16})
      for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                             ScheduleKind::ZeroBubbleH1}) {
        llvm::Expected<PipelineSchedule> s = buildSchedule(k, p, m);
        ASSERT_TRUE(static_cast<bool>(s));
        EXPECT_TRUE(runs(*s)) << stringifySchedule(k).str() << " p=" << p
                              << " m=" << m;
        expectComplete(*s);
        expectTimed(*s);
      }
  for (int64_t p : {2, 4})
    for (int64_t m : {p, 2 * p, 4 * p})
      for (int64_t v : {2, 3}) {
        llvm::Expected<PipelineSchedule> s =
            buildSchedule(ScheduleKind::Interleaved, p, m, v);
        ASSERT_TRUE(static_cast<bool>(s));
        EXPECT_TRUE(runs(*s)) << "interleaved p=" << p << " m=" << m
                              << " v=" << v;
        expectComplete(*s);
        expectTimed(*s);
      }
}

TEST(PipelineScheduleTest, MicroBatchesInFlightCountEachOnce) {
  // Interleaved, 2 devices of 2 chunks, 4 micro-batches: device 0 holds 5
  // chunks' activations at once (F0.0 F1.0 F0.1 F1.1 F2.0), of micro-batches
  // 0 to 3 by F3.0, before B0.0 closes micro-batch 0.
  llvm::Expected<PipelineSchedule> s =
      buildSchedule(ScheduleKind::Interleaved, 2, 4, 2);
  ASSERT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s->inFlight(0), 5);
  EXPECT_EQ(s->microBatchesInFlight(0), 4);
  EXPECT_EQ(s->microBatchesInFlight(1), 3);
  // Without chunks the two counts agree.
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                         ScheduleKind::ZeroBubbleH1}) {
    llvm::Expected<PipelineSchedule> t = buildSchedule(k, 4, 8);
    ASSERT_TRUE(static_cast<bool>(t));
    for (int64_t d = 0; d < 4; ++d)
      EXPECT_EQ(t->microBatchesInFlight(d), t->inFlight(d))
          << stringifySchedule(k).str() << " device " << d;
  }
}

TEST(PipelineScheduleTest, StartTimesOfOneFOneB) {
  llvm::Expected<PipelineSchedule> s =
      buildSchedule(ScheduleKind::OneFOneB, 4, 8);
  ASSERT_TRUE(static_cast<bool>(s));
  llvm::Expected<std::vector<std::vector<int64_t>>> t = s->startTimes();
  ASSERT_TRUE(static_cast<bool>(t));
  // F0 goes down the pipeline one device a unit, B0 comes back up.
  EXPECT_EQ((*t)[0][0], 0);
  EXPECT_EQ((*t)[3][0], 3);
  EXPECT_EQ((*t)[3][1], 4); // B0 on the last device
  EXPECT_EQ((*t)[0][4], 7); // B0 on the first, after F0..F3
  // The last device's B7 ends the step: 8 F and 8 B plus the 3 units its
  // F0 waits.
  EXPECT_EQ((*t)[3].back(), 3 + 15);
  // The step: the last device's 16 tasks and its 3 units of waiting, the
  // first device's 16 tasks ending at 7 + 15: 22 units, 1 + (p - 1) / m of
  // 16.
  llvm::Expected<double> stretch = s->stretch();
  ASSERT_TRUE(static_cast<bool>(stretch));
  EXPECT_DOUBLE_EQ(*stretch, 22.0 / 16);
}

TEST(PipelineScheduleTest, StartTimesFindADeadlock) {
  PipelineSchedule s;
  s.kind = ScheduleKind::OneFOneB;
  s.devices = 2;
  s.microBatches = 1;
  // Device 1 waits for B0 of... itself: its backward comes before its
  // forward.
  s.order = {{{PipelineTask::Forward, 0}, {PipelineTask::Backward, 0}},
             {{PipelineTask::Backward, 0}, {PipelineTask::Forward, 0}}};
  llvm::Expected<std::vector<std::vector<int64_t>>> t = s.startTimes();
  ASSERT_FALSE(static_cast<bool>(t));
  EXPECT_EQ(llvm::toString(t.takeError()),
            "device 0 waits for ever before task 1 of its order 'F0 B0'");
}

TEST(PipelineScheduleTest, DefaultMicroBatchesKeepTheWaitsSmall) {
  // 1F1B over 4 devices stretches the step by 1 + 3 / m: m = 12 is the
  // first at 1.25, and 16 the first of 64's divisors from there.
  EXPECT_EQ(defaultMicroBatches(ScheduleKind::OneFOneB, 4, 64), 16);
  // 8 samples a rank cannot get there: all 8, the least stretch.
  EXPECT_EQ(defaultMicroBatches(ScheduleKind::OneFOneB, 4, 8), 8);
  // Interleaved needs a multiple of the devices; 6 samples on 4 devices
  // have none, so 1.
  EXPECT_EQ(defaultMicroBatches(ScheduleKind::Interleaved, 4, 6, 2), 1);
  EXPECT_EQ(defaultMicroBatches(ScheduleKind::Interleaved, 2, 64, 2) % 2, 0);
  // One device has no waits: one micro-batch.
  EXPECT_EQ(defaultMicroBatches(ScheduleKind::OneFOneB, 1, 64), 1);
}

TEST(PipelineScheduleTest, RefusedShapes) {
  auto why = [](llvm::Expected<PipelineSchedule> s) {
    return s ? std::string() : llvm::toString(s.takeError());
  };
  EXPECT_EQ(why(buildSchedule(ScheduleKind::Interleaved, 2, 3, 2)),
            "the interleaved schedule needs a number of micro-batches that "
            "is a multiple of the 2 pipeline devices, got 3");
  EXPECT_EQ(why(buildSchedule(ScheduleKind::Interleaved, 2, 4, 1)),
            "the interleaved schedule needs at least 2 model chunks a "
            "device, got 1");
  EXPECT_EQ(why(buildSchedule(ScheduleKind::OneFOneB, 2, 4, 2)),
            "only the interleaved schedule has several model chunks a "
            "device");
  EXPECT_EQ(parseSchedule("zb-h1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_EQ(parseSchedule("zb"), std::nullopt);
}

} // namespace
