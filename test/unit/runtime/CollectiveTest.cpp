//===- CollectiveTest.cpp - all_gather, reduce_scatter, all_to_all --------===//
//
// The cases of CollectiveCases.h on a 2 x 2 mesh of four thread ranks
// (runtime/comm/ThreadCommunicator.h): the group of one mesh axis comes from
// `createAxesCommunicator` as under MPI. Then the refusals of bad
// attributes and shapes, and one plan run by the executor, which must
// create the groups these ops name.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/Collective.h"
#include "CollectiveCases.h"
#include "TestPlans.h"
#include "runtime/comm/ThreadCommunicator.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/kernels/cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <optional>

using namespace loom::runtime;
using namespace loom::runtime::test;
using namespace loom::runtime::test::collective;

namespace {

/// Runs `op`'s cases on the four thread ranks.
void runCasesOf(const std::string &op) {
  std::vector<std::pair<Case, int64_t>> cases = casesOf(op);
  ASSERT_FALSE(cases.empty());
  for (const auto &[c, meshAxis] : cases) {
    std::vector<std::string> failures =
        runRanks(4, [&, &c = c, meshAxis = meshAxis](Communicator &world) {
          return runCase(c, meshAxis, world);
        });
    for (int r = 0; r < 4; ++r)
      ASSERT_EQ(failures[r], "") << "rank " << r;
  }
}

TEST(CollectiveTest, BlockCopiesAreOnePitchedCopyPerBlock) {
  // [3 rows][2 blocks][8 bytes]: block k's rows are 16 bytes apart in the
  // tensor and dense (24 bytes a block) in the packed form. The CUDA backend
  // runs these as cudaMemcpy2DAsync calls.
  cpu::BlockSplit s{2, 3, 8};
  std::vector<cpu::PitchedCopy> pack = cpu::blockCopies(s, true);
  ASSERT_EQ(pack.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(pack[k].srcOffset, 8 * k);
    EXPECT_EQ(pack[k].srcPitch, 16);
    EXPECT_EQ(pack[k].dstOffset, 24 * k);
    EXPECT_EQ(pack[k].dstPitch, 8);
    EXPECT_EQ(pack[k].width, 8);
    EXPECT_EQ(pack[k].height, 3);
  }
  std::vector<cpu::PitchedCopy> unpack = cpu::blockCopies(s, false);
  ASSERT_EQ(unpack.size(), 2u);
  EXPECT_EQ(unpack[1].srcOffset, 24);
  EXPECT_EQ(unpack[1].srcPitch, 8);
  EXPECT_EQ(unpack[1].dstOffset, 8);
  EXPECT_EQ(unpack[1].dstPitch, 16);
  EXPECT_TRUE(cpu::blockCopies(cpu::BlockSplit{2, 0, 8}, true).empty());
  EXPECT_TRUE(cpu::blockSplit({1, 1, 4}, 2, 2, 4).packed()); // one row
  EXPECT_FALSE(cpu::blockSplit({2, 3, 4}, 2, 2, 4).packed());
}

TEST(CollectiveTest, AllGatherConcatenatesTheGroupInOrder) {
  runCasesOf("all_gather");
}

TEST(CollectiveTest, ReduceScatterKeepsThisRanksBlockOfTheSum) {
  runCasesOf("reduce_scatter");
}

TEST(CollectiveTest, AllToAllSendsBlockJToGroupRankJ) {
  runCasesOf("all_to_all");
}

/// The message `verify` gives `c` over mesh axes `axes` ("" when it passes).
std::string refusal(const Case &c, const std::vector<int64_t> &axes,
                    std::optional<std::string> reduction = std::nullopt,
                    bool inPlace = false) {
  Built b;
  build(b, c, 0);
  plan::Instruction &inst = *b.prog->mutable_instructions(0);
  (*inst.mutable_attrs())["axes"].mutable_ints()->clear_values();
  for (int64_t a : axes)
    (*inst.mutable_attrs())["axes"].mutable_ints()->add_values(a);
  if (reduction)
    setS(inst, "reduction", *reduction);
  const plan::Buffer *x = &b.prog->buffers(b.x), *y = &b.prog->buffers(b.y);
  OpView op{b.plan, inst, {x}, {inPlace ? x : y}};
  Status s = findKernel(c.op)->verify(op);
  return s.isOk() ? "" : s.message();
}

TEST(CollectiveTest, BadAttributesAndShapesAreRefused) {
  Case gather{"all_gather", {2, 3}, {2, 6}, {{"axis", 1}}};
  EXPECT_EQ(refusal(gather, {1}), "");
  EXPECT_EQ(refusal({"all_gather", {2, 3}, {4, 3}, {{"axis", 1}}}, {1}),
            "output [4, 3] is not input [2, 3] gathered along axis 1 over "
            "the 2 ranks of mesh axes [1] (that is [2, 6])");
  EXPECT_EQ(refusal({"all_gather", {2, 3}, {2, 12}, {{"axis", 1}}}, {0, 1}),
            "");
  EXPECT_EQ(refusal({"all_gather", {2, 3}, {2, 6}, {{"axis", 2}}}, {1}),
            "axis 2 is not a dimension of the rank-2 input");
  EXPECT_EQ(refusal({"all_gather", {2, 3}, {2, 6}, {}}, {1}),
            "missing attribute 'axis'");
  EXPECT_EQ(refusal(gather, {2}),
            "mesh axis 2 does not exist (the mesh has 2 axes)");
  EXPECT_EQ(refusal(gather, {1, 1}), "mesh axis 1 is listed twice");
  EXPECT_EQ(refusal({"all_gather", {2, 3}, {2, 12}, {{"axis", 1}}}, {1, 0}),
            "mesh axes [1, 0] are not ascending (the group is numbered "
            "row-major over ascending axes)");
  Built mixed;
  build(mixed, gather, 1);
  mixed.prog->mutable_buffers(mixed.y)->set_dtype(plan::I64);
  OpView mixedOp{mixed.plan,
                 mixed.prog->instructions(0),
                 {&mixed.prog->buffers(mixed.x)},
                 {&mixed.prog->buffers(mixed.y)}};
  Status s = cpu::verifyAllGather(mixedOp);
  EXPECT_EQ(s.isOk() ? "" : s.message(),
            "input and output differ in element type (f32 and i64)");
  EXPECT_EQ(refusal({"all_gather", {2, 3}, {2, 3}, {{"axis", 1}}}, {},
                    std::nullopt, /*inPlace=*/true),
            "output buffer 0 'x' is also an input; this op cannot run in "
            "place");

  Case scatter{"reduce_scatter", {2, 4}, {2, 2}, {{"axis", 1}}};
  EXPECT_EQ(refusal(scatter, {1}), "");
  EXPECT_EQ(refusal(scatter, {1}, "max"),
            "reduction 'max' is not supported (only 'sum')");
  EXPECT_EQ(refusal({"reduce_scatter", {2, 3}, {2, 1}, {{"axis", 1}}}, {1}),
            "axis 1 of input [2, 3] does not split evenly over the 2 ranks of "
            "mesh axes [1]");
  EXPECT_EQ(refusal({"reduce_scatter", {2, 4}, {1, 4}, {{"axis", 1}}}, {1}),
            "output [1, 4] is not input [2, 4] scattered along axis 1 over "
            "the 2 ranks of mesh axes [1] (that is [2, 2])");
  EXPECT_EQ(
      refusal({"reduce_scatter", {2, 4}, {2, 2}, {{"axis", 1}}, plan::I64},
              {1}),
      "input 0 (buffer 0 'x') is i64, expected f32");

  Case a2a{
      "all_to_all", {2, 4}, {4, 2}, {{"split_axis", 1}, {"concat_axis", 0}}};
  EXPECT_EQ(refusal(a2a, {1}), "");
  EXPECT_EQ(refusal({"all_to_all",
                     {2, 4},
                     {2, 4},
                     {{"split_axis", 1}, {"concat_axis", 0}}},
                    {1}),
            "output [2, 4] is not input [2, 4] split along axis 1 and "
            "concatenated along axis 0 over the 2 ranks of mesh axes [1] "
            "(that is [4, 2])");
  EXPECT_EQ(refusal({"all_to_all",
                     {3, 4},
                     {6, 2},
                     {{"split_axis", 0}, {"concat_axis", 1}}},
                    {1}),
            "split_axis 0 of input [3, 4] does not split evenly over the 2 "
            "ranks of mesh axes [1]");
  EXPECT_EQ(refusal({"all_to_all", {2, 4}, {4, 2}, {{"split_axis", 1}}}, {1}),
            "missing attribute 'concat_axis'");
  EXPECT_EQ(refusal({"all_to_all",
                     {2, 4},
                     {4, 2},
                     {{"split_axis", 1}, {"concat_axis", -1}}},
                    {1}),
            "concat_axis -1 is not a dimension of the rank-2 input");
}

/// A forward plan of four programs: CONSTANT x (rank r's values 10 r + i)
/// -> all_gather, reduce_scatter and all_to_all over mesh axis tp (1), each
/// into its own buffer.
plan::Plan executorPlan() {
  plan::Plan p = meshPlan();
  for (int r = 0; r < 4; ++r) {
    plan::Program &prog = *p.add_programs();
    prog.add_ranks(r);
    prog.set_loss_buffer(-1);
    int32_t x = addBuffer(prog, "x", plan::CONSTANT, {2, 2});
    std::vector<float> v;
    for (int i = 0; i < 4; ++i)
      v.push_back(static_cast<float>(10 * r + i));
    setData(buffer(prog, x), v);
    int32_t g = addBuffer(prog, "gathered", plan::TEMPORARY, {2, 4});
    int32_t s = addBuffer(prog, "scattered", plan::TEMPORARY, {2, 1});
    int32_t t = addBuffer(prog, "exchanged", plan::TEMPORARY, {4, 1});
    plan::Instruction &gi = addInst(prog, "all_gather", {x}, {g});
    setInts(gi, "axes", {1});
    setI(gi, "axis", 1);
    plan::Instruction &si = addInst(prog, "reduce_scatter", {x}, {s});
    setInts(si, "axes", {1});
    setI(si, "axis", 1);
    setS(si, "reduction", "sum");
    plan::Instruction &ti = addInst(prog, "all_to_all", {x}, {t});
    setInts(ti, "axes", {1});
    setI(ti, "split_axis", 1);
    setI(ti, "concat_axis", 0);
  }
  return p;
}

TEST(CollectiveTest, TheExecutorCreatesTheGroupsTheseOpsName) {
  plan::Plan p = executorPlan();
  Status valid = validatePlan(p, "tp.loomplan");
  ASSERT_TRUE(valid.isOk()) << valid.message();
  std::vector<std::vector<float>> gathered(4), scattered(4), exchanged(4);
  std::vector<std::string> failures =
      runRanks(4, [&](Communicator &world) -> Status {
        LOOM_ASSIGN_OR_RETURN(auto exec,
                              Executor::create(p, world, "tp.loomplan"));
        LOOM_RETURN_IF_ERROR(exec->runStep(0));
        int r = world.rank();
        gathered[r] =
            exec->readBuffer(*exec->findBufferByName("gathered")).toF32();
        scattered[r] =
            exec->readBuffer(*exec->findBufferByName("scattered")).toF32();
        exchanged[r] =
            exec->readBuffer(*exec->findBufferByName("exchanged")).toF32();
        return Status::ok();
      });
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(failures[r], "") << "rank " << r;
  // Ranks 2 and 3 are the tp group of dp = 1: x is [[20, 21], [22, 23]] on
  // rank 2 and [[30, 31], [32, 33]] on rank 3.
  EXPECT_EQ(gathered[2], (std::vector<float>{20, 21, 30, 31, 22, 23, 32, 33}));
  EXPECT_EQ(gathered[3], gathered[2]);
  EXPECT_EQ(scattered[2], (std::vector<float>{50, 54}));
  EXPECT_EQ(scattered[3], (std::vector<float>{52, 56}));
  EXPECT_EQ(exchanged[2], (std::vector<float>{20, 22, 30, 32}));
  EXPECT_EQ(exchanged[3], (std::vector<float>{21, 23, 31, 33}));
  EXPECT_EQ(gathered[0], (std::vector<float>{0, 1, 10, 11, 2, 3, 12, 13}));
}

} // namespace
