//===- CudaAttentionTest.cpp - Flash attention vs the CPU kernel -*- C++
//-*-===//
//
// Forward and backward, causal and not, sequence lengths that are not
// multiples of the 32-row tiles, head dims 32, 64 and 128 (both kernel
// instantiations), different query and key lengths, a value head dim other
// than the query's, and one larger case. All skip without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace loom::runtime::test {
namespace {

class CudaAttention : public ::testing::Test {
protected:
  void SetUp() override { LOOM_REQUIRE_CUDA(); }
  std::mt19937 rng{777};
  HostTensor rand(const std::vector<int64_t> &shape, float lo = -1,
                  float hi = 1) {
    return f32(shape, randomFloats(numElements(shape), rng, lo, hi));
  }

  /// attention and attention_grad on [b, h, sq, d] x [b, h, sk, d] x
  /// [b, h, sk, dv], both backends.
  void check(int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d,
             int64_t dv, bool causal, double atol = 2e-5, double rtol = 1e-4) {
    SCOPED_TRACE(::testing::Message()
                 << "b=" << b << " h=" << h << " sq=" << sq << " sk=" << sk
                 << " d=" << d << " dv=" << dv << " causal=" << causal);
    auto attrs = [&](plan::Instruction &i) {
      setF(i, "scale", 1.0 / std::sqrt(static_cast<double>(d)));
      if (causal)
        setI(i, "causal", 1);
    };
    // Scores of a few units, so the softmax is neither flat nor one-hot.
    HostTensor q = rand({b, h, sq, d}, -2, 2), k = rand({b, h, sk, d}, -2, 2),
               v = rand({b, h, sk, dv});
    expectSameOnCuda("attention", {q, k, v}, {{b, h, sq, dv}}, attrs, {}, 1,
                     atol, rtol);
    HostTensor dO = rand({b, h, sq, dv});
    expectSameOnCuda("attention_grad", {dO, q, k, v},
                     {{b, h, sq, d}, {b, h, sk, d}, {b, h, sk, dv}}, attrs, {},
                     1, 10 * atol, 10 * rtol);
  }
};

TEST_F(CudaAttention, CausalOddLengths) {
  check(2, 3, 37, 37, 64, 64, true);
  check(1, 2, 1, 1, 64, 64, true);
  check(1, 2, 33, 33, 32, 32, true);
}

TEST_F(CudaAttention, NonCausalDifferentLengths) {
  check(2, 2, 37, 37, 64, 64, false);
  check(1, 3, 20, 45, 32, 32, false);
  check(1, 1, 70, 5, 32, 48, false); // Dv != D
}

TEST_F(CudaAttention, HeadDim128) {
  check(1, 2, 70, 70, 128, 128, true);
  check(1, 2, 40, 33, 96, 128, false);
}

TEST_F(CudaAttention, LargerCausal) {
  check(2, 4, 256, 256, 64, 64, true, 5e-5, 2e-4);
}

TEST_F(CudaAttention, HeadDimAbove128FailsAtBind) {
  HostTensor q = rand({1, 4, 160}), k = rand({1, 4, 160}),
             v = rand({1, 4, 160});
  auto r = runOpOn(testDevice(), "attention", {q, k, v}, {{1, 4, 160}},
                   [](plan::Instruction &i) { setF(i, "scale", 0.1); });
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("head dims up to 128"), std::string::npos)
      << r.status().message();
}

} // namespace
} // namespace loom::runtime::test
