//===- ExecutorTest.cpp - Executor, Session, data feeding and arena ---------===//

#include "TestPlans.h"
#include "runtime/Arena.h"
#include "runtime/Session.h"
#include "runtime/data/DataFeeder.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

// 6 samples of 2 features, 1 output; W starts at [0.5, -1].
const std::vector<float> kX = {1, 2, 0, 1, -1, 3, 2, 2, 0.5, -1, 1, 0};
const std::vector<float> kY = {1, 0, -2, 3, 1, 0.5};
const std::vector<float> kW0 = {0.5f, -1.0f};

/// mse over samples [start, start+b) (mod 6) with weights `w`, and the
/// gradient 2/b * x^T (xw - y).
double lossAndGrad(const std::vector<double> &w, int start, int b,
                   std::vector<double> &grad) {
  double loss = 0;
  grad.assign(2, 0);
  for (int s = 0; s < b; ++s) {
    int i = (start + s) % 6;
    double pred = kX[2 * i] * w[0] + kX[2 * i + 1] * w[1];
    double d = pred - kY[i];
    loss += d * d;
    grad[0] += 2 * d * kX[2 * i] / b;
    grad[1] += 2 * d * kX[2 * i + 1] / b;
  }
  return loss / b;
}

std::unique_ptr<Session> makeSession(LocalCommunicator &world, int64_t batch,
                                     double lr) {
  StatusOr<std::unique_ptr<Session>> s = Session::create(
      makeLinearRegressionPlan(1, batch, 2, 1, lr, kW0), world, "lr.loomplan");
  EXPECT_TRUE(s.isOk()) << s.status().message();
  if (!s.isOk())
    return nullptr;
  EXPECT_TRUE((*s)->attachData("x", HostTensor::fromF32({6, 2}, kX)).isOk());
  EXPECT_TRUE((*s)->attachData("target", HostTensor::fromF32({6, 1}, kY)).isOk());
  return std::move(s).value();
}

TEST(ExecutorTest, LinearRegressionLossMatchesHandComputation) {
  LocalCommunicator world;
  auto session = makeSession(world, /*batch=*/4, /*lr=*/0.1);
  ASSERT_TRUE(session);
  std::vector<double> w(kW0.begin(), kW0.end()), grad;
  // Step 0 uses samples 0..3, step 1 samples 4,5,0,1 (wrap-around), step 2
  // samples 2..5.
  for (int step = 0; step < 3; ++step) {
    double want = lossAndGrad(w, step * 4, 4, grad);
    ASSERT_TRUE(session->runStep(step).isOk());
    StatusOr<float> loss = session->loss();
    ASSERT_TRUE(loss.isOk());
    // Double hand computation; a loss of order 1 over 4 samples in f32 is
    // exact to ~1e-7, so 1e-5 leaves a factor 100.
    EXPECT_NEAR(*loss, want, 1e-5) << "step " << step;
    w[0] -= 0.1 * grad[0];
    w[1] -= 0.1 * grad[1];
    StatusOr<HostTensor> trained = session->readBuffer("W");
    ASSERT_TRUE(trained.isOk());
    EXPECT_NEAR(trained->toF32()[0], w[0], 1e-5);
    EXPECT_NEAR(trained->toF32()[1], w[1], 1e-5);
  }
  // Step 0's loss, written out: pred = [-1.5, -1, -3.5, -1], err^2 =
  // [6.25, 1, 2.25, 16] -> mean 6.375.
  LocalCommunicator world2;
  auto fresh = makeSession(world2, 4, 0.1);
  ASSERT_TRUE(fresh && fresh->runStep(0).isOk());
  EXPECT_FLOAT_EQ(*fresh->loss(), 6.375f);
}

TEST(ExecutorTest, SetInputOverridesAttachedData) {
  LocalCommunicator world;
  auto session = makeSession(world, 2, 0.0);
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->setInput("x", HostTensor::fromF32({2, 2}, {1, 0, 0, 1})).isOk());
  ASSERT_TRUE(session->setInput("target", HostTensor::fromF32({2, 1}, {0.5, -1})).isOk());
  ASSERT_TRUE(session->runStep(0).isOk());
  EXPECT_NEAR(*session->loss(), 0.0, 1e-7); // prediction = W exactly
  EXPECT_FALSE(session->setInput("x", HostTensor::fromF32({3}, {1, 2, 3})).isOk());
  EXPECT_FALSE(session->setInput("nope", HostTensor::fromF32({1}, {1})).isOk());
}

TEST(ExecutorTest, AttachDataChecks) {
  LocalCommunicator world;
  auto s = Session::create(makeLinearRegressionPlan(1, 2, 2, 1, 0.1, kW0), world);
  ASSERT_TRUE(s.isOk());
  Session &session = **s;
  Status wrongDims = session.attachData("x", HostTensor::fromF32({3, 3}, std::vector<float>(9)));
  ASSERT_FALSE(wrongDims.isOk());
  EXPECT_NE(wrongDims.message().find("data for 'x' has shape [3, 3]; the plan "
                                     "expects [N, 2]"),
            std::string::npos)
      << wrongDims.message();
  // Integers feed a float buffer as torch's .to(float32) converts them.
  ASSERT_TRUE(session.attachData("x", HostTensor::fromI64({3, 2}, {1, -2, 3, 4, 5, 6})).isOk());
  ASSERT_TRUE(session.attachData("target", HostTensor::fromF32({3, 1}, {0, 0, 0})).isOk());
  ASSERT_TRUE(session.feed(1).isOk()); // samples 2, 0
  HostTensor fed = *session.readBuffer("x");
  EXPECT_EQ(fed.toF32(), std::vector<float>({5, 6, 1, -2}));
  // Arrays of different lengths are not one data set.
  Status shorter = session.attachData("target", HostTensor::fromF32({2, 1}, {0, 0}));
  ASSERT_FALSE(shorter.isOk());
  EXPECT_NE(shorter.message().find("holds 2 sample(s) for 'target' but the array for 'x' "
                                   "holds 3 for 'x'"),
            std::string::npos)
      << shorter.message();
  Status unknown = session.attachData("z", HostTensor::fromF32({3, 2}, std::vector<float>(6)));
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.message().find("no input or target named 'z'"), std::string::npos);

  std::map<std::string, SampleArray> data;
  data["x"] = SampleArray::fromTensor(HostTensor::fromF32({3, 2}, std::vector<float>(6)), "x.npy");
  Status missing = checkPlanData(session.plan(), data);
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("no data for 'target'"), std::string::npos);
}

TEST(ExecutorTest, ClassIdsAreCheckedAgainstTheLogits) {
  plan::Plan p = makePlan(1, true);
  p.mutable_training()->set_global_batch(2);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  int32_t logits = addBuffer(prog, "logits", plan::INPUT, {2, 3});
  buffer(prog, logits).set_binding("logits");
  int32_t t = addBuffer(prog, "target", plan::TARGET, {2}, plan::I64);
  buffer(prog, t).set_binding("target");
  int32_t loss = addBuffer(prog, "loss", plan::LOSS, {});
  prog.set_loss_buffer(loss);
  addInst(prog, "cross_entropy", {logits, t}, {loss});
  ASSERT_TRUE(validatePlan(p, "ce").isOk());

  std::vector<int32_t> ids = {0, 2, 3};
  HostTensor bad(ElemType::I32, {3});
  std::memcpy(bad.bytes.data(), ids.data(), 12);
  LocalCommunicator world;
  auto session = Session::create(p, world);
  ASSERT_TRUE(session.isOk());
  ASSERT_TRUE((*session)->attachData(
      "logits", HostTensor::fromF32({3, 3}, {0, 0, 0, 1, 2, 3, 0, 0, 9})).isOk());
  // The ids are checked as they are fed: step 0 reads samples 0 and 1.
  ASSERT_TRUE((*session)->attachData("target", bad).isOk());
  ASSERT_TRUE((*session)->feed(0).isOk());
  Status s = (*session)->feed(1);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("the array for 'target': class id 3 at sample 2, element 0 "
                             "is outside [0, 3)"),
            std::string::npos)
      << s.message();

  // int32 ids are widened to the I64 buffer.
  ids[2] = 1;
  std::memcpy(bad.bytes.data(), ids.data(), 12);
  ASSERT_TRUE((*session)->attachData("target", bad).isOk());
  ASSERT_TRUE((*session)->runStep(1).isOk()); // samples 2, 0
  HostTensor fed = *(*session)->readBuffer("target");
  EXPECT_EQ(fed.data<int64_t>()[0], 1);
  EXPECT_EQ(fed.data<int64_t>()[1], 0);
  double want = (std::log(2 + std::exp(9.0)) - 0 + std::log(3.0)) / 2;
  // Double reference of an f32 cross-entropy of order 5: ~1e-6 rounding.
  EXPECT_NEAR(*(*session)->loss(), want, 1e-5);
}

TEST(ExecutorTest, SampleOffsetsSplitTheGlobalBatch) {
  plan::Plan p = makeLinearRegressionPlan(2, 4, 2, 1, 0.1, kW0);
  const plan::Buffer &x1 = p.programs(1).buffers(0);
  // Rank 1 is data-parallel coordinate 1: its half starts at sample 2.
  EXPECT_EQ(firstSample(p, x1, 0, /*rank=*/1), 2);
  EXPECT_EQ(firstSample(p, x1, 3, /*rank=*/1), 14);
  EXPECT_EQ(firstSample(p, x1, 3, /*rank=*/0), 12);
  std::vector<float> out(4);
  ASSERT_TRUE(feedSamples(p, x1, SampleArray::fromTensor(HostTensor::fromF32({6, 2}, kX), "x"),
                          SampleOrder::sequential(), 3, /*rank=*/1,
                          reinterpret_cast<uint8_t *>(out.data()))
                  .isOk());
  // Samples 14 % 6 = 2 and 3.
  EXPECT_EQ(out, std::vector<float>({-1, 3, 2, 2}));
}

TEST(ExecutorTest, WorldSizeMismatchIsAnError) {
  LocalCommunicator world;
  auto s = Session::create(makeLinearRegressionPlan(2, 4, 2, 1, 0.1, kW0), world,
                           "two.loomplan");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.status().message(),
            "two.loomplan: plan is for 2 rank(s) but 1 were launched; run with "
            "mpirun -np 2");
}

TEST(ArenaTest, AlignedZeroedAndSized) {
  for (int64_t bytes : {0, 1, 63, 64, 1000, 1 << 20}) {
    StatusOr<Arena> a = Arena::allocate(bytes);
    ASSERT_TRUE(a.isOk());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % Arena::kAlignment, 0u);
    EXPECT_EQ(a->size(), bytes);
    for (int64_t i = 0; i < bytes; ++i)
      ASSERT_EQ(a->data()[i], 0);
  }
  EXPECT_FALSE(Arena::allocate(-1).isOk());
}

TEST(ArenaTest, ExecutorBuffersLiveInOneArena) {
  LocalCommunicator world;
  plan::Plan p = makeLinearRegressionPlan(1, 4, 2, 1, 0.1, kW0);
  auto exec = Executor::create(p, world);
  ASSERT_TRUE(exec.isOk());
  const Executor &e = **exec;
  EXPECT_EQ(e.arenaBytes(), p.programs(0).arena_bytes());
  const uint8_t *base = e.bufferData(*e.findBuffer(0));
  for (const plan::Buffer &b : p.programs(0).buffers()) {
    const uint8_t *d = e.bufferData(b);
    EXPECT_EQ(d - base, b.offset());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 64, 0u);
  }
  // The parameter was initialised from its data.
  HostTensor w = e.readBuffer(*e.findBufferByName("W"));
  EXPECT_EQ(w.toF32(), kW0);
}

// Pipeline plans mark each instruction with its micro-batch (1 + j) and
// whether it is backward; a micro-batch is in flight from its first forward
// instruction to its last backward one, and a step reports the most at
// once. Where the marks sit does not change what the instructions compute.
TEST(ExecutorTest, CountsMicroBatchesInFlight) {
  LocalCommunicator world;
  auto inFlight = [&](std::vector<std::pair<int32_t, bool>> marks) {
    plan::Plan p = makeLinearRegressionPlan(1, 4, 2, 1, 0.1, kW0);
    plan::Program &prog = *p.mutable_programs(0);
    EXPECT_GE(prog.instructions_size(), static_cast<int>(marks.size()));
    for (size_t i = 0; i < marks.size(); ++i) {
      prog.mutable_instructions(i)->set_micro_batch(marks[i].first);
      prog.mutable_instructions(i)->set_backward(marks[i].second);
    }
    auto exec = Executor::create(p, world);
    EXPECT_TRUE(exec.isOk()) << exec.status().message();
    if (!exec.isOk())
      return int64_t(-1);
    Status ran = (**exec).runStep(0);
    EXPECT_TRUE(ran.isOk()) << ran.message();
    return (**exec).microBatchesInFlight();
  };
  // F1 F2 B1 B2: both at once (GPipe's order).
  EXPECT_EQ(inFlight({{1, false}, {2, false}, {1, true}, {2, true}}), 2);
  // F1 B1 F2 B2: one at a time.
  EXPECT_EQ(inFlight({{1, false}, {1, true}, {2, false}, {2, true}}), 1);
  // Unmarked plans hold none.
  EXPECT_EQ(inFlight({}), 0);
}

TEST(ExecutorTest, ParameterWithoutStoredValueNeedsRandomInit) {
  LocalCommunicator world;
  plan::Plan p =
      makeLinearRegressionPlan(1, 4, 3, 2, 0.1, std::vector<float>(6, 0.5f));
  plan::Buffer *w = p.mutable_programs(0)->mutable_buffers(2);
  ASSERT_EQ(w->binding(), "W");
  w->clear_data();
  w->mutable_init_rule()->set_std(0.02);
  auto missing = Executor::create(p, world, "p.loomplan");
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().message(),
            "p.loomplan: parameter 'W' has no stored value (planned with "
            "loomc --no-weights); pass --init random:SEED");

  ParameterInit init{/*random=*/true, /*seed=*/7};
  auto exec = Executor::create(p, world, "p.loomplan", nullptr, init);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  std::vector<float> want(6);
  fillByInitRule(w->init_rule(), 7, "W", {3, 2}, {0, 0}, {3, 2}, want.data());
  EXPECT_EQ((*exec)->readBuffer(*(*exec)->findBufferByName("W")).toF32(), want);

  // Random init also replaces stored values; a shard takes its slice.
  plan::Plan stored =
      makeLinearRegressionPlan(1, 4, 3, 2, 0.1, std::vector<float>(6, 0.5f));
  plan::Buffer *sw = stored.mutable_programs(0)->mutable_buffers(2);
  sw->mutable_init_rule()->set_std(0.02);
  sw->clear_global_shape();
  sw->clear_shard_offset();
  for (int64_t d : {6, 2})
    sw->add_global_shape(d);
  for (int64_t d : {3, 0})
    sw->add_shard_offset(d);
  auto shard = Executor::create(stored, world, "p.loomplan", nullptr, init);
  ASSERT_TRUE(shard.isOk()) << shard.status().message();
  std::vector<float> whole(12);
  fillByInitRule(sw->init_rule(), 7, "W", {6, 2}, {0, 0}, {6, 2}, whole.data());
  EXPECT_EQ((*shard)->readBuffer(*(*shard)->findBufferByName("W")).toF32(),
            std::vector<float>(whole.begin() + 6, whole.end()));
}

} // namespace
