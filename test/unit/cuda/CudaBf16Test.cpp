//===- CudaBf16Test.cpp - Kernels on bf16 storage vs the CPU in fp32 -*- C++
//-*-===//
//
// The operand storage of `loomc --precision bf16`: activations and their
// gradients bf16, parameters, optimizer state and the loss f32. Each kernel
// runs on the GPU with that storage and is compared with the CPU fp32
// kernel on the same values (bf16 inputs rounded first), within bf16
// tolerances. Kernels are bound directly (the executor's plan validation
// takes f32 and i64 only). All skip without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace loom::runtime::test {
namespace {

constexpr plan::DType F = plan::F32, B = plan::BF16, I = plan::I64;

class CudaBf16 : public ::testing::Test {
protected:
  void SetUp() override { LOOM_REQUIRE_CUDA(); }
  std::mt19937 rng{99};
  HostTensor rand(const std::vector<int64_t> &shape, float lo = -1,
                  float hi = 1) {
    return f32(shape, randomFloats(numElements(shape), rng, lo, hi));
  }
};

TEST_F(CudaBf16, ElementwiseWithF32Parameters) {
  // A bias add: bf16 activations, f32 bias, bf16 out.
  expectBf16MatchesCpu("add", {rand({7, 33}), rand({33})}, {B, F}, {{7, 33}},
                       {B});
  for (int approx = 0; approx < 2; ++approx) {
    auto attrs = [&](plan::Instruction &i) {
      if (approx)
        setI(i, "approximate", 1);
    };
    expectBf16MatchesCpu("gelu", {rand({5, 77}, -4, 4)}, {B}, {{5, 77}}, {B},
                         attrs);
    expectBf16MatchesCpu("gelu_grad", {rand({5, 77}), rand({5, 77}, -4, 4)},
                         {B, B}, {{5, 77}}, {B}, attrs);
  }
  expectBf16MatchesCpu("scale", {rand({100})}, {B}, {{100}}, {B},
                       [](plan::Instruction &i) { setF(i, "factor", 0.125); });
  // Parameter gradients stay f32: sum_to of a bf16 gradient.
  expectBf16MatchesCpu("sum_to", {rand({64, 33})}, {B}, {{33}}, {F}, {}, 1e-4,
                       1e-3);
}

TEST_F(CudaBf16, NormsAndSoftmax) {
  auto attrs = [](plan::Instruction &i) {
    setI(i, "axis", 1);
    setF(i, "epsilon", 1e-5);
  };
  HostTensor x = rand({9, 300}, -2, 2), scale = rand({300}), bias = rand({300}),
             dy = rand({9, 300});
  expectBf16MatchesCpu("layer_norm", {x, scale, bias}, {B, F, F}, {{9, 300}},
                       {B}, attrs);
  expectBf16MatchesCpu("layer_norm_grad", {dy, x, scale}, {B, B, F},
                       {{9, 300}, {300}, {300}}, {B, F, F}, attrs, 2e-2, 2e-2);
  expectBf16MatchesCpu("softmax", {rand({6, 50}, -5, 5)}, {B}, {{6, 50}}, {B},
                       [](plan::Instruction &i) { setI(i, "axis", 1); });
}

TEST_F(CudaBf16, MatmulAndLinear) {
  // bf16 x bf16 into bf16 and into f32 (fp32 accumulate either way).
  HostTensor a = rand({37, 64}), b = rand({64, 29});
  expectBf16MatchesCpu("matmul", {a, b}, {B, B}, {{37, 29}}, {B});
  expectBf16MatchesCpu("matmul", {a, b}, {B, B}, {{37, 29}}, {F}, {}, 1e-4,
                       1e-3);
  expectBf16MatchesCpu("linear", {rand({3, 5, 64}), rand({40, 64}), rand({40})},
                       {B, B, F}, {{3, 5, 40}}, {B}, [](plan::Instruction &i) {
                         setI(i, "transpose_weight", 1);
                       });
  expectBf16MatchesCpu("batch_matmul",
                       {rand({2, 3, 17, 32}), rand({2, 3, 32, 9})}, {B, B},
                       {{2, 3, 17, 9}}, {B});
}

TEST_F(CudaBf16, LayoutAndGather) {
  expectBf16MatchesCpu("transpose", {rand({2, 37, 3, 16})}, {B},
                       {{2, 3, 37, 16}}, {B}, [](plan::Instruction &i) {
                         setInts(i, "permutation", {0, 2, 1, 3});
                       });
  expectBf16MatchesCpu("transpose", {rand({33, 65})}, {B}, {{65, 33}}, {B},
                       [](plan::Instruction &i) {
                         setInts(i, "permutation", {1, 0});
                       });
  auto qkv = [](plan::Instruction &i) {
    setInts(i, "axes", {2});
    setInts(i, "starts", {48});
    setInts(i, "ends", {96});
    setInts(i, "steps", {1});
  };
  expectBf16MatchesCpu("slice", {rand({2, 5, 144})}, {B}, {{2, 5, 48}}, {B},
                       qkv);
  expectBf16MatchesCpu("slice_grad", {rand({2, 5, 48})}, {B}, {{2, 5, 144}},
                       {B}, qkv);
  // The embedding: f32 table, bf16 activations; its gradient back to f32.
  std::vector<int64_t> ids(21);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = (i * 7) % 10;
  auto axis0 = [](plan::Instruction &i) { setI(i, "axis", 0); };
  expectBf16MatchesCpu("gather", {rand({10, 24}), i64({3, 7}, ids)}, {F, I},
                       {{3, 7, 24}}, {B}, axis0);
  expectBf16MatchesCpu("gather_grad", {rand({3, 7, 24}), i64({3, 7}, ids)},
                       {B, I}, {{10, 24}}, {F}, axis0, 1e-4, 1e-3);
}

TEST_F(CudaBf16, Attention) {
  for (int causal = 0; causal < 2; ++causal) {
    auto attrs = [&](plan::Instruction &i) {
      setF(i, "scale", 0.125);
      if (causal)
        setI(i, "causal", 1);
    };
    HostTensor q = rand({2, 2, 37, 64}, -2, 2), k = rand({2, 2, 37, 64}, -2, 2),
               v = rand({2, 2, 37, 64}), dO = rand({2, 2, 37, 64});
    // The default (tc) path rounds P to bf16 before P V.
    expectBf16MatchesCpu("attention", {q, k, v}, {B, B, B}, {{2, 2, 37, 64}},
                         {B}, attrs, 2e-2, 2e-2);
    expectBf16MatchesCpu("attention_grad", {dO, q, k, v}, {B, B, B, B},
                         {{2, 2, 37, 64}, {2, 2, 37, 64}, {2, 2, 37, 64}},
                         {B, B, B}, attrs, 3e-2, 3e-2);
  }
}

TEST_F(CudaBf16, CrossEntropyAndAdamW) {
  std::vector<int64_t> t(19);
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = (i * 5) % 50;
  HostTensor logits = rand({19, 50}, -4, 4);
  expectBf16MatchesCpu("cross_entropy", {logits, i64({19}, t)}, {B, I}, {{}},
                       {F}, {}, 1e-5, 1e-4);
  expectBf16MatchesCpu("cross_entropy_grad", {logits, i64({19}, t)}, {B, I},
                       {{19, 50}}, {B}, {}, 1e-4, 1e-2);
  // f32 parameters and moments, a bf16 gradient.
  int64_t n = 1000;
  std::vector<float> zeros(n, 0);
  auto adamw = [](plan::Instruction &i) {
    setF(i, "lr", 1e-3);
    setF(i, "weight_decay", 0.01);
  };
  expectBf16MatchesCpu(
      "adamw", {rand({n}), rand({n}), f32({n}, zeros), f32({n}, zeros)},
      {F, B, F, F}, {{n}, {n}, {n}}, {F, F, F}, adamw, 1e-6, 1e-4, {0, 2, 3});
}

TEST_F(CudaBf16, Convert) {
  std::vector<int64_t> ids{-3, 0, 7, 300, 65537};
  auto r = runOpDirect("convert", {i64({5}, ids)}, {I}, {{5}}, {B});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  std::vector<float> got = (*r)[0].toF32();
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(got[i], bf16ToFloat(floatToBf16(static_cast<float>(ids[i]))));
  HostTensor x = rand({300}, -100, 100);
  auto down = runOpDirect("convert", {x}, {F}, {{300}}, {B});
  ASSERT_TRUE(down.isOk()) << down.status().message();
  EXPECT_EQ((*down)[0].bytes, roundedToBf16(x).bytes); // round to nearest even
  auto up = runOpDirect("convert", {x}, {B}, {{300}}, {F});
  ASSERT_TRUE(up.isOk()) << up.status().message();
  EXPECT_EQ((*up)[0].bytes, roundedToBf16(x).bytes);
}

TEST_F(CudaBf16, UnsupportedCombinationsFailAtBind) {
  auto mixed = runOpDirect("matmul", {rand({4, 8}), rand({8, 3})}, {F, B},
                           {{4, 3}}, {F});
  ASSERT_FALSE(mixed.isOk());
  EXPECT_NE(mixed.status().message().find("f32 and a bf16 operand"),
            std::string::npos)
      << mixed.status().message();
  auto reduce =
      runOpDirect("all_reduce", {rand({8})}, {B}, {{8}}, {B},
                  [](plan::Instruction &i) { setInts(i, "axes", {0}); });
  ASSERT_FALSE(reduce.isOk());
  EXPECT_NE(reduce.status().message().find("is bf16; the CUDA kernel of "
                                           "'all_reduce' takes f32"),
            std::string::npos)
      << reduce.status().message();
  auto attn = runOpDirect("attention",
                          {rand({1, 4, 8}), rand({1, 4, 8}), rand({1, 4, 8})},
                          {B, F, B}, {{1, 4, 8}}, {B},
                          [](plan::Instruction &i) { setF(i, "scale", 1.0); });
  ASSERT_FALSE(attn.isOk());
  EXPECT_NE(attn.status().message().find("input 1"), std::string::npos)
      << attn.status().message();
}

} // namespace
} // namespace loom::runtime::test
