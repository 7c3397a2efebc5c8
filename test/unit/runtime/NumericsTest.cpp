//===- NumericsTest.cpp - NaN/inf scans, --check-numerics -----------------===//

#include "TestPlans.h"
#include "runtime/Numerics.h"
#include "runtime/Session.h"
#include "runtime/data/DataFeeder.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(NumericsTest, FindsTheFirstNonFiniteF32) {
  // Finite extremes: the largest, the smallest normal and a subnormal.
  std::vector<float> v(3000, 1.0f);
  v[5] = FLT_MAX;
  v[6] = -FLT_MAX;
  v[7] = FLT_MIN;
  v[8] = FLT_MIN / 4;
  EXPECT_FALSE(findNonFinite(v.data(), v.size()));
  // In the second and the third block of the scan: the first one wins.
  v[2500] = NAN;
  v[1500] = -kInf;
  std::optional<NonFinite> hit = findNonFinite(v.data(), v.size());
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->index, 1500);
  EXPECT_FALSE(hit->nan);
  EXPECT_STREQ(nonFiniteName(*hit), "-inf");
  // findNan passes over infinities.
  EXPECT_EQ(findNan(v.data(), v.size())->index, 2500);
  v[1500] = kInf;
  EXPECT_STREQ(nonFiniteName(*findNonFinite(v.data(), v.size())), "inf");
  v[1500] = 0;
  hit = findNonFinite(v.data(), v.size());
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->index, 2500);
  EXPECT_TRUE(hit->nan);
  EXPECT_STREQ(nonFiniteName(*hit), "nan");
  // A negative NaN, and elements past `n` are not read.
  v[3] = -NAN;
  EXPECT_EQ(findNonFinite(v.data(), 4)->index, 3);
  EXPECT_STREQ(nonFiniteName(*findNonFinite(v.data(), 4)), "nan");
  EXPECT_FALSE(findNonFinite(v.data(), 3));
  EXPECT_FALSE(findNonFinite(v.data(), 0));
  v[2500] = kInf;
  v[3] = 0;
  EXPECT_FALSE(findNan(v.data(), v.size()));
}

TEST(NumericsTest, FindsTheFirstNonFiniteBf16) {
  // 0x7f7f is bf16's largest finite value, 0x0001 a subnormal; 0x7f80 is
  // +inf, 0xff80 -inf, 0x7fc0 and 0xffc1 NaNs.
  std::vector<uint16_t> v = {0x3f80, 0x7f7f, 0xff7f, 0x0001};
  EXPECT_FALSE(findNonFiniteBf16(v.data(), v.size()));
  EXPECT_FALSE(findNanBf16(v.data(), v.size()));
  for (uint16_t bits : {0x7f80, 0xff80, 0x7fc0, 0xffc1}) {
    std::vector<uint16_t> w = v;
    w.push_back(bits);
    std::optional<NonFinite> hit = findNonFiniteBf16(w.data(), w.size());
    ASSERT_TRUE(hit) << std::hex << bits;
    EXPECT_EQ(hit->index, 4);
    bool nan = (bits & 0x7f) != 0;
    EXPECT_EQ(hit->nan, nan) << std::hex << bits;
    EXPECT_EQ(hit->negative, (bits & 0x8000) != 0) << std::hex << bits;
    EXPECT_EQ(findNanBf16(w.data(), w.size()).has_value(), nan);
  }
}

TEST(NumericsTest, SampleRanges) {
  EXPECT_EQ(sampleRangeText(56, 8, 1024), "samples 56..63");
  EXPECT_EQ(sampleRangeText(1030, 8, 1024), "samples 6..13");
  EXPECT_EQ(sampleRangeText(60, 8, 64), "samples 60..63, 0..3");
  EXPECT_EQ(sampleRangeText(63, 2, 64), "samples 63, 0");
  EXPECT_EQ(sampleRangeText(7, 1, 10), "sample 7");
  EXPECT_EQ(sampleRangeText(8, 64, 32), "samples 0..31");
  EXPECT_EQ(sampleRangeText(0, 4, 1), "sample 0");
}

// 6 samples of 2 features, 1 output, fed 2 a step (TestPlans.h's plan).
const std::vector<float> kX = {1, 2, 0, 1, -1, 3, 2, 2, 0.5, -1, 1, 0};
const std::vector<float> kY = {1, 0, -2, 3, 1, 0.5};

std::unique_ptr<Session> makeSession(LocalCommunicator &world,
                                     const std::vector<float> &w0,
                                     const std::vector<float> &x = kX,
                                     int64_t batch = 2) {
  StatusOr<std::unique_ptr<Session>> s = Session::create(
      makeLinearRegressionPlan(1, batch, 2, 1, 0.01, w0), world, "lr.loomplan");
  EXPECT_TRUE(s.isOk()) << s.status().message();
  if (!s.isOk())
    return nullptr;
  EXPECT_TRUE((*s)->attachData("x", HostTensor::fromF32({6, 2}, x)).isOk());
  EXPECT_TRUE(
      (*s)->attachData("target", HostTensor::fromF32({6, 1}, kY)).isOk());
  return std::move(s).value();
}

// Weights of 1e20 keep `y` finite (about 3e20) and overflow its square in
// `mse`, the plan's instruction 1; the all_reduce and scale after it copy
// the inf, but the first writer is what is named.
TEST(CheckNumericsTest, NamesTheFirstInstructionThatWroteInf) {
  LocalCommunicator world;
  auto session = makeSession(world, {1e20f, 1e20f});
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->runStep(0).isOk());
  EXPECT_TRUE(std::isinf(*session->loss()));
  EXPECT_FALSE(session->numericsFault()) << "nothing is scanned when off";

  session->setCheckNumerics(true);
  ASSERT_TRUE(session->runStep(0).isOk());
  const std::optional<NumericsFault> &fault = session->numericsFault();
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->position, 2);
  EXPECT_EQ(fault->message, "step 1: instruction 1 'mse' (ONNX node 'loss') "
                            "wrote inf to buffer 'local_loss' at element 0");
}

// Instructions loomc adds (the loss, the optimizer) carry an MLIR location,
// not an ONNX node name: it is shown as it is.
TEST(CheckNumericsTest, ShowsALocationThatIsNoOnnxNode) {
  plan::Plan p = makeLinearRegressionPlan(1, 2, 2, 1, 0.01, {1e20f, 1e20f});
  p.mutable_programs(0)->mutable_instructions(1)->set_loc(
      "loc(\"lr.onnx\":0:0)");
  LocalCommunicator world;
  auto session = Session::create(p, world);
  ASSERT_TRUE(session.isOk()) << session.status().message();
  ASSERT_TRUE(
      (*session)->attachData("x", HostTensor::fromF32({6, 2}, kX)).isOk());
  ASSERT_TRUE(
      (*session)->attachData("target", HostTensor::fromF32({6, 1}, kY)).isOk());
  (*session)->setCheckNumerics(true);
  ASSERT_TRUE((*session)->runStep(0).isOk());
  ASSERT_TRUE((*session)->numericsFault());
  EXPECT_EQ((*session)->numericsFault()->message,
            "step 1: instruction 1 'mse' (at loc(\"lr.onnx\":0:0)) wrote inf "
            "to buffer 'local_loss' at element 0");
}

// A NaN in sample 3 (element 1) is read by step 2 (samples 2..3); the data
// is blamed, not the matmul that reads it.
TEST(CheckNumericsTest, NamesTheDataSample) {
  std::vector<float> x = kX;
  x[3 * 2 + 1] = NAN;
  LocalCommunicator world;
  auto session = makeSession(world, {0.5f, -1.0f}, x);
  ASSERT_TRUE(session);
  session->setCheckNumerics(true);
  ASSERT_TRUE(session->runStep(0).isOk());
  EXPECT_FALSE(session->numericsFault());
  ASSERT_TRUE(session->runStep(1).isOk());
  ASSERT_TRUE(session->numericsFault());
  EXPECT_EQ(session->numericsFault()->position, 0);
  EXPECT_EQ(session->numericsFault()->message,
            "step 2: the data 'x' has nan in sample 3 (element 1 of the "
            "sample)");
  EXPECT_TRUE(std::isnan(*session->loss()));
}

// A NaN initial weight is named before the first instruction; on the next
// step the weights were written by checked instructions, so the matmul
// that now reads a NaN weight and writes NaN is named.
TEST(CheckNumericsTest, NamesANonFiniteInitialValue) {
  LocalCommunicator world;
  auto session = makeSession(world, {NAN, 1.0f});
  ASSERT_TRUE(session);
  session->setCheckNumerics(true);
  ASSERT_TRUE(session->runStep(0).isOk());
  ASSERT_TRUE(session->numericsFault());
  EXPECT_EQ(session->numericsFault()->position, 0);
  EXPECT_EQ(session->numericsFault()->message,
            "step 1: parameter buffer 'W' holds nan at element 0 before the "
            "first instruction (its initial value)");
  ASSERT_TRUE(session->runStep(1).isOk());
  ASSERT_TRUE(session->numericsFault());
  EXPECT_EQ(session->numericsFault()->message,
            "step 2: instruction 0 'matmul' (ONNX node 'linear') wrote nan to "
            "buffer 'y' at element 0");
}

/// A forward plan adding the constant mask [-inf, 0] to `x` [2, 2], then
/// `exp` (finite: 0 where masked); with `mulByZero`, also the masked sum
/// times the zero constant: -inf * 0 is NaN.
plan::Plan makeMaskPlan(bool mulByZero) {
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  int32_t x = addBuffer(prog, "x", plan::INPUT, {2, 2});
  buffer(prog, x).set_binding("x");
  int32_t mask = addBuffer(prog, "mask", plan::CONSTANT, {2});
  setData(buffer(prog, mask), {-std::numeric_limits<float>::infinity(), 0});
  int32_t zero = addBuffer(prog, "zero", plan::CONSTANT, {2});
  setData(buffer(prog, zero), {0, 0});
  int32_t masked = addBuffer(prog, "masked", plan::TEMPORARY, {2, 2});
  int32_t y = addBuffer(prog, "y", plan::OUTPUT, {2, 2});
  buffer(prog, y).set_binding("y");
  addInst(prog, "add", {x, mask}, {masked}, "/attn/Add");
  addInst(prog, "exp", {masked}, {y}, "/attn/Exp");
  if (mulByZero) {
    int32_t z = addBuffer(prog, "z", plan::OUTPUT, {2, 2});
    buffer(prog, z).set_binding("z");
    addInst(prog, "mul", {masked, zero}, {z}, "/attn/Mul");
  }
  return p;
}

// Infinities from a constant (an attention mask) are not faults, nor those
// that instructions reading one write; a NaN made from them is.
TEST(CheckNumericsTest, InfinitiesFromAMaskAreNotFaults) {
  for (bool mulByZero : {false, true}) {
    LocalCommunicator world;
    auto session = Session::create(makeMaskPlan(mulByZero), world);
    ASSERT_TRUE(session.isOk()) << session.status().message();
    ASSERT_TRUE((*session)
                    ->attachData("x", HostTensor::fromF32({2, 2}, {1, 2, 3, 4}))
                    .isOk());
    (*session)->setCheckNumerics(true);
    for (int64_t step = 0; step < 2; ++step) {
      ASSERT_TRUE((*session)->runStep(step).isOk());
      const std::optional<NumericsFault> &fault = (*session)->numericsFault();
      if (!mulByZero) {
        EXPECT_FALSE(fault) << fault->message;
        continue;
      }
      ASSERT_TRUE(fault);
      EXPECT_EQ(fault->message, "step " + std::to_string(step + 1) +
                                    ": instruction 2 'mul' (ONNX node "
                                    "'/attn/Mul') wrote nan to buffer 'z' at "
                                    "element 0");
    }
  }
}

// Without a mask among its inputs, an instruction that writes an infinity is
// named, with its sign: x + x overflows to -inf where x is -3e38.
TEST(CheckNumericsTest, NamesTheSignOfAnInfinity) {
  plan::Plan p = makeMaskPlan(false);
  plan::Instruction &add = *p.mutable_programs(0)->mutable_instructions(0);
  add.set_inputs(1, add.inputs(0));
  LocalCommunicator world;
  auto session = Session::create(p, world);
  ASSERT_TRUE(session.isOk()) << session.status().message();
  ASSERT_TRUE(
      (*session)
          ->attachData("x", HostTensor::fromF32({2, 2}, {1, -3e38f, 3, 4}))
          .isOk());
  (*session)->setCheckNumerics(true);
  ASSERT_TRUE((*session)->runStep(0).isOk());
  ASSERT_TRUE((*session)->numericsFault());
  EXPECT_EQ((*session)->numericsFault()->message,
            "step 1: instruction 0 'add' (ONNX node '/attn/Add') wrote -inf "
            "to buffer 'masked' at element 1");
}

TEST(CheckNumericsTest, FiniteStepsHaveNoFault) {
  LocalCommunicator world;
  auto session = makeSession(world, {0.5f, -1.0f});
  ASSERT_TRUE(session);
  session->setCheckNumerics(true);
  for (int64_t step = 0; step < 4; ++step) {
    ASSERT_TRUE(session->runStep(step).isOk());
    EXPECT_FALSE(session->numericsFault()) << session->numericsFault()->message;
  }
}

TEST(CheckNumericsTest, StepSamplesNameWhatTheGlobalBatchReads) {
  LocalCommunicator world;
  auto two = makeSession(world, {0.5f, -1.0f});
  ASSERT_TRUE(two);
  EXPECT_EQ(two->stepSamples(0), "samples 0..1 of the data");
  EXPECT_EQ(two->stepSamples(4), "samples 2..3 of the data");
  auto four = makeSession(world, {0.5f, -1.0f}, kX, 4);
  ASSERT_TRUE(four);
  EXPECT_EQ(four->stepSamples(1), "samples 4..5, 0..1 of the data");
  // Arrays of different lengths are not one data set.
  EXPECT_FALSE(
      four->attachData("target", HostTensor::fromF32({4, 1}, {1, 2, 3, 4}))
          .isOk());
  // A shuffled order lists the samples it reads: step 1 reads places 4..7,
  // the last two of epoch 0 and the first two of epoch 1.
  SampleOrder order = SampleOrder::shuffled(7);
  four->setSampleOrder(order);
  std::string want = "samples ";
  for (int64_t p = 4; p < 8; ++p)
    want += (p > 4 ? ", " : "") + std::to_string(order.sample(p, 6));
  EXPECT_EQ(four->stepSamples(1), want + " (4 of epoch 0 of the order of seed 7)");
}

} // namespace
