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

#include <cstdio>

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

// bf16 through the pack kernels (all operands bf16) and the chunked copy:
// tails, bias rows, head transposes with even and odd D, misaligned slice
// windows, convert of sizes around the pack width.
TEST_F(CudaBf16, PackKernelsAndChunkCopy) {
  for (const char *op : {"add", "sub", "mul"}) {
    expectBf16MatchesCpu(op, {rand({3, 67}), rand({3, 67})}, {B, B}, {{3, 67}},
                         {B});
    expectBf16MatchesCpu(op, {rand({7, 64}), rand({64})}, {B, B}, {{7, 64}},
                         {B});
    expectBf16MatchesCpu(op, {rand({64}), rand({7, 64})}, {B, B}, {{7, 64}},
                         {B});
    expectBf16MatchesCpu(op, {rand({7, 33}), rand({33})}, {B, B}, {{7, 33}},
                         {B});
  }
  for (int64_t n : {1, 9, 1001}) {
    expectBf16MatchesCpu("gelu", {rand({n}, -4, 4)}, {B}, {{n}}, {B});
    expectBf16MatchesCpu("gelu_grad", {rand({n}), rand({n}, -4, 4)}, {B, B},
                         {{n}}, {B});
    HostTensor x = rand({n}, -100, 100);
    auto down = runOpDirect("convert", {x}, {F}, {{n}}, {B});
    ASSERT_TRUE(down.isOk()) << down.status().message();
    EXPECT_EQ((*down)[0].bytes, roundedToBf16(x).bytes);
    auto up = runOpDirect("convert", {x}, {B}, {{n}}, {F});
    ASSERT_TRUE(up.isOk()) << up.status().message();
    EXPECT_EQ((*up)[0].bytes, roundedToBf16(x).bytes);
  }
  for (int64_t d : {64, 4, 5}) {
    expectBf16MatchesCpu("transpose", {rand({2, 9, 3, d})}, {B}, {{2, 3, 9, d}},
                         {B}, [](plan::Instruction &i) {
                           setInts(i, "permutation", {0, 2, 1, 3});
                         });
  }
  for (int64_t start : {0, 3, 8}) {
    auto window = [start](plan::Instruction &i) {
      setInts(i, "axes", {2});
      setInts(i, "starts", {start});
      setInts(i, "ends", {start + 48});
      setInts(i, "steps", {1});
    };
    expectBf16MatchesCpu("slice", {rand({2, 5, 144})}, {B}, {{2, 5, 48}}, {B},
                         window);
    expectBf16MatchesCpu("slice_grad", {rand({2, 5, 48})}, {B}, {{2, 5, 144}},
                         {B}, window);
  }
}

// Per-call times on the GPT-2 124M shapes (bf16), printed, not checked:
// run with --gtest_also_run_disabled_tests to compare with the profile.
TEST_F(CudaBf16, DISABLED_TimingOnGpt2Shapes) {
  auto time = [&](const std::string &name, const std::string &op,
                  const std::vector<HostTensor> &in,
                  const std::vector<plan::DType> &inTypes,
                  const std::vector<int64_t> &out, plan::DType outType,
                  const std::function<void(plan::Instruction &)> &attrs,
                  double mb) {
    double ms = 0;
    auto r = runOpDirect(op, in, inTypes, {out}, {outType}, attrs, {}, 20, &ms);
    ASSERT_TRUE(r.isOk()) << r.status().message();
    std::printf("%-28s %9.1f us  %7.1f MB  %6.2f TB/s\n", name.c_str(),
                ms * 1e3, mb, mb / 1e6 / (ms * 1e-3));
  };
  auto zeros = [](const std::vector<int64_t> &s) {
    return f32(s, std::vector<float>(numElements(s), 0.5f));
  };
  std::vector<int64_t> act{32, 1024, 768}, hid{32, 1024, 3072},
      qkv{32, 1024, 2304}, heads{32, 1024, 12, 64};
  double actMB = 32.0 * 1024 * 768 * 2 / 1e6, hidMB = 4 * actMB;
  time("add [32,1024,768]", "add", {zeros(act), zeros(act)}, {B, B}, act, B, {},
       3 * actMB);
  time("add bias [768]", "add", {zeros(act), zeros({768})}, {B, B}, act, B, {},
       2 * actMB);
  time("gelu [32,1024,3072]", "gelu", {zeros(hid)}, {B}, hid, B, {}, 2 * hidMB);
  time("gelu_grad [32,1024,3072]", "gelu_grad", {zeros(hid), zeros(hid)},
       {B, B}, hid, B, {}, 3 * hidMB);
  time(
      "transpose heads", "transpose", {zeros(heads)}, {B}, {32, 12, 1024, 64},
      B,
      [](plan::Instruction &i) {
        setInts(i, "permutation", {0, 2, 1, 3});
      },
      2 * actMB);
  auto k = [](plan::Instruction &i) {
    setInts(i, "axes", {2});
    setInts(i, "starts", {768});
    setInts(i, "ends", {1536});
    setInts(i, "steps", {1});
  };
  time("slice q/k/v", "slice", {zeros(qkv)}, {B}, act, B, k, 2 * actMB);
  time("slice_grad q/k/v", "slice_grad", {zeros(act)}, {B}, qkv, B, k,
       actMB + 3 * actMB);
  time("convert f32->bf16 [2304,768]", "convert", {zeros({2304, 768})}, {F},
       {2304, 768}, B, {}, 2304.0 * 768 * 6 / 1e6);
}

// --- the packed reduction, norm, softmax and loss kernels -------------------

TEST_F(CudaBf16, SumToDenseRowsSlabs) {
  // Bias gradients: bf16 [rows, cols] into f32 [cols], packs of 8 and
  // scalar slabs.
  expectBf16MatchesCpu("sum_to", {rand({2, 512, 768})}, {B}, {{768}}, {F}, {},
                       1e-4, 1e-3);
  expectBf16MatchesCpu("sum_to", {rand({300, 3072})}, {B}, {{3072}}, {F}, {},
                       1e-4, 1e-3);
  expectBf16MatchesCpu("sum_to", {rand({129, 13})}, {B}, {{13}}, {F}, {}, 1e-4,
                       1e-3);
  expectBf16MatchesCpu("sum_to", {rand({1, 2, 24})}, {B}, {{24}}, {F}, {}, 1e-4,
                       1e-3);
  // Nothing reduced: a conversion (8 packs and a scalar tail), exact.
  expectBf16MatchesCpu("sum_to", {rand({1, 5, 13})}, {B}, {{5, 13}}, {F}, {}, 0,
                       0);
}

TEST_F(CudaBf16, NormWarpRows) {
  auto attrs = [](plan::Instruction &i) {
    setI(i, "axis", 1);
    setF(i, "epsilon", 1e-5);
  };
  // 768 (GPT-2), 1600 (8 packs a lane), 300 (not a multiple of 8: the
  // block kernels), with f32 and with bf16 parameters.
  for (int64_t cols : {768, 1600, 300}) {
    int64_t rows = 41;
    HostTensor x = rand({rows, cols}, -2, 2), scale = rand({cols}),
               bias = rand({cols}), dy = rand({rows, cols});
    expectBf16MatchesCpu("layer_norm", {x, scale, bias}, {B, F, F},
                         {{rows, cols}}, {B}, attrs);
    expectBf16MatchesCpu("layer_norm", {x, scale, bias}, {B, B, B},
                         {{rows, cols}}, {B}, attrs);
    expectBf16MatchesCpu("rms_norm", {x, scale}, {B, F}, {{rows, cols}}, {B},
                         attrs);
    expectBf16MatchesCpu("layer_norm_grad", {dy, x, scale}, {B, B, F},
                         {{rows, cols}, {cols}, {cols}}, {B, F, F}, attrs, 2e-2,
                         2e-2);
    expectBf16MatchesCpu("rms_norm_grad", {dy, x, scale}, {B, B, F},
                         {{rows, cols}, {cols}}, {B, F}, attrs, 2e-2, 2e-2);
  }
}

TEST_F(CudaBf16, CrossEntropyAndSoftmaxLongOddRows) {
  for (auto [rows, classes] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 50257}, {7, 1001}, {1, 16}}) {
    std::vector<int64_t> t(rows);
    for (int64_t i = 0; i < rows; ++i)
      t[i] = (i * 7919 + classes / 2) % classes;
    HostTensor logits = rand({rows, classes}, -4, 4);
    expectBf16MatchesCpu("cross_entropy", {logits, i64({rows}, t)}, {B, I},
                         {{}}, {F}, {}, 1e-5, 1e-4);
    expectBf16MatchesCpu("cross_entropy_grad", {logits, i64({rows}, t)}, {B, I},
                         {{rows, classes}}, {B}, {}, 1e-4, 1e-2);
    auto axis1 = [](plan::Instruction &i) { setI(i, "axis", 1); };
    expectBf16MatchesCpu("softmax", {logits}, {B}, {{rows, classes}}, {B},
                         axis1);
    expectBf16MatchesCpu("softmax_grad",
                         {rand({rows, classes}), rand({rows, classes}, 0, 1)},
                         {B, B}, {{rows, classes}}, {B}, axis1);
  }
}

TEST_F(CudaBf16, CrossEntropyAndSoftmaxKeepNanBesideNegativeInfinity) {
  // Row 0: -inf up to half the row but a NaN at column 7 (the last lane of
  // the first 16-byte pack in bf16, of the second in f32), finite after; a
  // block's first threads meet that pack before any finite value. The CPU
  // gives the whole row NaN; row 1 stays finite. f32 and bf16 storage.
  const int64_t rows = 2, classes = 1024;
  HostTensor logits = rand({rows, classes}, -4, 4);
  std::vector<float> v = logits.toF32();
  for (int64_t c = 0; c < classes / 2; ++c)
    v[c] = c == 7 ? NAN : -INFINITY;
  logits = f32({rows, classes}, v);
  HostTensor target = i64({rows}, {classes - 1, 5});
  auto axis1 = [](plan::Instruction &i) { setI(i, "axis", 1); };
  expectSameOnCuda("cross_entropy", {logits, target}, {{}});
  expectSameOnCuda("cross_entropy_grad", {logits, target}, {{rows, classes}},
                   {}, {}, 1, 1e-6, 1e-4);
  expectSameOnCuda("softmax", {logits}, {{rows, classes}}, axis1);
  expectBf16MatchesCpu("cross_entropy", {logits, target}, {B, I}, {{}}, {F}, {},
                       1e-5, 1e-4);
  expectBf16MatchesCpu("cross_entropy_grad", {logits, target}, {B, I},
                       {{rows, classes}}, {B}, {}, 1e-4, 1e-2);
  expectBf16MatchesCpu("softmax", {logits}, {B}, {{rows, classes}}, {B}, axis1);
}

} // namespace
} // namespace loom::runtime::test
