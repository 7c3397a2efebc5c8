//===- CudaKernelTest.cpp - Each CUDA kernel against the CPU kernel -*- C++
//-*-===//
//
// Every test runs one instruction on random inputs on both backends and
// compares the outputs; all skip without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace loom::runtime::test {
namespace {

class CudaKernel : public ::testing::Test {
protected:
  void SetUp() override { LOOM_REQUIRE_CUDA(); }
  std::mt19937 rng{1234};
  HostTensor rand(const std::vector<int64_t> &shape, float lo = -1,
                  float hi = 1) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return f32(shape, randomFloats(n, rng, lo, hi));
  }
};

TEST_F(CudaKernel, MatmulAllTransposes) {
  // a is [3, 5, 7] collapsed to 15x7; m=15, k=7, n=9.
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      HostTensor a = ta ? rand({7, 15}) : rand({3, 5, 7});
      HostTensor b = tb ? rand({9, 7}) : rand({7, 9});
      expectSameOnCuda("matmul", {a, b}, {{15, 9}}, [&](plan::Instruction &i) {
        setI(i, "transpose_a", ta);
        setI(i, "transpose_b", tb);
      });
    }
}

TEST_F(CudaKernel, MatmulLarge) {
  expectSameOnCuda("matmul", {rand({257, 513}), rand({513, 129})}, {{257, 129}},
                   {}, {}, 1, 1e-4, 1e-4);
}

TEST_F(CudaKernel, LinearWithAndWithoutBias) {
  for (int tw = 0; tw < 2; ++tw) {
    HostTensor x = rand({4, 6, 33});
    HostTensor w = tw ? rand({17, 33}) : rand({33, 17});
    auto attrs = [&](plan::Instruction &i) {
      if (tw)
        setI(i, "transpose_weight", 1);
    };
    expectSameOnCuda("linear", {x, w, rand({17})}, {{4, 6, 17}}, attrs);
    expectSameOnCuda("linear", {x, w}, {{4, 6, 17}}, attrs);
  }
}

TEST_F(CudaKernel, BinaryBroadcasting) {
  for (const char *op : {"add", "sub", "mul", "div", "max", "min"}) {
    expectSameOnCuda(op, {rand({4, 5, 6}), rand({4, 5, 6}, 0.5, 2)},
                     {{4, 5, 6}});
    expectSameOnCuda(op, {rand({4, 5, 6}), rand({1}, 0.5, 2)}, {{4, 5, 6}});
    expectSameOnCuda(op, {rand({}), rand({4, 5, 6}, 0.5, 2)}, {{4, 5, 6}});
    expectSameOnCuda(op, {rand({4, 1, 6}), rand({5, 1}, 0.5, 2)}, {{4, 5, 6}});
    expectSameOnCuda(op, {rand({6}), rand({3, 4, 1}, 0.5, 2)}, {{3, 4, 6}});
  }
  expectSameOnCuda("pow", {rand({4, 1, 6}, 0.1, 2), rand({5, 1})}, {{4, 5, 6}});
}

TEST_F(CudaKernel, Unary) {
  for (const char *op : {"relu", "tanh", "sigmoid", "exp", "neg", "erf"})
    expectSameOnCuda(op, {rand({7, 300}, -3, 3)}, {{7, 300}});
  for (const char *op : {"log", "sqrt", "rsqrt", "reciprocal"})
    expectSameOnCuda(op, {rand({7, 300}, 0.1, 3)}, {{7, 300}});
}

TEST_F(CudaKernel, UnaryGrad) {
  for (const char *op : {"relu_grad", "tanh_grad", "sigmoid_grad"})
    expectSameOnCuda(op, {rand({33, 65}), rand({33, 65}, -0.9, 0.9)},
                     {{33, 65}});
}

TEST_F(CudaKernel, GeluBothForms) {
  for (int approx = 0; approx < 2; ++approx) {
    auto attrs = [&](plan::Instruction &i) {
      if (approx)
        setI(i, "approximate", 1);
    };
    expectSameOnCuda("gelu", {rand({9, 100}, -5, 5)}, {{9, 100}}, attrs);
    expectSameOnCuda("gelu_grad", {rand({9, 100}), rand({9, 100}, -5, 5)},
                     {{9, 100}}, attrs);
  }
}

TEST_F(CudaKernel, ScaleAndCopy) {
  expectSameOnCuda("scale", {rand({10, 10})}, {{10, 10}},
                   [](plan::Instruction &i) { setF(i, "factor", -0.25); });
  // In place.
  expectSameOnCuda("scale", {rand({10, 10})}, {{10, 10}},
                   [](plan::Instruction &i) { setF(i, "factor", 3.0); }, {0});
  expectSameOnCuda("copy", {rand({6, 5})}, {{30}});
}

TEST_F(CudaKernel, SumTo) {
  HostTensor x = rand({4, 5, 6});
  for (std::vector<int64_t> y : std::vector<std::vector<int64_t>>{
           {5, 1}, {1}, {6}, {4, 1, 6}, {4, 5, 6}, {}})
    expectSameOnCuda("sum_to", {x}, {y});
  // Many outputs (one thread each) and few long sums (one block each).
  expectSameOnCuda("sum_to", {rand({2048, 3})}, {{3}}, {}, {}, 1, 1e-4, 1e-4);
  expectSameOnCuda("sum_to", {rand({300, 1500})}, {{1500}}, {}, {}, 1, 1e-4,
                   1e-4);
  expectSameOnCuda("sum_to", {rand({3, 5000})}, {{3, 1}}, {}, {}, 1, 1e-4,
                   1e-4);
}

TEST_F(CudaKernel, CrossEntropy) {
  for (int64_t classes : {10, 1000}) {
    int64_t rows = 37;
    std::vector<int64_t> t(rows);
    std::uniform_int_distribution<int64_t> cls(0, classes - 1);
    for (int64_t &v : t)
      v = cls(rng);
    HostTensor logits = rand({rows, classes}, -4, 4);
    expectSameOnCuda("cross_entropy", {logits, i64({rows}, t)}, {{}});
    expectSameOnCuda("cross_entropy_grad", {logits, i64({rows}, t)},
                     {{rows, classes}}, {}, {}, 1, 1e-6, 1e-4);
  }
}

TEST_F(CudaKernel, CrossEntropyBadTargetFailsTheStep) {
  auto r = runOpOn(testDevice(), "cross_entropy",
                   {rand({4, 5}), i64({4}, {0, 1, 7, 2})}, {{}});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(
      r.status().message().find("target class id 7 in row 2 is outside [0, 5)"),
      std::string::npos)
      << r.status().message();
  // The record is cleared: the next run on the same device is fine.
  auto ok = runOpOn(testDevice(), "cross_entropy",
                    {rand({4, 5}), i64({4}, {0, 1, 4, 2})}, {{}});
  EXPECT_TRUE(ok.isOk()) << ok.status().message();
}

TEST_F(CudaKernel, Mse) {
  for (int64_t n : {1, 1000, 300000}) {
    HostTensor p = rand({n}), t = rand({n});
    expectSameOnCuda("mse", {p, t}, {{}});
    expectSameOnCuda("mse_grad", {p, t}, {{n}});
  }
}

TEST_F(CudaKernel, SgdWithMomentum) {
  int64_t n = 1000;
  expectSameOnCuda(
      "sgd", {rand({n}), rand({n}), f32({n}, std::vector<float>(n, 0))},
      {{n}, {n}},
      [](plan::Instruction &i) {
        setF(i, "lr", 0.1);
        setF(i, "momentum", 0.9);
        setF(i, "weight_decay", 0.01);
        setI(i, "nesterov", 1);
      },
      {0, 2}, 3);
  expectSameOnCuda(
      "sgd", {rand({n}), rand({n})}, {{n}},
      [](plan::Instruction &i) { setF(i, "lr", 0.05); }, {0}, 3);
}

TEST_F(CudaKernel, AdamW) {
  int64_t n = 5000;
  std::vector<float> zeros(n, 0);
  expectSameOnCuda(
      "adamw", {rand({n}), rand({n}), f32({n}, zeros), f32({n}, zeros)},
      {{n}, {n}, {n}},
      [](plan::Instruction &i) {
        setF(i, "lr", 1e-3);
        setF(i, "weight_decay", 0.01);
      },
      {0, 2, 3}, 4, 1e-6, 1e-4);
}

TEST_F(CudaKernel, SoftmaxLastAndMiddleAxis) {
  for (int64_t axis : {2, 1}) {
    HostTensor x = rand({3, 50, 7}, -5, 5);
    auto attrs = [&](plan::Instruction &i) { setI(i, "axis", axis); };
    expectSameOnCuda("softmax", {x}, {{3, 50, 7}}, attrs);
    expectSameOnCuda("softmax_grad", {rand({3, 50, 7}), rand({3, 50, 7}, 0, 1)},
                     {{3, 50, 7}}, attrs);
  }
}

TEST_F(CudaKernel, LayerNormAndRmsNorm) {
  auto attrs = [](plan::Instruction &i) {
    setI(i, "axis", 1);
    setF(i, "epsilon", 1e-5);
  };
  HostTensor x = rand({17, 300}, -2, 2), scale = rand({300}),
             bias = rand({300});
  HostTensor dy = rand({17, 300});
  expectSameOnCuda("layer_norm", {x, scale, bias}, {{17, 300}}, attrs);
  expectSameOnCuda("layer_norm", {x, scale}, {{17, 300}}, attrs);
  expectSameOnCuda("layer_norm_grad", {dy, x, scale}, {{17, 300}, {300}, {300}},
                   attrs, {}, 1, 1e-4, 1e-4);
  expectSameOnCuda("rms_norm", {x, scale}, {{17, 300}}, attrs);
  expectSameOnCuda("rms_norm_grad", {dy, x, scale}, {{17, 300}, {300}}, attrs,
                   {}, 1, 1e-4, 1e-4);
}

TEST_F(CudaKernel, UnsupportedOpNamesTheDevice) {
  auto r = runOpOn(testDevice(), "max_pool2d", {rand({1, 1, 4, 4})},
                   {{1, 1, 2, 2}}, [](plan::Instruction &i) {
                     setInts(i, "kernel", {2, 2});
                     setInts(i, "strides", {2, 2});
                     setInts(i, "pads", {0, 0, 0, 0});
                   });
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("has no kernel on cuda:"),
            std::string::npos)
      << r.status().message();
}

// The 8-element pack kernels and their fallbacks: sizes with a tail (not
// a multiple of 8), bias rows (a multiple of 8 wide or not) on either side,
// scalars, and an in-place add.
TEST_F(CudaKernel, BinaryPackPathsAndFallbacks) {
  for (const char *op : {"add", "sub", "mul", "div", "max", "min"}) {
    expectSameOnCuda(op, {rand({3, 67}), rand({3, 67}, 0.5, 2)}, {{3, 67}});
    expectSameOnCuda(op, {rand({5}), rand({5}, 0.5, 2)}, {{5}});
    expectSameOnCuda(op, {rand({5, 48}), rand({48}, 0.5, 2)}, {{5, 48}});
    expectSameOnCuda(op, {rand({48}), rand({5, 48}, 0.5, 2)}, {{5, 48}});
    expectSameOnCuda(op, {rand({2, 5, 48}), rand({5, 48}, 0.5, 2)},
                     {{2, 5, 48}});
    expectSameOnCuda(op, {rand({2, 5, 48}), rand({1, 1, 48}, 0.5, 2)},
                     {{2, 5, 48}});
    expectSameOnCuda(op, {rand({5, 44}), rand({44}, 0.5, 2)}, {{5, 44}});
    expectSameOnCuda(op, {rand({3, 67}), rand({}, 0.5, 2)}, {{3, 67}});
    expectSameOnCuda(op, {rand({1}), rand({3, 67}, 0.5, 2)}, {{3, 67}});
  }
  // A residual add in place.
  expectSameOnCuda("add", {rand({4, 96}), rand({4, 96})}, {{4, 96}}, {}, {0});
}

TEST_F(CudaKernel, LinearBiasFillPacked) {
  // 24 output features: the bias rows are filled 8 at a time.
  expectSameOnCuda("linear", {rand({3, 5, 33}), rand({33, 24}), rand({24})},
                   {{3, 5, 24}});
}

TEST_F(CudaKernel, UnaryPackTails) {
  for (int64_t n : {1, 7, 8, 9, 4099}) {
    expectSameOnCuda("tanh", {rand({n}, -3, 3)}, {{n}});
    expectSameOnCuda("sqrt", {rand({n}, 0.1, 3)}, {{n}});
    expectSameOnCuda("relu_grad", {rand({n}), rand({n})}, {{n}});
    expectSameOnCuda("gelu", {rand({n}, -5, 5)}, {{n}});
    expectSameOnCuda("gelu_grad", {rand({n}), rand({n}, -5, 5)}, {{n}});
    expectSameOnCuda("scale", {rand({n})}, {{n}},
                     [](plan::Instruction &i) { setF(i, "factor", 0.3); });
  }
}

// --- the packed reduction, norm, softmax and loss kernels -------------------

TEST_F(CudaKernel, SumToDenseRowsSlabs) {
  // Dense [rows, cols] -> [cols]: 16-byte packs (cols a multiple of 4),
  // scalar slabs (odd cols), one row chunk and many, a single row.
  expectSameOnCuda("sum_to", {rand({2, 300, 768})}, {{768}}, {}, {}, 1, 1e-4,
                   1e-4);
  expectSameOnCuda("sum_to", {rand({300, 37})}, {{37}}, {}, {}, 1, 1e-4, 1e-4);
  expectSameOnCuda("sum_to", {rand({5000, 12})}, {{12}}, {}, {}, 1, 1e-4, 1e-4);
  expectSameOnCuda("sum_to", {rand({3, 4, 264})}, {{1, 264}}, {}, {}, 1, 1e-4,
                   1e-4);
  expectSameOnCuda("sum_to", {rand({2, 1, 1030})}, {{1030}}, {}, {}, 1, 1e-4,
                   1e-4);
}

TEST_F(CudaKernel, LayerNormWarpRows) {
  auto attrs = [](plan::Instruction &i) {
    setI(i, "axis", 1);
    setF(i, "epsilon", 1e-5);
  };
  // Up to 128 packs a row (4 a lane), up to 256 (8 a lane), and rows the
  // warp kernels do not take (a width not a multiple of 4, too wide).
  for (int64_t cols : {256, 768, 1024, 302, 1100}) {
    int64_t rows = 67;
    HostTensor x = rand({rows, cols}, -2, 2), scale = rand({cols}),
               bias = rand({cols}), dy = rand({rows, cols});
    expectSameOnCuda("layer_norm", {x, scale, bias}, {{rows, cols}}, attrs);
    expectSameOnCuda("rms_norm", {x, scale}, {{rows, cols}}, attrs);
    expectSameOnCuda("layer_norm_grad", {dy, x, scale},
                     {{rows, cols}, {cols}, {cols}}, attrs, {}, 1, 1e-4, 1e-4);
    expectSameOnCuda("rms_norm_grad", {dy, x, scale}, {{rows, cols}, {cols}},
                     attrs, {}, 1, 1e-4, 1e-4);
  }
  // One row, and many rows (several row chunks of dscale / dbias).
  HostTensor x1 = rand({1, 768}), s1 = rand({768});
  expectSameOnCuda("layer_norm_grad", {rand({1, 768}), x1, s1},
                   {{1, 768}, {768}, {768}}, attrs, {}, 1, 1e-4, 1e-4);
  HostTensor xm = rand({3000, 64}), sm = rand({64});
  expectSameOnCuda("layer_norm_grad", {rand({3000, 64}), xm, sm},
                   {{3000, 64}, {64}, {64}}, attrs, {}, 1, 1e-4, 1e-4);
}

TEST_F(CudaKernel, CrossEntropyLongOddRows) {
  // Rows of odd length start off a 16-byte boundary: packed bodies with
  // scalar heads and tails; the GPT-2 vocabulary; a single row.
  for (auto [rows, classes] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 50257}, {9, 1001}, {1, 4096}, {5, 3}}) {
    std::vector<int64_t> t(rows);
    std::uniform_int_distribution<int64_t> cls(0, classes - 1);
    for (int64_t &v : t)
      v = cls(rng);
    HostTensor logits = rand({rows, classes}, -4, 4);
    expectSameOnCuda("cross_entropy", {logits, i64({rows}, t)}, {{}});
    expectSameOnCuda("cross_entropy_grad", {logits, i64({rows}, t)},
                     {{rows, classes}}, {}, {}, 1, 1e-6, 1e-4);
  }
}

TEST_F(CudaKernel, SoftmaxLongOddRows) {
  auto attrs = [](plan::Instruction &i) { setI(i, "axis", 1); };
  for (auto [rows, dim] : std::vector<std::pair<int64_t, int64_t>>{
           {2, 50257}, {7, 1001}, {64, 5}, {1, 1024}}) {
    HostTensor x = rand({rows, dim}, -5, 5);
    expectSameOnCuda("softmax", {x}, {{rows, dim}}, attrs);
    expectSameOnCuda("softmax_grad",
                     {rand({rows, dim}), rand({rows, dim}, 0, 1)},
                     {{rows, dim}}, attrs);
  }
}

} // namespace
} // namespace loom::runtime::test
