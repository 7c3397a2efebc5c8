//===- ShardedParametersTest.cpp - Shards in, global tensors out ----------===//
//
// Parameters split over the mesh axes of a dp x tp = 2 x 2 mesh: each rank's
// shard from the ONNX initializer and from `--init random` (the slice of the
// 1-rank fill), and the gather of every parameter on rank 0 for
// `--export-onnx`, with the ranks as threads (`runRanks`, runtime/comm/ThreadCommunicator.h).
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"
#include "runtime/comm/ThreadCommunicator.h"
#include "runtime/Session.h"
#include "runtime/onnx/OnnxWeights.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

/// Rank `r` of a world of `n` whose collectives are never called (creating
/// a program without collectives, reading its buffers).
class RankOf final : public Communicator {
public:
  RankOf(int r, int n) : r(r), n(n) {}
  int rank() const override { return r; }
  int size() const override { return n; }
  Status allReduceSum(float *, int64_t) override { return unused(); }
  Status allGather(const void *, void *, int64_t) override { return unused(); }
  Status reduceScatterSum(const float *, float *, int64_t) override {
    return unused();
  }
  Status allToAll(const void *, void *, int64_t) override { return unused(); }
  StatusOr<int> allReduceMin(int) override { return unused(); }
  Status barrier() override { return unused(); }
  Status broadcast(void *, int64_t, int) override { return unused(); }
  StatusOr<std::unique_ptr<Communicator>> split(int, int) override {
    return unused();
  }

private:
  static Status unused() { return makeError("RankOf has no collectives"); }
  int r, n;
};

/// How one parameter of the test model is split: per dimension, the mesh
/// axes (0 = dp, 1 = tp) and the number of blocks.
struct Split {
  std::vector<int32_t> axes;
  int64_t blocks = 1;
};

struct Param {
  std::string name;
  plan::Role role;
  std::vector<int64_t> global;
  std::vector<Split> splits; // empty: replicated
  float first;               // the initializer holds first, first + 1, ...
};

/// A fused q/k/v weight (3 blocks of rows over tp), a projection split by
/// columns over tp, a replicated bias, a weight split over both axes (rows
/// in 2 blocks over dp, columns in 3 over tp) and a running mean split
/// over tp.
const std::vector<Param> kParams = {
    {"qkv", plan::PARAMETER, {6, 4}, {{{1}, 3}, {}}, 0},
    {"proj", plan::PARAMETER, {4, 6}, {{}, {{1}, 1}}, 100},
    {"bias", plan::PARAMETER, {4}, {}, 10},
    {"mlp", plan::PARAMETER, {8, 6}, {{{0}, 2}, {{1}, 3}}, 200},
    {"bn.running_mean", plan::RUNNING_STAT, {8}, {{{1}, 1}}, 300},
};

std::vector<float> initializer(const Param &p) {
  std::vector<float> v(numElements(p.global));
  std::iota(v.begin(), v.end(), p.first);
  return v;
}

/// The spec, written out apart from runtime/ShardLayout.cpp: local index
/// `i` of a dimension of `size` in `blocks` blocks over `n` ranks, on the
/// rank of index `k` among them.
int64_t pieceIndex(int64_t i, int64_t size, int64_t blocks, int64_t n,
                   int64_t k) {
  int64_t piece = size / blocks / n;
  return (i / piece) * (size / blocks) + k * piece + i % piece;
}

/// The elements of `whole` that rank (d, t) of the 2 x 2 mesh holds.
std::vector<float> sliceOf(const Param &p, const std::vector<float> &whole,
                           int64_t d, int64_t t) {
  if (p.splits.empty())
    return whole;
  std::vector<int64_t> local = p.global, coord = {d, t};
  std::vector<std::vector<int64_t>> index(local.size());
  for (size_t dim = 0; dim < local.size(); ++dim) {
    const Split &s = p.splits[dim];
    int64_t n = 1, k = 0;
    for (int32_t a : s.axes) {
      n *= 2;
      k = k * 2 + coord[a];
    }
    local[dim] /= n;
    for (int64_t i = 0; i < local[dim]; ++i)
      index[dim].push_back(pieceIndex(i, p.global[dim], s.blocks, n, k));
  }
  std::vector<float> out;
  if (local.size() == 1) {
    for (int64_t i : index[0])
      out.push_back(whole[i]);
    return out;
  }
  for (int64_t i : index[0])
    for (int64_t j : index[1])
      out.push_back(whole[i * p.global[1] + j]);
  return out;
}

class ShardedParametersTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "/sharded_" + std::to_string(getpid());
    mkdir(dir.c_str(), 0777);
    modelPath = dir + "/model.onnx";
    onnx::ModelProto model;
    model.set_ir_version(8);
    onnx::GraphProto *g = model.mutable_graph();
    g->set_name("g");
    for (const Param &p : kParams) {
      onnx::TensorProto *t = g->add_initializer();
      t->set_name(p.name);
      t->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : p.global)
        t->add_dims(d);
      for (float v : initializer(p))
        t->add_float_data(v);
    }
    std::ofstream out(modelPath, std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&out));
  }

  /// The test model's forward plan (no instructions) on dp x tp, with the
  /// parameters split as `kParams` says, or, with `sharded` false, whole.
  plan::Plan makeShardedPlan(int64_t dp, int64_t tp, bool sharded) const {
    plan::Plan p = makePlan(static_cast<int>(dp * tp), false);
    p.mutable_mesh(0)->set_size(dp);
    plan::MeshAxis *axis = p.add_mesh();
    axis->set_name("tp");
    axis->set_size(tp);
    p.set_model_path(modelPath);
    plan::Program &prog = *p.add_programs();
    for (int r = 0; r < dp * tp; ++r)
      prog.add_ranks(r);
    prog.set_loss_buffer(-1);
    std::vector<int64_t> axisSize = {dp, tp};
    for (const Param &param : kParams) {
      bool split = sharded && !param.splits.empty();
      std::vector<int64_t> local = param.global;
      if (split)
        for (size_t d = 0; d < local.size(); ++d)
          for (int32_t a : param.splits[d].axes)
            local[d] /= axisSize[a];
      plan::Buffer &b =
          buffer(prog, addBuffer(prog, param.name, param.role, local));
      b.set_binding(param.name);
      b.set_onnx_initializer(param.name);
      b.mutable_init_rule()->set_kind(param.role == plan::PARAMETER
                                          ? plan::InitRule::NORMAL
                                          : plan::InitRule::ZEROS);
      b.mutable_init_rule()->set_std(0.02);
      if (param.role == plan::RUNNING_STAT)
        b.set_state("running_mean");
      if (!split)
        continue;
      for (int64_t d : param.global)
        b.add_global_shape(d);
      for (const Split &s : param.splits) {
        plan::DimSharding *ds = b.add_dim_shardings();
        for (int32_t a : s.axes)
          ds->add_axes(a);
        ds->set_blocks(s.blocks);
      }
    }
    return p;
  }

  std::string dir, modelPath;
};

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
