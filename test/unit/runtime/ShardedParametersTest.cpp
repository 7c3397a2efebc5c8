//===- ShardedParametersTest.cpp - Shards in, global tensors out ----------===//
//
// Parameters split over the mesh axes of a dp x tp = 2 x 2 mesh: each rank's
// shard from the ONNX initializer and from `--init random` (the slice of the
// 1-rank fill), and the gather of every parameter on rank 0 for
// `--export-onnx`, with the ranks as threads (`runRanks`, runtime/comm/ThreadCommunicator.h).
//
//===----------------------------------------------------------------------===//

#include "ShardedModel.h"
#include "runtime/comm/ThreadCommunicator.h"
#include "runtime/onnx/OnnxWeights.h"

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

using ShardedParametersTest = ShardedModelTest;

TEST_F(ShardedParametersTest, ValidPlans) {
  EXPECT_TRUE(validatePlan(makeShardedPlan(2, 2, true), "p").isOk());
  EXPECT_TRUE(validatePlan(makeShardedPlan(1, 1, false), "p").isOk());
}

TEST_F(ShardedParametersTest, OnnxInitialisesEachRanksPieces) {
  plan::Plan p = makeShardedPlan(2, 2, true);
  ASSERT_TRUE(validatePlan(p, "p").isOk());
  for (int r = 0; r < 4; ++r) {
    int64_t d = r / 2, t = r % 2;
    RankOf world(r, 4);
    auto s = Session::create(p, world, "p.loomplan");
    ASSERT_TRUE(s.isOk()) << s.status().message();
    for (const Param &param : kParams) {
      StatusOr<HostTensor> got = (*s)->readBuffer(param.name);
      ASSERT_TRUE(got.isOk());
      EXPECT_EQ(got->toF32(), sliceOf(param, initializer(param), d, t))
          << param.name << " on rank " << r;
    }
  }
  // Rank tp = 1 holds rows 1, 3 and 5 of the fused weight.
  RankOf world(1, 4);
  auto s = Session::create(p, world);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ((*s)->readBuffer("qkv")->toF32(),
            (std::vector<float>{4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23}));
}

TEST_F(ShardedParametersTest, RandomInitIsTheSliceOfTheOneRankFill) {
  ParameterInit init{/*random=*/true, /*seed=*/42};
  LocalCommunicator one;
  auto whole =
      Session::create(makeShardedPlan(1, 1, false), one, "one", nullptr, init);
  ASSERT_TRUE(whole.isOk()) << whole.status().message();
  plan::Plan p = makeShardedPlan(2, 2, true);
  for (int r = 0; r < 4; ++r) {
    RankOf world(r, 4);
    auto s = Session::create(p, world, "p.loomplan", nullptr, init);
    ASSERT_TRUE(s.isOk()) << s.status().message();
    for (const Param &param : kParams) {
      std::vector<float> full = (*whole)->readBuffer(param.name)->toF32();
      if (param.role == plan::PARAMETER && !param.splits.empty()) {
        EXPECT_NE(full[0], full[1]) << "a random fill";
      }
      EXPECT_EQ((*s)->readBuffer(param.name)->toF32(),
                sliceOf(param, full, r / 2, r % 2))
          << param.name << " on rank " << r;
    }
  }
}

TEST_F(ShardedParametersTest, LocalParametersRefuseShards) {
  plan::Plan p = makeShardedPlan(2, 2, true);
  RankOf world(1, 4);
  auto s = Session::create(p, world);
  ASSERT_TRUE(s.isOk());
  auto params = (*s)->parameters();
  ASSERT_FALSE(params.isOk());
  EXPECT_EQ(params.status().message(),
            "parameter 'qkv' is sharded ([3, 4] of [6, 4] on rank 1); gather "
            "it from all ranks with parameters(world)");
}

TEST_F(ShardedParametersTest, GatherAssemblesGlobalTensorsOnRankZero) {
  // Each rank negates its shards; a replica of a lower rank's shard (dp = 1
  // of a buffer not split over dp, any rank but 0 of a replicated one)
  // writes 999 instead, which the gather must skip.
  plan::Plan p = makeShardedPlan(2, 2, true);
  std::vector<std::map<std::string, HostTensor>> gathered(4);
  std::vector<std::string> errors = runRanks(4, [&](Communicator &world) {
    int r = world.rank();
    // A plan error fails every rank alike, before any collective.
    LOOM_ASSIGN_OR_RETURN(auto s, Session::create(p, world, "p.loomplan"));
    for (const Param &param : kParams) {
      const plan::Buffer *b = s->executor().findBufferByName(param.name);
      bool overDp = false;
      for (const Split &split : param.splits)
        for (int32_t a : split.axes)
          overDp |= a == 0;
      bool replica = param.splits.empty() ? r != 0 : (!overDp && r / 2 == 1);
      std::vector<float> v = s->executor().readBuffer(*b).toF32();
      for (float &x : v)
        x = replica ? 999 : -x;
      LOOM_RETURN_IF_ERROR(s->executor().writeBuffer(
          *b, HostTensor::fromF32(bufferShape(*b), v)));
    }
    LOOM_ASSIGN_OR_RETURN(gathered[r], s->parameters(world));
    return s->exportOnnx(world, dir + "/out" + std::to_string(r) + ".onnx");
  });
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(errors[r], "") << "rank " << r;
  for (int r = 1; r < 4; ++r)
    EXPECT_TRUE(gathered[r].empty()) << "rank " << r;
  ASSERT_EQ(gathered[0].size(), 4u); // the running mean is no parameter
  auto reread = OnnxWeights::load(dir + "/out0.onnx");
  ASSERT_TRUE(reread.isOk()) << reread.status().message();
  for (const Param &param : kParams) {
    std::vector<float> want = initializer(param);
    for (float &x : want)
      x = -x;
    if (param.role == plan::PARAMETER) {
      ASSERT_EQ(gathered[0].count(param.name), 1u) << param.name;
      EXPECT_EQ(gathered[0][param.name].shape, param.global);
      EXPECT_EQ(gathered[0][param.name].toF32(), want) << param.name;
    }
    auto written = (*reread)->get(param.name, ElemType::F32);
    ASSERT_TRUE(written.isOk()) << written.status().message();
    EXPECT_EQ(written->toF32(), want) << param.name;
  }
  // Only rank 0 writes.
  for (int r = 1; r < 4; ++r) {
    struct stat st;
    EXPECT_NE(stat((dir + "/out" + std::to_string(r) + ".onnx").c_str(), &st),
              0);
  }
}

TEST_F(ShardedParametersTest, EveryStageContributesItsParameters) {
  // Two programs on a pp = 2 mesh: rank 0 holds `a`, rank 1 holds `b`.
  plan::Plan p = makePlan(2, false);
  p.mutable_mesh(0)->set_name("pp");
  for (int r = 0; r < 2; ++r) {
    plan::Program &prog = *p.add_programs();
    prog.add_ranks(r);
    prog.set_loss_buffer(-1);
    std::string name = r == 0 ? "a" : "b";
    plan::Buffer &b =
        buffer(prog, addBuffer(prog, name, plan::PARAMETER, {r + 2}));
    b.set_binding(name);
    setData(b, r == 0 ? std::vector<float>{1, 2} : std::vector<float>{3, 4, 5});
  }
  std::map<std::string, HostTensor> gathered;
  std::vector<std::string> errors = runRanks(2, [&](Communicator &world) {
    LOOM_ASSIGN_OR_RETURN(auto s, Session::create(p, world));
    LOOM_ASSIGN_OR_RETURN(auto params, s->parameters(world));
    if (world.rank() == 0)
      gathered = std::move(params);
    return Status::ok();
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  ASSERT_EQ(gathered.size(), 2u);
  EXPECT_EQ(gathered["a"].toF32(), (std::vector<float>{1, 2}));
  EXPECT_EQ(gathered["b"].toF32(), (std::vector<float>{3, 4, 5}));
}

} // namespace
