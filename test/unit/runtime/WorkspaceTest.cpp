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

TEST(Workspace, NoAttentionOnlyTheGemmWorkspace) {
  plan::Program p;
  int32_t x = addBuffer(p, "x", plan::TEMPORARY, {4, 4});
  int32_t y = addBuffer(p, "y", plan::TEMPORARY, {4, 4});
  addInst(p, "relu", {x}, {y});
  EXPECT_EQ(estimateCudaWorkspaceBytes(p), kCudaGemmWorkspaceBytes);
  EXPECT_EQ(attentionProbsOffset(1, 1, 1), 256); // 256-byte aligned
}

} // namespace
