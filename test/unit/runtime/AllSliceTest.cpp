//===- AllSliceTest.cpp - all_slice keeps this rank's block ----------------===//
//
// The kernel is bound directly, with a group that says this rank is rank
// `r` of 2, so both blocks are checked without MPI (the 2-rank runs of the
// model zoo exercise it under mpirun).
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"
#include "runtime/OpView.h"
#include "runtime/comm/Communicator.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/support/HostTensor.h"

#include <gtest/gtest.h>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

/// Rank `r` of a group of `n`; no collective is called.
class GroupOf final : public Communicator {
public:
  GroupOf(int r, int n) : r(r), n(n) {}
  int rank() const override { return r; }
  int size() const override { return n; }
  Status allReduceSum(float *, int64_t) override { return Status::ok(); }
  Status allGather(const void *, void *, int64_t) override {
    return makeError("not used");
  }
  Status reduceScatterSum(const float *, float *, int64_t) override {
    return makeError("not used");
  }
  Status allToAll(const void *, void *, int64_t) override {
    return makeError("not used");
  }
  StatusOr<int> allReduceMin(int value) override { return value; }
  Status barrier() override { return Status::ok(); }
  Status broadcast(void *, int64_t, int) override { return Status::ok(); }
  StatusOr<std::unique_ptr<Communicator>> split(int, int) override {
    return makeError("not used");
  }

private:
  int r, n;
};


/// Runs all_slice of a [3, 4] x (values 0..11) along axis 1 on rank `r` of
/// 2, in `dtype`.
std::vector<int64_t> blockOf(int r, plan::DType dtype) {
  const int64_t axis = 1;
  plan::Plan p = makePlan(2, false);
  plan::Program &prog = *p.add_programs();
  std::vector<int64_t> out = {3, 2};
  int32_t x = addBuffer(prog, "x", plan::CONSTANT, {3, 4}, dtype);
  int32_t y = addBuffer(prog, "y", plan::TEMPORARY, out, dtype);
  plan::Instruction &inst = addInst(prog, "all_slice", {x}, {y});
  setInts(inst, "axes", {0});
  (*inst.mutable_attrs())["axis"].set_i(axis);
  OpView op{p, inst, {&prog.buffers(x)}, {&prog.buffers(y)}};
  EXPECT_TRUE(cpu::verifyAllSlice(op).isOk());
  std::vector<uint8_t> arena(prog.buffers(y).offset() + prog.buffers(y).size_bytes());
  for (int64_t i = 0; i < 12; ++i) {
    uint8_t *at = arena.data() + prog.buffers(x).offset();
    if (dtype == plan::I64)
      reinterpret_cast<int64_t *>(at)[i] = i;
    else
      reinterpret_cast<float *>(at)[i] = static_cast<float>(i);
  }
  GroupOf group(r, 2);
  HostContext ctx(arena, group);
  auto fn = cpu::bindAllSlice(op, ctx);
  EXPECT_TRUE(fn.isOk()) << fn.status().message();
  if (!fn.isOk())
    return {};
  EXPECT_TRUE((*fn)(StepContext{}).isOk());
  std::vector<int64_t> got;
  const uint8_t *at = arena.data() + prog.buffers(y).offset();
  for (int64_t i = 0; i < numElements(out); ++i)
    got.push_back(dtype == plan::I64
                      ? reinterpret_cast<const int64_t *>(at)[i]
                      : static_cast<int64_t>(reinterpret_cast<const float *>(at)[i]));
  return got;
}

TEST(AllSliceTest, EachRankKeepsItsBlockOfAnyElementType) {
  // Columns 0-1 on rank 0, 2-3 on rank 1; i64 as position ids are.
  for (plan::DType dtype : {plan::F32, plan::I64}) {
    EXPECT_EQ(blockOf(0, dtype), (std::vector<int64_t>{0, 1, 4, 5, 8, 9}));
    EXPECT_EQ(blockOf(1, dtype), (std::vector<int64_t>{2, 3, 6, 7, 10, 11}));
  }
}

TEST(AllSliceTest, BlocksThatDoNotTileTheAxisAreRefused) {
  plan::Plan p = makePlan(2, false);
  plan::Program &prog = *p.add_programs();
  int32_t x = addBuffer(prog, "x", plan::CONSTANT, {3, 4});
  int32_t y = addBuffer(prog, "y", plan::TEMPORARY, {2, 4});
  plan::Instruction &inst = addInst(prog, "all_slice", {x}, {y});
  setInts(inst, "axes", {0});
  (*inst.mutable_attrs())["axis"].set_i(0);
  OpView op{p, inst, {&prog.buffers(x)}, {&prog.buffers(y)}};
  Status s = cpu::verifyAllSlice(op);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("is not a block of input"), std::string::npos)
      << s.message();
  (*inst.mutable_attrs())["axis"].set_i(2);
  s = cpu::verifyAllSlice(op);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("axis 2 is not a dimension"), std::string::npos)
      << s.message();
}

} // namespace
