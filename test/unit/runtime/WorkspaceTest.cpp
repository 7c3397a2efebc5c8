//===- WorkspaceTest.cpp - The CUDA kernels' workspace estimate -----------===//

#include "runtime/Workspace.h"
#include "TestPlans.h"

#include <gtest/gtest.h>

using namespace loom::runtime;
using namespace loom::runtime::test;
namespace plan = loom::plan;

namespace {

/// An attention and its gradient over `[b, h, s, d]` operands of `dtype`.
plan::Program attentionProgram(int64_t b, int64_t h, int64_t s, int64_t d,
                               plan::DType dtype) {
  plan::Program p;
  std::vector<int64_t> shape = {b, h, s, d};
  int32_t q = addBuffer(p, "q", plan::TEMPORARY, shape, dtype);
  int32_t k = addBuffer(p, "k", plan::TEMPORARY, shape, dtype);
  int32_t v = addBuffer(p, "v", plan::TEMPORARY, shape, dtype);
  int32_t o = addBuffer(p, "o", plan::TEMPORARY, shape, dtype);
  int32_t dq = addBuffer(p, "dq", plan::TEMPORARY, shape, dtype);
  int32_t dk = addBuffer(p, "dk", plan::TEMPORARY, shape, dtype);
  int32_t dv = addBuffer(p, "dv", plan::TEMPORARY, shape, dtype);
  addInst(p, "attention", {q, k, v}, {o});
  addInst(p, "attention_grad", {o, q, k, v}, {dq, dk, dv});
  return p;
}

TEST(Workspace, TensorCorePathKeepsRowStatistics) {
  // GPT-2 124M at batch 32 in bf16 (head dim 64): the tensor-core kernels
  // keep no scores; the gradient keeps two floats per query row.
  EXPECT_EQ(estimateCudaWorkspaceBytes(
                attentionProgram(32, 12, 1024, 64, plan::BF16)),
            kCudaGemmWorkspaceBytes + 2 * int64_t(32) * 12 * 1024 * 4);
  EXPECT_EQ(
      estimateCudaWorkspaceBytes(attentionProgram(2, 3, 100, 128, plan::BF16)),
      kCudaGemmWorkspaceBytes + 2 * int64_t(6) * 100 * 4);
}

TEST(Workspace, TensorCorePathRule) {
  // The one copy of the rule, for the CUDA bind (runtime/cuda/
  // AttentionKernels.cpp adds only operand alignment) and the memory proof:
  // bf16, D = Dv = 64 or 128, Sq = Sk when causal.
  EXPECT_TRUE(attentionTakesTensorCorePath(plan::BF16, 1024, 1024, 64, 64,
                                           /*causal=*/true));
  EXPECT_TRUE(attentionTakesTensorCorePath(plan::BF16, 70, 70, 128, 128, true));
  EXPECT_TRUE(attentionTakesTensorCorePath(plan::BF16, 17, 100, 64, 64, false));
  EXPECT_FALSE(attentionTakesTensorCorePath(plan::BF16, 17, 100, 64, 64, true));
  EXPECT_FALSE(attentionTakesTensorCorePath(plan::F32, 64, 64, 64, 64, false));
  EXPECT_FALSE(attentionTakesTensorCorePath(plan::BF16, 64, 64, 32, 32, false));
  EXPECT_FALSE(attentionTakesTensorCorePath(plan::BF16, 64, 64, 96, 96, false));
  EXPECT_FALSE(
      attentionTakesTensorCorePath(plan::BF16, 64, 64, 64, 128, false));
}

TEST(Workspace, GemmPathScoresOfTheLargestAttention) {
  // Head dim 32 in bf16 (not the tensor-core kernels'): f32 scores and bf16
  // probabilities of 32 x 12 heads x 1024 x 1024, shared by both
  // instructions, plus cuBLASLt's workspace.
  int64_t scores = int64_t(32) * 12 * 1024 * 1024;
  EXPECT_EQ(estimateCudaWorkspaceBytes(
                attentionProgram(32, 12, 1024, 32, plan::BF16)),
            kCudaGemmWorkspaceBytes + scores * (4 + 2));
  EXPECT_EQ(
      estimateCudaWorkspaceBytes(attentionProgram(2, 3, 100, 8, plan::F32)),
      kCudaGemmWorkspaceBytes + attentionProbsOffset(6, 100, 100) +
          6 * 100 * 100 * 4);
}

TEST(Workspace, OverTheLimitTheFlashPathKeepsRowStatistics) {
  // Batch 64: 4.5 GiB of scores is over the default 4 GiB, so the flash
  // kernels run and only the gradient keeps two floats per query row.
  EXPECT_EQ(estimateCudaWorkspaceBytes(
                attentionProgram(64, 12, 1024, 32, plan::BF16)),
            kCudaGemmWorkspaceBytes + 2 * int64_t(64) * 12 * 1024 * 4);
}

/// GPT-2's logits GEMMs (vocabulary 50257, bf16 activations, an f32 weight
/// gradient) at `batch` x 1024 tokens of width 768.
plan::Program logitsProgram(int64_t batch) {
  plan::Program p;
  int32_t x =
      addBuffer(p, "x", plan::TEMPORARY, {batch, 1024, 768}, plan::BF16);
  int32_t w = addBuffer(p, "w", plan::TEMPORARY, {768, 50257}, plan::BF16);
  int32_t y =
      addBuffer(p, "y", plan::TEMPORARY, {batch, 1024, 50257}, plan::BF16);
  int32_t dx =
      addBuffer(p, "dx", plan::TEMPORARY, {batch, 1024, 768}, plan::BF16);
  int32_t dw = addBuffer(p, "dw", plan::TEMPORARY, {768, 50257});
  addInst(p, "matmul", {x, w}, {y});
  plan::Attr one;
  one.set_i(1);
  (*addInst(p, "matmul", {y, w}, {dx}).mutable_attrs())["transpose_b"] = one;
  (*addInst(p, "matmul", {x, y}, {dw}).mutable_attrs())["transpose_a"] = one;
  return p;
}

TEST(Workspace, PaddedGemmRoundsTheMisalignedDimensionsTo64) {
  // bf16 [2048, 1024] x [1024, 1001]: n (a row of b and of c) becomes 1024;
  // a is aligned and keeps its shape, so it is used in place.
  GemmMatrix a{1, 2048, 1024, 2}, b{1, 1024, 1001, 2}, c{1, 2048, 1001, 2};
  GemmPadPlan p = planGemmPad(a, false, b, false, c);
  EXPECT_EQ(p.m, 2048);
  EXPECT_EQ(p.n, 1024);
  EXPECT_EQ(p.k, 1024);
  EXPECT_FALSE(p.copyA);
  EXPECT_TRUE(p.copyB && p.copyC);
  EXPECT_EQ(p.offB, 0);
  EXPECT_EQ(p.offC, 1024 * 1024 * 2);
  EXPECT_EQ(p.bytes, 1024 * 1024 * 2 + 2048 * 1024 * 2);
  // Too small, or every row aligned: no padded path.
  EXPECT_EQ(planGemmPad(a, false, b, false, c, 1e10).bytes, 0);
  EXPECT_EQ(planGemmPad(a, false, GemmMatrix{1, 1024, 1024, 2}, false,
                        GemmMatrix{1, 2048, 1024, 2})
                .bytes,
            0);
  // dx = dy w^T (GPT-2 logits): k padded, both operands copied (w with
  // aligned rows would be too: its padded dimension is its row count).
  GemmMatrix dy{1, 4096, 50257, 2}, w{1, 768, 50257, 2}, dx{1, 4096, 768, 2};
  p = planGemmPad(dy, false, w, true, dx);
  EXPECT_EQ(p.k, 50304);
  EXPECT_TRUE(p.copyA && p.copyB && !p.copyC);
  EXPECT_EQ(p.bytes, 4096 * 50304 * 2 + 768 * 50304 * 2);
  GemmMatrix wt{1, 50257, 768, 2}; // dx = dy w, w stored [50257, 768]
  p = planGemmPad(dy, false, wt, false, dx);
  EXPECT_TRUE(p.copyA && p.copyB && !p.copyC);
  EXPECT_EQ(p.b.rows, 50304);
  EXPECT_EQ(p.b.cols, 768);
  // m padded through a transposed a: c gains pad rows. f32 [7, 3] rows of
  // 12 bytes, 3 -> 64.
  p = planGemmPad(GemmMatrix{2, 7, 3, 4}, true, GemmMatrix{2, 7, 8, 4}, false,
                  GemmMatrix{2, 3, 8, 4}, 0);
  EXPECT_EQ(p.m, 64);
  EXPECT_TRUE(p.copyA && !p.copyB && p.copyC);
  EXPECT_EQ(p.a.rows, 7);
  EXPECT_EQ(p.a.cols, 64);
  EXPECT_EQ(p.offC, 2 * 7 * 64 * 4); // 3584, a multiple of 256
  EXPECT_EQ(p.bytes, p.offC + 2 * 64 * 8 * 4);
}

TEST(Workspace, LargestPaddedGemmOfGpt2Logits) {
  // Batch 32: the weight gradient's GEMM copies dlogits [32768, 50257] bf16
  // into [32768, 50304] and writes its f32 [768, 50304] output there (the
  // forward and dX GEMMs take the same dlogits-sized matrix and the smaller
  // bf16 weight).
  int64_t dlogits = int64_t(32768) * 50304 * 2, dw = int64_t(768) * 50304 * 4;
  EXPECT_EQ(largestGemmPadWorkspaceBytes(logitsProgram(32)), dlogits + dw);
  EXPECT_EQ(dlogits + dw, 3451256832);
  EXPECT_EQ(estimateCudaWorkspaceBytes(logitsProgram(32)),
            kCudaGemmWorkspaceBytes + dlogits + dw);
  // Batch 128: 13 GB of copies is over the limit, the GEMMs stay unpadded.
  EXPECT_EQ(largestGemmPadWorkspaceBytes(logitsProgram(128)), 0);
}

TEST(Workspace, PaddedBatchMatmulCountsBatchedAndSharedOperands) {
  plan::Program p;
  // f32 [8, 1000, 1001] x [1001, 1000]: a shared rhs, one tall GEMM; k
  // becomes 1024, so a gains pad columns and the rhs pad rows.
  int32_t a = addBuffer(p, "a", plan::TEMPORARY, {8, 1000, 1001});
  int32_t b = addBuffer(p, "b", plan::TEMPORARY, {1001, 1000});
  int32_t c = addBuffer(p, "c", plan::TEMPORARY, {8, 1000, 1000});
  addInst(p, "batch_matmul", {a, b}, {c});
  EXPECT_EQ(largestGemmPadWorkspaceBytes(p),
            8 * 1000 * 1024 * 4 + 1024 * 1000 * 4);
  // [8, 1001, 1000]^T x [8, 1001, 1003]: a strided batch, n becomes 1024 in
  // the rhs and the output.
  int32_t x = addBuffer(p, "x", plan::TEMPORARY, {8, 1001, 1000});
  int32_t y = addBuffer(p, "y", plan::TEMPORARY, {8, 1001, 1003});
  int32_t z = addBuffer(p, "z", plan::TEMPORARY, {8, 1000, 1003});
  plan::Attr one;
  one.set_i(1);
  (*addInst(p, "batch_matmul", {x, y}, {z}).mutable_attrs())["transpose_lhs"] =
      one;
  EXPECT_EQ(largestGemmPadWorkspaceBytes(p),
            8 * 1001 * 1024 * 4 + 8 * 1000 * 1024 * 4);
}

TEST(Workspace, NoAttentionOnlyTheGemmWorkspace) {
  plan::Program p;
  int32_t x = addBuffer(p, "x", plan::TEMPORARY, {4, 4});
  int32_t y = addBuffer(p, "y", plan::TEMPORARY, {4, 4});
  addInst(p, "relu", {x}, {y});
  EXPECT_EQ(estimateCudaWorkspaceBytes(p), kCudaGemmWorkspaceBytes);
  EXPECT_EQ(attentionProbsOffset(1, 1, 1), 256); // 256-byte aligned
}

} // namespace
