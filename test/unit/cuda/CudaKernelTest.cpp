//===- CudaKernelTest.cpp - Each CUDA kernel against the CPU kernel -*- C++
//-*-===//
//
// Every test runs one instruction on random inputs on both backends and
// compares the outputs; all skip without a CUDA device. The padded-GEMM
// tests force the padded path (`LOOM_CUDA_GEMM_PAD_MIN_FLOPS` 0) on small
// GEMMs with rows of each operand and of the output that are not 16-byte
// aligned, so that m, n and k are each padded (with and without
// transposes), and bind-time tuning (`LOOM_CUDA_GEMM_TUNE_MIN_FLOPS` 0) on
// small GEMMs; GPT-2's logits GEMMs compare both paths on the GPU and print
// their times (speed is judged by benchmarks, not asserted here).
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "runtime/Workspace.h"
#include "runtime/cuda/CudaDevice.h"

#include <cmath>

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

// --- GEMMs on padded copies (rows not a multiple of 16 bytes) ------------

constexpr const char *kPadMinFlops = "LOOM_CUDA_GEMM_PAD_MIN_FLOPS";
constexpr const char *kPadCopy = "LOOM_CUDA_GEMM_PAD_COPY";
constexpr const char *kTuneMinFlops = "LOOM_CUDA_GEMM_TUNE_MIN_FLOPS";
constexpr plan::DType F = plan::F32, B = plan::BF16;

cuda::CudaDevice &cudaTestDevice() {
  return *static_cast<cuda::CudaDevice *>(testDevice());
}

std::function<void(plan::Instruction &)> transposes(const char *a, int ta,
                                                    const char *b, int tb) {
  return [=](plan::Instruction &i) {
    if (ta)
      setI(i, a, 1);
    if (tb)
      setI(i, b, 1);
  };
}

/// Every misaligned GEMM takes the padded path, and the device's padded
/// workspace is filled with NaN first (large enough that these tests do not
/// grow it): a copy that missed a real element or left a pad element
/// unzeroed (the extra k terms) shows as NaN.
class CudaPaddedGemm : public CudaKernel {
protected:
  void SetUp() override {
    CudaKernel::SetUp();
    if (IsSkipped())
      return;
    cuda::CudaDevice &d = cudaTestDevice();
    ASSERT_TRUE(d.reserveGemmPadWorkspace(int64_t(64) << 20).isOk());
    ASSERT_EQ(cudaMemsetAsync(d.gemmPadWorkspace(), 0xFF,
                              d.gemmPadWorkspaceBytes(), d.stream()),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(d.stream()), cudaSuccess);
  }
  ScopedEnv pad{kPadMinFlops, "0"};
};

TEST_F(CudaPaddedGemm, MatmulEachOperandMisaligned) {
  // (ta, tb, m, k, n): all three misaligned with each transpose (padded k
  // zero-fills both operands; a transposed a pads m, so c gains pad rows);
  // then only b and c (n padded); only a (k padded, b gains pad rows); only
  // c (n padded, a transposed b gains pad rows); only a transposed b (k
  // padded, a transposed a gains pad rows); only a transposed a (m padded);
  // rows of 12 are misaligned in bf16 only; one GEMM of several tiles; rows
  // longer than one copy block (2048). Both copy methods.
  struct Case {
    int ta, tb;
    int64_t m, k, n;
  };
  for (Case c :
       {Case{0, 0, 15, 7, 9}, Case{1, 0, 15, 7, 9}, Case{0, 1, 15, 7, 9},
        Case{1, 1, 15, 7, 9}, Case{0, 0, 16, 8, 9}, Case{0, 0, 16, 7, 8},
        Case{0, 1, 16, 8, 9}, Case{1, 1, 16, 7, 8}, Case{1, 0, 9, 8, 16},
        Case{0, 0, 12, 12, 12}, Case{0, 1, 67, 130, 45}, Case{0, 0, 5, 7, 2051},
        Case{1, 1, 2051, 5, 7}}) {
    SCOPED_TRACE(::testing::Message()
                 << "ta=" << c.ta << " tb=" << c.tb << " m=" << c.m
                 << " k=" << c.k << " n=" << c.n);
    HostTensor a = c.ta ? rand({c.k, c.m}) : rand({c.m, c.k});
    HostTensor b = c.tb ? rand({c.n, c.k}) : rand({c.k, c.n});
    auto attrs = transposes("transpose_a", c.ta, "transpose_b", c.tb);
    for (const char *copy : {"kernel", "memcpy2d"}) {
      SCOPED_TRACE(copy);
      ScopedEnv how(kPadCopy, copy);
      expectSameOnCuda("matmul", {a, b}, {{c.m, c.n}}, attrs, {}, 1, 1e-4,
                       1e-4);
      expectBf16MatchesCpu("matmul", {a, b}, {B, B}, {{c.m, c.n}}, {B}, attrs);
      expectBf16MatchesCpu("matmul", {a, b}, {B, B}, {{c.m, c.n}}, {F}, attrs,
                           1e-4, 1e-3);
    }
  }
}

TEST_F(CudaPaddedGemm, LinearBiasMovesIntoThePaddedOutput) {
  for (int tw = 0; tw < 2; ++tw) {
    HostTensor x = rand({4, 6, 33});
    HostTensor w = tw ? rand({17, 33}) : rand({33, 17});
    auto attrs = transposes("", 0, "transpose_weight", tw);
    expectSameOnCuda("linear", {x, w, rand({17})}, {{4, 6, 17}}, attrs);
    expectSameOnCuda("linear", {x, w}, {{4, 6, 17}}, attrs);
    expectBf16MatchesCpu("linear", {x, w, rand({17})}, {B, B, F}, {{4, 6, 17}},
                         {B}, attrs);
  }
}

TEST_F(CudaPaddedGemm, BatchMatmulBatchedAndShared) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb);
      auto attrs = transposes("transpose_lhs", ta, "transpose_rhs", tb);
      // Both batched (strided batch over padded copies).
      HostTensor a = ta ? rand({2, 3, 9, 17}) : rand({2, 3, 17, 9});
      HostTensor b = tb ? rand({2, 3, 13, 9}) : rand({2, 3, 9, 13});
      for (const char *copy : {"kernel", "memcpy2d"}) {
        SCOPED_TRACE(copy);
        ScopedEnv how(kPadCopy, copy);
        expectSameOnCuda("batch_matmul", {a, b}, {{2, 3, 17, 13}}, attrs);
        expectBf16MatchesCpu("batch_matmul", {a, b}, {B, B}, {{2, 3, 17, 13}},
                             {B}, attrs);
      }
      // A shared rhs (one tall GEMM, or stride 0 with transpose_lhs) and a
      // shared lhs (stride 0).
      HostTensor b2 = tb ? rand({13, 9}) : rand({9, 13});
      expectSameOnCuda("batch_matmul", {a, b2}, {{2, 3, 17, 13}}, attrs);
      expectBf16MatchesCpu("batch_matmul", {a, b2}, {B, B}, {{2, 3, 17, 13}},
                           {F}, attrs, 1e-4, 1e-3);
      HostTensor a2 = ta ? rand({9, 17}) : rand({17, 9});
      expectSameOnCuda("batch_matmul", {a2, b}, {{2, 3, 17, 13}}, attrs);
    }
  // Batches that broadcast against each other keep one GEMM per entry.
  expectSameOnCuda("batch_matmul", {rand({2, 1, 5, 7}), rand({1, 3, 7, 9})},
                   {{2, 3, 5, 9}});
}

TEST_F(CudaPaddedGemm, TunedAtBind) {
  // Every GEMM is timed at bind, padded or not (the bias case accumulates
  // into its output while tuning; each call writes the bias first).
  ScopedEnv tune(kTuneMinFlops, "0");
  for (const char *minFlops : {"0", "1e30"}) {
    SCOPED_TRACE(minFlops);
    ScopedEnv pad(kPadMinFlops, minFlops);
    HostTensor a = rand({67, 130}), b = rand({130, 45});
    expectSameOnCuda("matmul", {a, b}, {{67, 45}}, {}, {}, 2, 1e-4, 1e-4);
    expectBf16MatchesCpu("matmul", {a, b}, {B, B}, {{67, 45}}, {F}, {}, 1e-4,
                         1e-3);
    HostTensor x = rand({4, 6, 33}), w = rand({33, 17});
    expectSameOnCuda("linear", {x, w, rand({17})}, {{4, 6, 17}}, {}, {}, 2);
    expectSameOnCuda("batch_matmul", {rand({2, 3, 17, 9}), rand({2, 3, 9, 13})},
                     {{2, 3, 17, 13}});
    expectSameOnCuda("batch_matmul", {rand({2, 3, 16, 8}), rand({2, 3, 8, 16})},
                     {{2, 3, 16, 16}});
  }
}

TEST_F(CudaKernel, GemmPadSettingsAreChecked) {
  ScopedEnv pad(kPadMinFlops, "1e9x");
  auto r =
      runOpOn(testDevice(), "matmul", {rand({3, 5}), rand({5, 7})}, {{3, 7}});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find(
                "LOOM_CUDA_GEMM_PAD_MIN_FLOPS must be a non-negative"),
            std::string::npos)
      << r.status().message();
  ScopedEnv fine(kPadMinFlops, "0"), copy(kPadCopy, "dma");
  r = runOpOn(testDevice(), "matmul", {rand({3, 5}), rand({5, 7})}, {{3, 7}});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find(
                "LOOM_CUDA_GEMM_PAD_COPY must be kernel or memcpy2d"),
            std::string::npos)
      << r.status().message();
  ScopedEnv copyOk(kPadCopy, "kernel"), tune(kTuneMinFlops, "-1");
  r = runOpOn(testDevice(), "matmul", {rand({4, 8}), rand({8, 8})}, {{4, 8}});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find(
                "LOOM_CUDA_GEMM_TUNE_MIN_FLOPS must be a non-negative"),
            std::string::npos)
      << r.status().message();
}

/// On a device of its own, binding one GEMM over the default threshold
/// reserves exactly the padded workspace the memory proof counts for it.
TEST_F(CudaKernel, GemmPadWorkspaceIsWhatTheMemoryProofCounts) {
  // [1024, 1000] x [1000, 1001] in bf16, 2.05 GFLOP: n becomes 1024, so b
  // and c are copied with rows of 1024.
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  int32_t a = addBuffer(prog, "a", plan::TEMPORARY, {1024, 1000}, B);
  int32_t b = addBuffer(prog, "b", plan::TEMPORARY, {1000, 1001}, B);
  int32_t c = addBuffer(prog, "c", plan::TEMPORARY, {1024, 1001}, B);
  plan::Instruction &inst = addInst(prog, "matmul", {a, b}, {c}, "lm_head");
  int64_t want = 1000 * 1024 * 2 + 1024 * 1024 * 2;
  EXPECT_EQ(largestGemmPadWorkspaceBytes(prog), want);

  auto dev = cuda::CudaDevice::create(cudaTestDevice().ordinal());
  ASSERT_TRUE(dev.isOk()) << dev.status().message();
  cuda::CudaDevice &d = **dev;
  auto arena = d.allocateArena(prog.arena_bytes());
  ASSERT_TRUE(arena.isOk()) << arena.status().message();
  OpView view{p, inst, {}, {}};
  view.inputs = {&prog.buffers(a), &prog.buffers(b)};
  view.outputs = {&prog.buffers(c)};
  DirectBindContext ctx(d, *arena);
  auto fn = d.findKernel("matmul")->bind(view, ctx);
  ASSERT_TRUE(fn.isOk()) << fn.status().message();
  EXPECT_EQ(d.gemmPadWorkspaceBytes(), want);
  EXPECT_TRUE((*fn)(StepContext{}).isOk());
  EXPECT_TRUE(d.synchronize().isOk());
  d.freeArena(*arena);
}

/// GPT-2's three logits GEMMs at batch 2 x 1024 tokens (vocabulary 50257,
/// bf16; about 1.3 ms each unpadded on an H200), bound directly on device
/// buffers filled on the device (a random pattern of prime length, so no
/// host-side work scales with the matrices): prints the time of each
/// unpadded and padded (dimension 50304) and checks that the two paths
/// agree on the GPU (relative norm error; the output is NaN-filled before
/// each path runs). Times are printed only: speed is judged by benchmarks,
/// not by unit tests.
TEST_F(CudaKernel, GemmPadLogitsTiming) {
  const int64_t t = 2048, h = 768, v = 50257;
  cuda::CudaDevice &d = cudaTestDevice();
  cudaStream_t s = d.stream();
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  int32_t x = addBuffer(prog, "x", plan::TEMPORARY, {t, h}, B);
  int32_t w = addBuffer(prog, "w", plan::TEMPORARY, {h, v}, B);
  int32_t dl = addBuffer(prog, "dl", plan::TEMPORARY, {t, v}, B);
  int32_t y = addBuffer(prog, "y", plan::TEMPORARY, {t, v}, B);
  int32_t dx = addBuffer(prog, "dx", plan::TEMPORARY, {t, h}, B);
  int32_t dw = addBuffer(prog, "dw", plan::TEMPORARY, {h, v}, B);
  auto arena = d.allocateArena(prog.arena_bytes());
  ASSERT_TRUE(arena.isOk()) << arena.status().message();
  uint8_t *base = *arena;
  std::vector<uint16_t> chunk(1048573); // a prime number of elements
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (uint16_t &e : chunk)
    e = floatToBf16(uniform(rng));
  for (int32_t id : {x, w, dl}) {
    uint8_t *at = base + prog.buffers(id).offset();
    int64_t bytes = prog.buffers(id).size_bytes();
    int64_t have = std::min<int64_t>(bytes, int64_t(chunk.size()) * 2);
    ASSERT_TRUE(
        d.upload(at, reinterpret_cast<const uint8_t *>(chunk.data()), have)
            .isOk());
    for (; have < bytes; have += std::min(have, bytes - have))
      ASSERT_EQ(cudaMemcpyAsync(at + have, at, std::min(have, bytes - have),
                                cudaMemcpyDeviceToDevice, s),
                cudaSuccess);
  }
  ASSERT_TRUE(d.synchronize().isOk());
  struct Gemm {
    const char *name;
    int32_t a, b, c;
    int ta, tb;
  };
  const char *names[] = {"unpadded", "padded"}, *minFlops[] = {"1e30", "1e9"};
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  for (const Gemm &g :
       {Gemm{"y = x w", x, w, y, 0, 0}, Gemm{"dx = dy w^T", dl, w, dx, 0, 1},
        Gemm{"dw = x^T dy", x, dl, dw, 1, 0}}) {
    plan::Instruction &inst =
        addInst(prog, "matmul", {g.a, g.b}, {g.c}, "lm_head");
    transposes("transpose_a", g.ta, "transpose_b", g.tb)(inst);
    OpView view{p, inst, {}, {}};
    view.inputs = {&prog.buffers(g.a), &prog.buffers(g.b)};
    view.outputs = {&prog.buffers(g.c)};
    const plan::Buffer &cb = prog.buffers(g.c);
    double tflop = 2.0 * t * h * v / 1e12;
    std::vector<uint16_t> out[2];
    for (int i = 0; i < 2; ++i) {
      ScopedEnv pad(kPadMinFlops, minFlops[i]), copy(kPadCopy, "kernel");
      DirectBindContext ctx(d, base);
      auto fn = d.findKernel("matmul")->bind(view, ctx);
      ASSERT_TRUE(fn.isOk()) << g.name << ": " << fn.status().message();
      if (i == 1) { // the padded path was taken: its workspace is reserved
        EXPECT_GE(d.gemmPadWorkspaceBytes(), int64_t(t) * 50304 * 2) << g.name;
      }
      ASSERT_EQ(cudaMemsetAsync(base + cb.offset(), 0xFF, cb.size_bytes(), s),
                cudaSuccess);
      ASSERT_TRUE((*fn)(StepContext{}).isOk()) << g.name; // warm-up
      const int runs = 5;
      ASSERT_EQ(cudaEventRecord(e0, s), cudaSuccess);
      for (int r = 0; r < runs; ++r)
        ASSERT_TRUE((*fn)(StepContext{}).isOk()) << g.name;
      ASSERT_EQ(cudaEventRecord(e1, s), cudaSuccess);
      ASSERT_TRUE(d.synchronize().isOk()) << g.name;
      float total = 0;
      ASSERT_EQ(cudaEventElapsedTime(&total, e0, e1), cudaSuccess);
      double ms = total / runs;
      out[i].resize(cb.size_bytes() / 2);
      ASSERT_TRUE(d.download(reinterpret_cast<uint8_t *>(out[i].data()),
                             base + cb.offset(), cb.size_bytes())
                      .isOk());
      std::printf("logits GEMM %-12s (%.3g TFLOP, bf16) %-9s %7.3f ms "
                  "(%.0f TFLOP/s)\n",
                  g.name, tflop, names[i], ms, tflop / ms * 1e3);
    }
    double diff = 0, norm = 0;
    for (size_t j = 0; j < out[0].size(); ++j) {
      double u = bf16ToFloat(out[0][j]), q = bf16ToFloat(out[1][j]);
      diff += (q - u) * (q - u);
      norm += u * u;
    }
    EXPECT_GT(norm, 0) << g.name;
    EXPECT_LT(std::sqrt(diff / norm), 1e-2) << g.name; // NaN fails too
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  d.freeArena(base);
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
  for (const char *op :
       {"relu", "tanh", "sigmoid", "exp", "neg", "erf", "sin", "cos",
        "round_f16", "trunc"})
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
// and scalars (the plan validator forbids an in-place add).
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
