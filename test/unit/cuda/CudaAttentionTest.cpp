//===- CudaAttentionTest.cpp - Both attention paths vs the CPU ----*- C++
//-*-===//
//
// Forward and backward of the tensor-core kernels, the flash kernels and
// the GEMM path (`LOOM_CUDA_ATTENTION`, set per test and restored after
// it; tc takes bf16 with D = Dv = 64 or 128 and runs the cases it does not
// take as auto does): causal and
// not, sequence lengths that are not multiples of the 32-row tiles or of the
// row kernels' 4-column groups, head dims 32, 64 and 128 (both flash
// instantiations), different query and key lengths, a value head dim other
// than the query's, bf16 storage, and one larger case; the tensor-core
// kernels on lengths 1 to 1000 and both head dims; then the paths against
// each other and the selection rules. All skip without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <optional>

namespace loom::runtime::test {
namespace {

constexpr const char *kAlgorithm = "LOOM_CUDA_ATTENTION";
constexpr const char *kLimit = "LOOM_CUDA_ATTENTION_WORKSPACE_MB";

class CudaAttentionBase : public ::testing::Test {
protected:
  std::mt19937 rng{777};
  HostTensor rand(const std::vector<int64_t> &shape, float lo = -1,
                  float hi = 1) {
    return f32(shape, randomFloats(numElements(shape), rng, lo, hi));
  }
  static std::function<void(plan::Instruction &)> attrs(int64_t d,
                                                        bool causal) {
    return [=](plan::Instruction &i) {
      setF(i, "scale", 1.0 / std::sqrt(static_cast<double>(d)));
      if (causal)
        setI(i, "causal", 1);
    };
  }

  /// attention and attention_grad on [b, h, sq, d] x [b, h, sk, d] x
  /// [b, h, sk, dv], both backends.
  void check(int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d,
             int64_t dv, bool causal, double atol = 2e-5, double rtol = 1e-4) {
    SCOPED_TRACE(::testing::Message()
                 << "b=" << b << " h=" << h << " sq=" << sq << " sk=" << sk
                 << " d=" << d << " dv=" << dv << " causal=" << causal);
    // Scores of a few units, so the softmax is neither flat nor one-hot.
    HostTensor q = rand({b, h, sq, d}, -2, 2), k = rand({b, h, sk, d}, -2, 2),
               v = rand({b, h, sk, dv});
    expectSameOnCuda("attention", {q, k, v}, {{b, h, sq, dv}}, attrs(d, causal),
                     {}, 1, atol, rtol);
    HostTensor dO = rand({b, h, sq, dv});
    expectSameOnCuda("attention_grad", {dO, q, k, v},
                     {{b, h, sq, d}, {b, h, sk, d}, {b, h, sk, dv}},
                     attrs(d, causal), {}, 1, 10 * atol, 10 * rtol);
  }

  /// The same with bf16 storage against the CPU on bf16-rounded inputs.
  void checkBf16(int64_t b, int64_t sq, int64_t sk, int64_t d, bool causal) {
    SCOPED_TRACE(::testing::Message()
                 << "bf16 b=" << b << " sq=" << sq << " sk=" << sk << " d=" << d
                 << " causal=" << causal);
    // The gemm and tc paths round P to bf16 before P V (and dS before
    // dS K, dS^T Q): about twice the error of flash's fp32 P (0.008
    // against 0.004 in the host emulation).
    const plan::DType B = plan::BF16;
    HostTensor q = rand({b, sq, d}, -2, 2), k = rand({b, sk, d}, -2, 2),
               v = rand({b, sk, d}), dO = rand({b, sq, d});
    expectBf16MatchesCpu("attention", {q, k, v}, {B, B, B}, {{b, sq, d}}, {B},
                         attrs(d, causal), 2e-2, 2e-2);
    expectBf16MatchesCpu("attention_grad", {dO, q, k, v}, {B, B, B, B},
                         {{b, sq, d}, {b, sk, d}, {b, sk, d}}, {B, B, B},
                         attrs(d, causal), 3e-2, 3e-2);
  }
};

/// Every case once per algorithm.
class CudaAttention : public CudaAttentionBase,
                      public ::testing::WithParamInterface<const char *> {
protected:
  void SetUp() override {
    LOOM_REQUIRE_CUDA();
    env.emplace(kAlgorithm, GetParam());
  }
  std::optional<ScopedEnv> env;
};

TEST_P(CudaAttention, CausalOddLengths) {
  check(2, 3, 37, 37, 64, 64, true);
  check(1, 2, 1, 1, 64, 64, true);
  check(1, 2, 33, 33, 32, 32, true);
}

TEST_P(CudaAttention, NonCausalDifferentLengths) {
  check(2, 2, 37, 37, 64, 64, false);
  check(1, 3, 20, 45, 32, 32, false);
  check(1, 1, 70, 5, 32, 48, false); // Dv != D
}

TEST_P(CudaAttention, HeadDim128) {
  check(1, 2, 70, 70, 128, 128, true);
  check(1, 2, 40, 33, 96, 128, false);
}

TEST_P(CudaAttention, LargerCausal) {
  check(2, 4, 256, 256, 64, 64, true, 5e-5, 2e-4);
}

TEST_P(CudaAttention, Bf16) {
  checkBf16(3, 37, 37, 64, true);
  checkBf16(2, 64, 64, 64, true);
  checkBf16(2, 21, 45, 32, false);
}

/// The tensor-core kernels' shapes (the other paths run them too): lengths
/// of one row, within a tile, across ragged tiles, and many tiles; queries
/// and keys of different lengths; both head dims.
TEST_P(CudaAttention, Bf16TensorCoreShapes) {
  for (int64_t d : {64, 128}) {
    for (int64_t s : {1, 17, 64, 100})
      for (bool causal : {true, false})
        checkBf16(2, s, s, d, causal);
    checkBf16(3, 17, 100, d, false);
    checkBf16(2, 130, 33, d, false);
    checkBf16(1, 1, 70, d, false);
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, CudaAttention,
                         ::testing::Values("tc", "flash", "gemm"),
                         [](const auto &info) {
                           return std::string(info.param);
                         });

/// The tensor-core kernels alone (`LOOM_CUDA_ATTENTION=tc`, as the
/// parameterised cases set it), so that no case skips on a GPU.
class CudaAttentionTc : public CudaAttentionBase {
protected:
  void SetUp() override {
    LOOM_REQUIRE_CUDA();
    env.emplace(kAlgorithm, "tc");
  }
  std::optional<ScopedEnv> env;
};

TEST_F(CudaAttentionTc, Bf16Long) {
  // Many tiles; the other paths' long cases are LargerCausal and the
  // GPT-2 layer below (the CPU reference dominates the time here).
  checkBf16(2, 1000, 1000, 64, true);
  checkBf16(1, 1000, 1000, 128, true);
  checkBf16(1, 1000, 999, 64, false);
}

class CudaAttentionSelection : public CudaAttentionBase {
protected:
  void SetUp() override { LOOM_REQUIRE_CUDA(); }

  /// attention_grad on the device under `LOOM_CUDA_ATTENTION=algorithm`.
  std::vector<HostTensor>
  grads(const char *algorithm, const std::vector<HostTensor> &in, bool causal) {
    ScopedEnv env(kAlgorithm, algorithm);
    std::vector<int64_t> qs = in[1].shape, ks = in[2].shape, vs = in[3].shape;
    auto r = runOpOn(testDevice(), "attention_grad", in, {qs, ks, vs},
                     attrs(qs.back(), causal));
    EXPECT_TRUE(r.isOk()) << algorithm << ": " << r.status().message();
    return r.isOk() ? std::move(r).value() : std::vector<HostTensor>{};
  }
};

TEST_F(CudaAttentionSelection, GemmMatchesFlash) {
  for (bool causal : {true, false}) {
    HostTensor q = rand({2, 3, 77, 64}, -2, 2), k = rand({2, 3, 77, 64}, -2, 2),
               v = rand({2, 3, 77, 64}), dO = rand({2, 3, 77, 64});
    std::vector<HostTensor> in = {dO, q, k, v};
    std::vector<HostTensor> gemm = grads("gemm", in, causal),
                            flash = grads("flash", in, causal);
    ASSERT_EQ(gemm.size(), 3u);
    ASSERT_EQ(flash.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(allClose(gemm[i], flash[i], 2e-4, 1e-3))
          << "gradient " << i << " causal=" << causal;
  }
}

/// Two attention instructions in one plan; binding the second (larger than
/// anything the tests before bound) grows the device's shared workspace
/// and frees the buffer the first was bound with, so the first must find
/// the workspace when it runs.
TEST_F(CudaAttentionSelection, SharedWorkspaceGrowsAcrossInstructions) {
  ScopedEnv env(kAlgorithm, "gemm");
  std::vector<int64_t> small = {1, 2, 24, 32}, large = {2, 4, 640, 32};
  std::vector<HostTensor> in = {rand(small, -2, 2), rand(small, -2, 2),
                                rand(small),        rand(large, -2, 2),
                                rand(large, -2, 2), rand(large)};
  auto run = [&](Device *device) -> StatusOr<std::vector<HostTensor>> {
    plan::Plan p = makePlan(1, false);
    plan::Program &prog = *p.add_programs();
    prog.add_ranks(0);
    prog.set_loss_buffer(-1);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < in.size(); ++i) {
      ids.push_back(addBuffer(prog, "in" + std::to_string(i), plan::CONSTANT,
                              in[i].shape));
      buffer(prog, ids.back())
          .set_data(std::string(in[i].bytes.begin(), in[i].bytes.end()));
    }
    int32_t o1 = addBuffer(prog, "o1", plan::TEMPORARY, small);
    int32_t o2 = addBuffer(prog, "o2", plan::TEMPORARY, large);
    attrs(32, true)(addInst(prog, "attention", {ids[0], ids[1], ids[2]}, {o1}));
    attrs(32, true)(addInst(prog, "attention", {ids[3], ids[4], ids[5]}, {o2}));
    LOOM_RETURN_IF_ERROR(validatePlan(p, "test"));
    LocalCommunicator world;
    LOOM_ASSIGN_OR_RETURN(auto exec,
                          Executor::create(p, world, "test", device));
    for (int step = 0; step < 2; ++step)
      LOOM_RETURN_IF_ERROR(exec->runStep(step));
    std::vector<HostTensor> out = {exec->readBuffer(*exec->findBuffer(o1)),
                                   exec->readBuffer(*exec->findBuffer(o2))};
    if (device)
      LOOM_RETURN_IF_ERROR(device->synchronize());
    return out;
  };
  auto cpu = run(nullptr);
  ASSERT_TRUE(cpu.isOk()) << cpu.status().message();
  auto gpu = run(testDevice());
  ASSERT_TRUE(gpu.isOk()) << gpu.status().message();
  for (size_t i = 0; i < 2; ++i)
    EXPECT_TRUE(allClose((*gpu)[i], (*cpu)[i], 2e-5, 1e-4)) << "output " << i;
}

TEST_F(CudaAttentionSelection, HeadDimAbove128NeedsTheGemmPath) {
  HostTensor q = rand({1, 4, 160}), k = rand({1, 4, 160}),
             v = rand({1, 4, 160});
  auto scale = [](plan::Instruction &i) { setF(i, "scale", 0.1); };
  {
    ScopedEnv env(kAlgorithm, "flash");
    auto r =
        runOpOn(testDevice(), "attention", {q, k, v}, {{1, 4, 160}}, scale);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("head dims up to 128"),
              std::string::npos)
        << r.status().message();
  }
  {
    // auto, but the GEMM path's workspace is over the limit: flash, which
    // cannot take it.
    ScopedEnv env(kAlgorithm, "auto"), limit(kLimit, "0");
    auto r =
        runOpOn(testDevice(), "attention", {q, k, v}, {{1, 4, 160}}, scale);
    EXPECT_FALSE(r.isOk());
  }
  ScopedEnv env(kAlgorithm, "auto");
  expectSameOnCuda("attention", {q, k, v}, {{1, 4, 160}}, scale);
}

TEST_F(CudaAttentionSelection, BadSettingsFailAtBind) {
  HostTensor q = rand({1, 4, 16}), k = rand({1, 4, 16}), v = rand({1, 4, 16});
  auto scale = [](plan::Instruction &i) { setF(i, "scale", 0.25); };
  {
    ScopedEnv env(kAlgorithm, "fast");
    auto r = runOpOn(testDevice(), "attention", {q, k, v}, {{1, 4, 16}}, scale);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("auto, tc, gemm or flash"),
              std::string::npos)
        << r.status().message();
  }
  ScopedEnv env(kAlgorithm, "auto"), limit(kLimit, "lots");
  auto r = runOpOn(testDevice(), "attention", {q, k, v}, {{1, 4, 16}}, scale);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find(kLimit), std::string::npos)
      << r.status().message();
}

/// One GPT-2 124M attention layer (H=12, S=1024, D=64, causal, bf16
/// storage) at batch `b` under each of `algorithms`: prints the time of
/// each, forward and gradient (mean of 5 calls), and expects the paths to
/// agree with the first. The times are for reading, not asserted.
class CudaAttentionTimes : public CudaAttentionSelection {
protected:
  void layerTimes(int64_t b, std::vector<const char *> algorithms) {
    const plan::DType B = plan::BF16;
    std::vector<int64_t> shape = {b, 12, 1024, 64};
    HostTensor q = rand(shape, -2, 2), k = rand(shape, -2, 2), v = rand(shape),
               dO = rand(shape);
    std::vector<std::vector<HostTensor>> out;
    for (const char *algorithm : algorithms) {
      ScopedEnv env(kAlgorithm, algorithm);
      double fwdMs = 0, gradMs = 0;
      auto fwd = runOpDirect("attention", {q, k, v}, {B, B, B}, {shape}, {B},
                             attrs(64, true), {}, 5, &fwdMs);
      ASSERT_TRUE(fwd.isOk()) << algorithm << ": " << fwd.status().message();
      auto grad = runOpDirect("attention_grad", {dO, q, k, v}, {B, B, B, B},
                              {shape, shape, shape}, {B, B, B}, attrs(64, true),
                              {}, 5, &gradMs);
      ASSERT_TRUE(grad.isOk()) << algorithm << ": " << grad.status().message();
      std::printf("attention %s, B=%lld H=12 S=1024 D=64 causal bf16: "
                  "forward %.3f ms, gradient %.3f ms\n",
                  algorithm, (long long)b, fwdMs, gradMs);
      std::vector<HostTensor> all = std::move(fwd).value();
      for (HostTensor &t : std::move(grad).value())
        all.push_back(std::move(t));
      out.push_back(std::move(all));
    }
    for (size_t p = 1; p < out.size(); ++p)
      for (size_t i = 0; i < out[0].size(); ++i)
        EXPECT_TRUE(allClose(out[0][i], out[p][i], 3e-2, 3e-2))
            << algorithms[p] << " against " << algorithms[0] << ", output " << i
            << " (0: O, then dQ, dK, dV)";
  }
};

/// Batch 8 (the GEMM path's workspace is 0.56 GiB), all three paths.
TEST_F(CudaAttentionTimes, Gpt2LayerAllPaths) {
  layerTimes(8, {"gemm", "tc", "flash"});
}

/// Batch 32, the profiled training step's shape (gemm workspace 2.25 GiB;
/// flash, about 35 ms a call, left out).
TEST_F(CudaAttentionTimes, Gpt2LayerBatch32) { layerTimes(32, {"gemm", "tc"}); }

} // namespace
} // namespace loom::runtime::test
