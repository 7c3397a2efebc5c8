//===- ShardedModel.h - A small model sharded over dp x tp ---------*- C++
//-*-===//
//
// Test fixture of the sharded-parameter and checkpoint tests: an ONNX file of
// five initializers and plans that split them over a dp x tp mesh in every
// way `dim_shardings` allows (blocks, both axes, replicated), with the
// expected slice of each rank written out apart from runtime/ShardLayout.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_SHARDEDMODEL_H
#define LOOM_TEST_UNIT_RUNTIME_SHARDEDMODEL_H

#include "TestPlans.h"
#include "runtime/Session.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::runtime::test {

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
inline const std::vector<Param> kParams = {
    {"qkv", plan::PARAMETER, {6, 4}, {{{1}, 3}, {}}, 0},
    {"proj", plan::PARAMETER, {4, 6}, {{}, {{1}, 1}}, 100},
    {"bias", plan::PARAMETER, {4}, {}, 10},
    {"mlp", plan::PARAMETER, {8, 6}, {{{0}, 2}, {{1}, 3}}, 200},
    {"bn.running_mean", plan::RUNNING_STAT, {8}, {{{1}, 1}}, 300},
};

inline std::vector<float> initializer(const Param &p) {
  std::vector<float> v(numElements(p.global));
  std::iota(v.begin(), v.end(), p.first);
  return v;
}

/// The spec, written out apart from runtime/ShardLayout.cpp: local index
/// `i` of a dimension of `size` in `blocks` blocks over `n` ranks, on the
/// rank of index `k` among them.
inline int64_t pieceIndex(int64_t i, int64_t size, int64_t blocks, int64_t n,
                          int64_t k) {
  int64_t piece = size / blocks / n;
  return (i / piece) * (size / blocks) + k * piece + i % piece;
}

/// The elements of `whole` that rank (d, t) of the 2 x 2 mesh holds.
inline std::vector<float>
sliceOf(const Param &p, const std::vector<float> &whole, int64_t d, int64_t t) {
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

class ShardedModelTest : public ::testing::Test {
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

} // namespace loom::runtime::test

#endif // LOOM_TEST_UNIT_RUNTIME_SHARDEDMODEL_H
