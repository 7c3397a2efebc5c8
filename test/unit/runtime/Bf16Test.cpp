//===- Bf16Test.cpp - bf16 rounding, conversion and the fp32 wrapper -----===//
//
// The rounding helpers against exhaustive and random checks, the `convert`
// kernel between i64, f32 and bf16, and instructions on BF16 buffers run by
// the CPU backend's widening wrapper (checked against the fp32 kernel on
// rounded inputs, rounded once at the end), including in place; and the
// validator's rules for where bf16 may appear.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/Bf16.h"
#include "KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace loom::runtime::test {
namespace {

using cpu::bf16ToFloat;
using cpu::floatToBf16;

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// `f` rounded to bf16 and back.
float roundBf16(float f) { return bf16ToFloat(floatToBf16(f)); }

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xc000);
  EXPECT_EQ(floatToBf16(0.0f), 0x0000);
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
  // Halfway cases go to the even neighbour.
  EXPECT_EQ(floatToBf16(floatOf(0x3f808000u)), 0x3f80);
  EXPECT_EQ(floatToBf16(floatOf(0x3f818000u)), 0x3f82);
  // Just above and below halfway.
  EXPECT_EQ(floatToBf16(floatOf(0x3f808001u)), 0x3f81);
  EXPECT_EQ(floatToBf16(floatOf(0x3f807fffu)), 0x3f80);
  // The largest floats round up to infinity; infinities stay.
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(floatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  // Subnormals round like normal numbers.
  EXPECT_EQ(floatToBf16(floatOf(0x00018000u)), 0x0002);
}

TEST(Bf16Test, NanStaysNan) {
  // A NaN whose payload sits only in the dropped bits must not become inf.
  float nan = floatOf(0x7f800001u);
  uint16_t h = floatToBf16(nan);
  EXPECT_TRUE(std::isnan(bf16ToFloat(h)));
  EXPECT_TRUE(std::isnan(roundBf16(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(
      std::signbit(roundBf16(-std::numeric_limits<float>::quiet_NaN())));
}

TEST(Bf16Test, EveryBf16RoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = bf16ToFloat(static_cast<uint16_t>(h));
    EXPECT_EQ(bitsOf(f), h << 16);
    if (!std::isnan(f))
      ASSERT_EQ(floatToBf16(f), h) << "bf16 bits " << h;
  }
}

TEST(Bf16Test, RandomFloatsRoundToANearestNeighbour) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 100000; ++i) {
    float f = floatOf(bits(rng));
    if (!std::isfinite(f) || std::fabs(f) > 3.3e38f)
      continue;
    double r = roundBf16(f);
    uint32_t down = bitsOf(f) & 0xffff0000u;
    double lo = floatOf(down), hi = floatOf(down + 0x10000u);
    double best = std::min(std::fabs(f - lo), std::fabs(f - hi));
    ASSERT_EQ(std::fabs(f - r), best) << f;
  }
}

TEST(Bf16Test, WidenAndNarrowArrays) {
  std::mt19937 rng(4);
  // Large enough for the threaded path.
  std::vector<float> x = randomFloats(100003, rng, -1000, 1000);
  std::vector<uint16_t> h(x.size());
  std::vector<float> back(x.size());
  cpu::narrowToBf16(x.data(), h.data(), x.size());
  cpu::widenBf16(h.data(), back.data(), h.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(back[i], roundBf16(x[i]));
}

/// A 1-rank plan whose CONSTANT f32 inputs are converted to bf16, then
/// `op` on the bf16 values (bf16 outputs), then each output converted to
/// f32 for reading.
struct Bf16Plan {
  plan::Plan plan = makePlan(1, false);
  plan::Program *prog;
  std::vector<int32_t> bf16Ins, bf16Outs, f32Outs;

  Bf16Plan(const std::string &op, const std::vector<HostTensor> &inputs,
           const std::vector<std::vector<int64_t>> &outShapes) {
    prog = plan.add_programs();
    prog->add_ranks(0);
    prog->set_loss_buffer(-1);
    for (size_t i = 0; i < inputs.size(); ++i) {
      int32_t c = addBuffer(*prog, "c" + std::to_string(i), plan::CONSTANT,
                            inputs[i].shape);
      buffer(*prog, c).set_data(
          std::string(inputs[i].bytes.begin(), inputs[i].bytes.end()));
      int32_t h = addBuffer(*prog, "h" + std::to_string(i), plan::TEMPORARY,
                            inputs[i].shape, plan::BF16);
      addInst(*prog, "convert", {c}, {h});
      bf16Ins.push_back(h);
    }
    for (size_t i = 0; i < outShapes.size(); ++i)
      bf16Outs.push_back(addBuffer(*prog, "y" + std::to_string(i),
                                   plan::TEMPORARY, outShapes[i], plan::BF16));
    addInst(*prog, op, bf16Ins, bf16Outs, "test_op");
    for (size_t i = 0; i < outShapes.size(); ++i) {
      f32Outs.push_back(addBuffer(*prog, "f" + std::to_string(i),
                                  plan::TEMPORARY, outShapes[i]));
      addInst(*prog, "convert", {bf16Outs[i]}, {f32Outs[i]});
    }
  }

  plan::Instruction &opInst() {
    return *prog->mutable_instructions(static_cast<int>(bf16Ins.size()));
  }

  StatusOr<std::vector<std::vector<float>>> run() {
    LOOM_RETURN_IF_ERROR(validatePlan(plan, "test"));
    LocalCommunicator world;
    LOOM_ASSIGN_OR_RETURN(auto exec, Executor::create(plan, world, "test"));
    LOOM_RETURN_IF_ERROR(exec->runStep(0));
    std::vector<std::vector<float>> out;
    for (int32_t id : f32Outs)
      out.push_back(exec->readBuffer(*exec->findBuffer(id)).toF32());
    return out;
  }
};

std::vector<float> rounded(std::vector<float> v) {
  for (float &x : v)
    x = roundBf16(x);
  return v;
}

TEST(Bf16Test, ConvertsBetweenI64F32AndBf16) {
  Bf16Plan p("copy",
             {HostTensor::fromF32({4}, {1.0f, 1.00390625f, 3.14159f, -1e-3f})},
             {{4}});
  auto r = p.run();
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ((*r)[0], rounded({1.0f, 1.00390625f, 3.14159f, -1e-3f}));
  EXPECT_EQ((*r)[0][1], 1.0f); // a tie, to even
  EXPECT_EQ((*r)[0][2], 3.140625f);

  // i64 -> bf16: exact up to 256, then rounded to nearest even.
  plan::Plan ip = makePlan(1, false);
  plan::Program &prog = *ip.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  HostTensor ids = HostTensor::fromI64({4}, {-3, 256, 257, 259});
  int32_t c = addBuffer(prog, "ids", plan::CONSTANT, {4}, plan::I64);
  buffer(prog, c).set_data(std::string(ids.bytes.begin(), ids.bytes.end()));
  int32_t h = addBuffer(prog, "h", plan::TEMPORARY, {4}, plan::BF16);
  int32_t f = addBuffer(prog, "f", plan::TEMPORARY, {4});
  addInst(prog, "convert", {c}, {h});
  addInst(prog, "convert", {h}, {f});
  ASSERT_TRUE(validatePlan(ip, "test").isOk());
  LocalCommunicator world;
  auto exec = Executor::create(ip, world, "test");
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  ASSERT_TRUE((*exec)->runStep(0).isOk());
  EXPECT_EQ((*exec)->readBuffer(*(*exec)->findBuffer(f)).toF32(),
            (std::vector<float>{-3, 256, 256, 260}));
}

TEST(Bf16Test, ConvertRejectsIdentityAndIntegerTargets) {
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  int32_t a = addBuffer(prog, "a", plan::TEMPORARY, {4}, plan::BF16);
  int32_t b = addBuffer(prog, "b", plan::TEMPORARY, {4}, plan::BF16);
  int32_t i = addBuffer(prog, "i", plan::TEMPORARY, {4}, plan::I64);
  addInst(prog, "convert", {a}, {b});
  Status s = validatePlan(p, "test");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("input and output are both bf16"),
            std::string::npos)
      << s.message();
  prog.mutable_instructions(0)->set_outputs(0, i);
  s = validatePlan(p, "test");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("output is i64 from bf16, expected f32"),
            std::string::npos)
      << s.message();
}

TEST(Bf16Test, WrapperRunsTheF32KernelOnRoundedInputs) {
  std::mt19937 rng(5);
  std::vector<float> a = randomFloats(12, rng), b = randomFloats(4, rng);
  Bf16Plan p("add",
             {HostTensor::fromF32({3, 4}, a), HostTensor::fromF32({4}, b)},
             {{3, 4}});
  auto r = p.run();
  ASSERT_TRUE(r.isOk()) << r.status().message();
  std::vector<float> ra = rounded(a), rb = rounded(b), want(12);
  for (int i = 0; i < 12; ++i)
    want[i] = roundBf16(ra[i] + rb[i % 4]);
  EXPECT_EQ((*r)[0], want);
}

TEST(Bf16Test, WrapperMatmulAccumulatesInF32) {
  std::mt19937 rng(6);
  const int m = 7, k = 300, n = 5;
  std::vector<float> a = randomFloats(m * k, rng), b = randomFloats(k * n, rng);
  Bf16Plan p("matmul",
             {HostTensor::fromF32({m, k}, a), HostTensor::fromF32({k, n}, b)},
             {{m, n}});
  auto r = p.run();
  ASSERT_TRUE(r.isOk()) << r.status().message();
  std::vector<float> ra = rounded(a), rb = rounded(b);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int q = 0; q < k; ++q)
        s += double(ra[i * k + q]) * rb[q * n + j];
      // One rounding to bf16 at the end (a bf16 accumulation over 300
      // terms would be off by far more than half an ulp).
      float got = (*r)[0][i * n + j];
      // Bound: half a bf16 ulp (2^-8 relative) plus f32 accumulation; the
      // double reference on the rounded inputs has no rounding of its own.
      EXPECT_NEAR(got, s, std::fabs(s) * (1.0 / 256) + 1e-5) << i << "," << j;
    }
}

TEST(Bf16Test, WrapperMultiOutputAndLossInF32) {
  // cross_entropy: bf16 logits, i64 targets, an f32 scalar loss.
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 0.1f, 0.2f, 3.0f};
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  int32_t c = addBuffer(prog, "c", plan::CONSTANT, {2, 3});
  setData(buffer(prog, c), logits);
  HostTensor t = HostTensor::fromI64({2}, {0, 2});
  int32_t tgt = addBuffer(prog, "t", plan::CONSTANT, {2}, plan::I64);
  buffer(prog, tgt).set_data(std::string(t.bytes.begin(), t.bytes.end()));
  int32_t h = addBuffer(prog, "h", plan::TEMPORARY, {2, 3}, plan::BF16);
  int32_t loss = addBuffer(prog, "loss", plan::TEMPORARY, {});
  addInst(prog, "convert", {c}, {h});
  addInst(prog, "cross_entropy", {h, tgt}, {loss});
  ASSERT_TRUE(validatePlan(p, "test").isOk());
  LocalCommunicator world;
  auto exec = Executor::create(p, world, "test");
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  ASSERT_TRUE((*exec)->runStep(0).isOk());
  float got = (*exec)->readBuffer(*(*exec)->findBuffer(loss)).toF32()[0];
  std::vector<float> r = rounded(logits);
  double want = 0;
  for (int row = 0; row < 2; ++row) {
    double z = 0;
    for (int j = 0; j < 3; ++j)
      z += std::exp(double(r[row * 3 + j]));
    want += std::log(z) - r[row * 3 + (row == 0 ? 0 : 2)];
  }
  // The loss is computed in f32 from the rounded logits: a few f32 ulps of
  // a value near 1 (the double reference moves by ~1e-7 for 1e-7 inputs).
  EXPECT_NEAR(got, want / 2, 1e-6);
}

TEST(Bf16Test, WrapperInPlaceWidensTheOutput) {
  // scale in place on a bf16 buffer: the output is read before it is
  // written, so the wrapper widens it too.
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  int32_t c = addBuffer(prog, "c", plan::CONSTANT, {3});
  setData(buffer(prog, c), {1.5f, -3.0f, 0.1f});
  int32_t h = addBuffer(prog, "h", plan::TEMPORARY, {3}, plan::BF16);
  int32_t f = addBuffer(prog, "f", plan::TEMPORARY, {3});
  addInst(prog, "convert", {c}, {h});
  setF(addInst(prog, "scale", {h}, {h}), "factor", 3.0);
  addInst(prog, "convert", {h}, {f});
  ASSERT_TRUE(validatePlan(p, "test").isOk());
  LocalCommunicator world;
  auto exec = Executor::create(p, world, "test");
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  ASSERT_TRUE((*exec)->runStep(0).isOk());
  EXPECT_EQ((*exec)->readBuffer(*(*exec)->findBuffer(f)).toF32(),
            (std::vector<float>{4.5f, -9.0f, roundBf16(3 * roundBf16(0.1f))}));
}

TEST(Bf16Test, ScratchFitsTheLargestInstruction) {
  Bf16Plan p("add",
             {HostTensor::fromF32({3, 4}, std::vector<float>(12, 1.0f)),
              HostTensor::fromF32({4}, std::vector<float>(4, 1.0f))},
             {{3, 4}});
  std::map<int32_t, const plan::Buffer *> byId;
  for (const plan::Buffer &b : p.prog->buffers())
    byId[b.id()] = &b;
  auto viewOf = [&](const plan::Instruction &inst) {
    OpView v{p.plan, inst, {}, {}};
    for (int32_t id : inst.inputs())
      v.inputs.push_back(byId.at(id));
    for (int32_t id : inst.outputs())
      v.outputs.push_back(byId.at(id));
    return v;
  };
  // Converts handle bf16 themselves; `add` widens 12 + 4 + 12 floats, each
  // operand starting on a 64-byte boundary.
  EXPECT_EQ(cpu::Bf16Scratch::floatsFor(viewOf(p.prog->instructions(0))), 0);
  EXPECT_EQ(cpu::Bf16Scratch::floatsFor(viewOf(p.opInst())), 16 + 16 + 16);
}

TEST(Bf16Test, ValidatorKeepsMasterWeightsF32) {
  // A bf16 parameter.
  plan::Plan p = makeLinearRegressionPlan(1, 4, 3, 1, 0.1, {1, 2, 3});
  plan::Program &prog = *p.mutable_programs(0);
  plan::Buffer *param = nullptr;
  for (plan::Buffer &b : *prog.mutable_buffers())
    if (b.role() == plan::PARAMETER)
      param = &b;
  ASSERT_NE(param, nullptr);
  param->set_dtype(plan::BF16);
  param->set_size_bytes(param->size_bytes() / 2);
  Status s = validatePlan(p, "p.loomplan");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("PARAMETER buffer is bf16; only intermediate "
                             "(TEMPORARY) and CONSTANT buffers may be bf16"),
            std::string::npos)
      << s.message();
}

TEST(Bf16Test, ValidatorRejectsBf16OptimizerOperands) {
  plan::Plan p = makePlan(1, true);
  p.mutable_training()->set_global_batch(4);
  p.mutable_training()->set_tokens_per_sample(1);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  int32_t w = addBuffer(prog, "w", plan::PARAMETER, {4});
  setData(buffer(prog, w), {1, 2, 3, 4});
  int32_t g = addBuffer(prog, "g", plan::TEMPORARY, {4}, plan::BF16);
  int32_t m = addBuffer(prog, "m", plan::OPTIMIZER_STATE, {4});
  int32_t v = addBuffer(prog, "v", plan::OPTIMIZER_STATE, {4});
  buffer(prog, m).set_zeros(true);
  buffer(prog, v).set_zeros(true);
  int32_t loss = addBuffer(prog, "loss", plan::LOSS, {});
  prog.set_loss_buffer(loss);
  addInst(prog, "mse", {w, w}, {loss});
  plan::Instruction &inst = addInst(prog, "adamw", {w, g, m, v}, {w, m, v});
  setF(inst, "lr", 1e-3);
  setF(inst, "beta1", 0.9);
  setF(inst, "beta2", 0.999);
  setF(inst, "eps", 1e-8);
  setF(inst, "weight_decay", 0.01);
  Status s = validatePlan(p, "p.loomplan");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("buffer 1 'g' is bf16, but adamw updates f32 "
                             "master weights"),
            std::string::npos)
      << s.message();
}

} // namespace
} // namespace loom::runtime::test
