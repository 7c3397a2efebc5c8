//===- SummaryTest.cpp - The step prediction's FLOP count ------------------===//

#include "compiler/Cluster.h"
#include "compiler/Summary.h"

#include "../runtime/TestPlans.h"

#include <gtest/gtest.h>

using namespace mlir::loom;
using namespace loom::runtime::test;

namespace {

/// One rank's training plan holding `program`.
plan::Plan planOf(plan::Program program) {
  plan::Plan p;
  *p.add_programs() = std::move(program);
  return p;
}

double flopsOf(const plan::Program &program) {
  auto cluster = parseCluster("h200:1x1");
  EXPECT_TRUE(static_cast<bool>(cluster));
  return predictStep(planOf(program), *cluster).flopsPerDevice;
}

TEST(Summary, GemmFlopsOfEveryGemmOp) {
  plan::Program g;
  int32_t x = addBuffer(g, "x", plan::TEMPORARY, {2, 8, 16});
  int32_t w = addBuffer(g, "w", plan::TEMPORARY, {16, 32});
  int32_t b = addBuffer(g, "b", plan::TEMPORARY, {32});
  int32_t y = addBuffer(g, "y", plan::TEMPORARY, {2, 8, 32});
  addInst(g, "matmul", {x, w}, {y});
  EXPECT_EQ(flopsOf(g), 2.0 * 2 * 8 * 32 * 16);
  addInst(g, "linear", {x, w, b}, {y});
  EXPECT_EQ(flopsOf(g), 2 * 2.0 * 2 * 8 * 32 * 16);
  // dW = x^T dy: the contraction runs over the 16 flattened rows of x.
  int32_t dw = addBuffer(g, "dw", plan::TEMPORARY, {16, 32});
  setI(addInst(g, "matmul", {x, y}, {dw}), "transpose_a", 1);
  EXPECT_EQ(flopsOf(g), 2 * 2.0 * 2 * 8 * 32 * 16 + 2.0 * 16 * 32 * 16);

  plan::Program bm;
  int32_t l = addBuffer(bm, "l", plan::TEMPORARY, {3, 5, 7});
  int32_t r = addBuffer(bm, "r", plan::TEMPORARY, {3, 5, 4});
  int32_t o = addBuffer(bm, "o", plan::TEMPORARY, {3, 7, 4});
  setI(addInst(bm, "batch_matmul", {l, r}, {o}), "transpose_lhs", 1);
  EXPECT_EQ(flopsOf(bm), 2.0 * 3 * 7 * 4 * 5);
}

TEST(Summary, AttentionFlopsHalveWhenCausal) {
  // [batch 2, heads 3, S 64, D 16]: S = Q K^T and P V forward; the gradient
  // recomputes S and forms dV, dP, dQ and dK.
  plan::Program g;
  std::vector<int64_t> s = {2, 3, 64, 16};
  int32_t q = addBuffer(g, "q", plan::TEMPORARY, s);
  int32_t k = addBuffer(g, "k", plan::TEMPORARY, s);
  int32_t v = addBuffer(g, "v", plan::TEMPORARY, s);
  int32_t o = addBuffer(g, "o", plan::TEMPORARY, s);
  addInst(g, "attention", {q, k, v}, {o});
  double pairs = 2.0 * 3 * 64 * 64;
  EXPECT_EQ(flopsOf(g), 2 * pairs * (16 + 16));
  int32_t dq = addBuffer(g, "dq", plan::TEMPORARY, s);
  int32_t dk = addBuffer(g, "dk", plan::TEMPORARY, s);
  int32_t dv = addBuffer(g, "dv", plan::TEMPORARY, s);
  addInst(g, "attention_grad", {o, q, k, v}, {dq, dk, dv});
  EXPECT_EQ(flopsOf(g), 2 * pairs * (16 + 16) + 2 * pairs * (3 * 16 + 2 * 16));
  for (plan::Instruction &inst : *g.mutable_instructions())
    setI(inst, "causal", 1);
  EXPECT_EQ(flopsOf(g), pairs * (16 + 16) + pairs * (3 * 16 + 2 * 16));
}

} // namespace
