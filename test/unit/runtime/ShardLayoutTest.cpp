//===- ShardLayoutTest.cpp - Segments of shards, copies, plan rules -------===//

#include "runtime/ShardLayout.h"
#include "TestPlans.h"
#include "runtime/Plan.h"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

using Segments = std::vector<ShardSegment>;

/// A plan on a `dp` x `tp` mesh (one program for every rank) with one
/// PARAMETER `w` of local shape `local` and global shape `global`.
plan::Plan meshPlan(int64_t dp, int64_t tp, const std::vector<int64_t> &local,
                    const std::vector<int64_t> &global) {
  plan::Plan p = makePlan(static_cast<int>(dp * tp), false);
  p.mutable_mesh(0)->set_size(dp);
  plan::MeshAxis *axis = p.add_mesh();
  axis->set_name("tp");
  axis->set_size(tp);
  plan::Program &prog = *p.add_programs();
  for (int r = 0; r < dp * tp; ++r)
    prog.add_ranks(r);
  prog.set_loss_buffer(-1);
  int32_t w = addBuffer(prog, "w", plan::PARAMETER, local);
  buffer(prog, w).set_binding("w");
  buffer(prog, w).set_zeros(true);
  for (int64_t d : global)
    buffer(prog, w).add_global_shape(d);
  return p;
}

plan::Buffer &weight(plan::Plan &p) {
  return *p.mutable_programs(0)->mutable_buffers(0);
}

void shard(plan::Buffer &b, const std::vector<int32_t> &axes, int64_t blocks) {
  plan::DimSharding *s = b.add_dim_shardings();
  for (int32_t a : axes)
    s->add_axes(a);
  s->set_blocks(blocks);
}

/// The layout of `b` on the rank at mesh coordinates (d, t) of dp x tp.
ShardLayout at(const plan::Buffer &b, int64_t dp, int64_t tp, int64_t d,
               int64_t t) {
  return shardLayout(b, {dp, tp}, {d, t});
}

TEST(ShardLayoutTest, OneBlockSplitOverTp) {
  plan::Plan p = meshPlan(2, 2, {4, 4}, {8, 4});
  shard(weight(p), {1}, 1);
  shard(weight(p), {}, 0);
  for (int64_t d : {0, 1}) {
    ShardLayout t0 = at(weight(p), 2, 2, d, 0), t1 = at(weight(p), 2, 2, d, 1);
    EXPECT_EQ(t0.dims[0], (Segments{{0, 0, 4}}));
    EXPECT_EQ(t1.dims[0], (Segments{{4, 0, 4}}));
    EXPECT_EQ(t1.dims[1], (Segments{{0, 0, 4}}));
    EXPECT_FALSE(t0.isWhole());
    EXPECT_EQ(t1.global, (std::vector<int64_t>{8, 4}));
    EXPECT_EQ(t1.local, (std::vector<int64_t>{4, 4}));
  }
}

TEST(ShardLayoutTest, FusedQkvTakesItsPieceOfEveryBlock) {
  // [6, 4] in 3 blocks over tp = 2: rows 0, 2, 4 and rows 1, 3, 5.
  plan::Plan p = meshPlan(1, 2, {3, 4}, {6, 4});
  shard(weight(p), {1}, 3);
  shard(weight(p), {}, 0);
  EXPECT_EQ(at(weight(p), 1, 2, 0, 0).dims[0],
            (Segments{{0, 0, 1}, {2, 1, 1}, {4, 2, 1}}));
  EXPECT_EQ(at(weight(p), 1, 2, 0, 1).dims[0],
            (Segments{{1, 0, 1}, {3, 1, 1}, {5, 2, 1}}));
  // Pieces of two rows: [12] in 3 blocks of 4.
  plan::Plan wide = meshPlan(1, 2, {6}, {12});
  shard(weight(wide), {1}, 3);
  EXPECT_EQ(at(weight(wide), 1, 2, 0, 1).dims[0],
            (Segments{{2, 0, 2}, {6, 2, 2}, {10, 4, 2}}));
}

TEST(ShardLayoutTest, TwoAxesSplitOneDimensionInTheirListedOrder) {
  // [8] over dp x tp = 2 x 2: the index among (dp, tp) is 2 d + t.
  plan::Plan p = meshPlan(2, 2, {2}, {8});
  shard(weight(p), {0, 1}, 1);
  EXPECT_EQ(shardGroupSize(weight(p).dim_shardings(0), {2, 2}), 4);
  EXPECT_EQ(at(weight(p), 2, 2, 1, 0).dims[0], (Segments{{4, 0, 2}}));
  EXPECT_EQ(at(weight(p), 2, 2, 0, 1).dims[0], (Segments{{2, 0, 2}}));
  // Listed (tp, dp): the index is 2 t + d.
  weight(p).mutable_dim_shardings(0)->clear_axes();
  weight(p).mutable_dim_shardings(0)->add_axes(1);
  weight(p).mutable_dim_shardings(0)->add_axes(0);
  EXPECT_EQ(at(weight(p), 2, 2, 1, 0).dims[0], (Segments{{2, 0, 2}}));
  EXPECT_EQ(at(weight(p), 2, 2, 0, 1).dims[0], (Segments{{4, 0, 2}}));
  // Three blocks over both axes: rank (1, 1) holds the last row of each.
  plan::Plan qkv = meshPlan(2, 2, {3}, {12});
  shard(weight(qkv), {0, 1}, 3);
  EXPECT_EQ(at(weight(qkv), 2, 2, 1, 1).dims[0],
            (Segments{{3, 0, 1}, {7, 1, 1}, {11, 2, 1}}));
}

TEST(ShardLayoutTest, TwoDimensionsOnTwoAxesOfA2x2Mesh) {
  plan::Plan p = meshPlan(2, 2, {2, 3}, {4, 6});
  shard(weight(p), {0}, 1);
  shard(weight(p), {1}, 1);
  ShardLayout l = at(weight(p), 2, 2, 0, 1);
  EXPECT_EQ(l.dims[0], (Segments{{0, 0, 2}}));
  EXPECT_EQ(l.dims[1], (Segments{{3, 0, 3}}));
  l = at(weight(p), 2, 2, 1, 0);
  EXPECT_EQ(l.dims[0], (Segments{{2, 0, 2}}));
  EXPECT_EQ(l.dims[1], (Segments{{0, 0, 3}}));
}

TEST(ShardLayoutTest, UnsplitBlocksAreOneWholeSegment) {
  plan::Plan p = meshPlan(2, 2, {6}, {6});
  shard(weight(p), {}, 3);
  ShardLayout l = at(weight(p), 2, 2, 1, 1);
  EXPECT_EQ(l.dims[0], (Segments{{0, 0, 6}}));
  EXPECT_TRUE(l.isWhole());
}

TEST(ShardLayoutTest, ShardOffsetGivesOneSegmentPerDimension) {
  plan::Plan p = meshPlan(1, 1, {1, 2}, {2, 2});
  weight(p).add_shard_offset(1);
  weight(p).add_shard_offset(0);
  ShardLayout l = shardLayout(weight(p), {1, 1}, {0, 0});
  EXPECT_EQ(l.dims[0], (Segments{{1, 0, 1}}));
  EXPECT_EQ(l.dims[1], (Segments{{0, 0, 2}}));
  EXPECT_FALSE(l.isWhole());
  // No global_shape: the buffer is its own global tensor.
  plan::Plan plain = meshPlan(1, 1, {3}, {});
  EXPECT_TRUE(shardLayout(weight(plain), {1, 1}, {0, 0}).isWhole());
}

/// Global index of local index `i` of a dimension of size `size` in
/// `blocks` blocks over `n` ranks, on the rank of index `k`: the spec,
/// written independently of the segments.
int64_t pieceIndex(int64_t i, int64_t size, int64_t blocks, int64_t n,
                   int64_t k) {
  int64_t piece = size / blocks / n;
  return (i / piece) * (size / blocks) + k * piece + i % piece;
}

template <typename T> void roundTrip() {
  // [2, 6, 4]: dim 1 in 3 blocks over tp, dim 2 over dp, on dp x tp = 2 x 2.
  std::vector<int64_t> global = {2, 6, 4};
  plan::Plan p = meshPlan(2, 2, {2, 3, 2}, global);
  shard(weight(p), {}, 0);
  shard(weight(p), {1}, 3);
  shard(weight(p), {0}, 1);
  std::vector<T> whole(48);
  std::iota(whole.begin(), whole.end(), T(1));
  std::vector<T> rebuilt(48, T(0));
  for (int64_t d : {0, 1})
    for (int64_t t : {0, 1}) {
      ShardLayout l = at(weight(p), 2, 2, d, t);
      std::vector<T> local(12);
      copyGlobalToShard(l, sizeof(T), whole.data(), local.data());
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t b = 0; b < 3; ++b)
          for (int64_t c = 0; c < 2; ++c) {
            int64_t g = (a * 6 + pieceIndex(b, 6, 3, 2, t)) * 4 +
                        pieceIndex(c, 4, 1, 2, d);
            ASSERT_EQ(local[(a * 3 + b) * 2 + c], whole[g])
                << "rank (" << d << ", " << t << ") element " << a << "," << b
                << "," << c;
          }
      copyShardToGlobal(l, sizeof(T), local.data(), rebuilt.data());
    }
  EXPECT_EQ(rebuilt, whole);
}

TEST(ShardLayoutTest, CopiesBothWaysForAnyElementSize) {
  roundTrip<uint16_t>();
  roundTrip<float>();
  roundTrip<int64_t>();
}

TEST(ShardLayoutTest, ScalarsAndEmptyTensorsCopy) {
  ShardLayout scalar = blockLayout({}, {}, {});
  float one = 2.5f, out = 0;
  copyGlobalToShard(scalar, 4, &one, &out);
  EXPECT_EQ(out, 2.5f);
  ShardLayout empty = blockLayout({0, 3}, {0, 0}, {0, 3});
  copyGlobalToShard(empty, 4, nullptr, nullptr); // nothing to touch
  EXPECT_TRUE(empty.dims[0].empty());
}

TEST(ShardLayoutTest, CopiesBetweenShardsOfDifferentMeshes) {
  // [6, 4] with dim 0 in 3 blocks: written by tp = 2 (each rank rows of
  // every block), read by tp = 3 splitting dim 1 instead, and by whole
  // tensors; the pieces of each source meet each destination in runs.
  std::vector<int64_t> global = {6, 4};
  std::vector<float> whole(24);
  std::iota(whole.begin(), whole.end(), 1.f);
  plan::Plan writer = meshPlan(1, 2, {3, 4}, global);
  shard(weight(writer), {1}, 3);
  shard(weight(writer), {}, 0);
  plan::Plan reader = meshPlan(1, 2, {6, 2}, global);
  shard(weight(reader), {}, 0);
  shard(weight(reader), {1}, 1);
  for (int64_t t = 0; t < 2; ++t) {
    ShardLayout to = at(weight(reader), 1, 2, 0, t);
    std::vector<float> want(12), got(12, -1.f);
    copyGlobalToShard(to, 4, whole.data(), want.data());
    int64_t copied = 0;
    for (int64_t w = 0; w < 2; ++w) {
      ShardLayout from = at(weight(writer), 1, 2, 0, w);
      std::vector<float> piece(12);
      copyGlobalToShard(from, 4, whole.data(), piece.data());
      copied += copyShardToShard(from, piece.data(), to, got.data(), 4);
    }
    EXPECT_EQ(copied, 12) << "each element of the shard once";
    EXPECT_EQ(got, want) << "reader rank " << t;
  }
  // Disjoint shards share nothing; a whole tensor takes all of a shard.
  ShardLayout top = blockLayout(global, {0, 0}, {3, 4});
  ShardLayout bottom = blockLayout(global, {3, 0}, {3, 4});
  ShardLayout all = blockLayout(global, {0, 0}, {6, 4});
  std::vector<float> out(24, 0.f);
  EXPECT_EQ(copyShardToShard(top, whole.data(), bottom, out.data(), 4), 0);
  EXPECT_EQ(copyShardToShard(bottom, whole.data() + 12, all, out.data(), 4),
            12);
  EXPECT_EQ(std::vector<float>(out.begin() + 12, out.end()),
            std::vector<float>(whole.begin() + 12, whole.end()));
  ShardLayout scalar = blockLayout({}, {}, {});
  float one = 3.5f, into = 0;
  EXPECT_EQ(copyShardToShard(scalar, &one, scalar, &into, 4), 1);
  EXPECT_EQ(into, 3.5f);
}

// --- Plan validation ------------------------------------------------------

/// The error `validatePlan` gives after `mutate` changes a valid fused
/// weight ([3, 4] of [6, 4], 3 blocks on dim 0 over tp), or "" when valid.
template <typename Fn> std::string refusal(Fn mutate) {
  plan::Plan p = meshPlan(2, 2, {3, 4}, {6, 4});
  shard(weight(p), {1}, 3);
  shard(weight(p), {}, 0);
  mutate(p, weight(p));
  Status s = validatePlan(p, "p.loomplan");
  return s.isOk() ? "" : s.message();
}

TEST(ShardLayoutTest, ValidShardingsPass) {
  EXPECT_EQ(refusal([](plan::Plan &, plan::Buffer &) {}), "");
  // Blocks 0 means one block; optimizer state and running stats may shard.
  EXPECT_EQ(refusal([](plan::Plan &, plan::Buffer &b) {
              b.mutable_dim_shardings(0)->set_blocks(0);
              b.set_role(plan::OPTIMIZER_STATE);
              b.set_state("exp_avg");
            }),
            "");
  // The kernels may see the [3, 4] shard of q/k/v rows as [3, 1, 4]: the
  // blocks as a dimension of their own.
  EXPECT_EQ(refusal([](plan::Plan &, plan::Buffer &b) {
              b.clear_shape();
              for (int64_t d : {3, 1, 4})
                b.add_shape(d);
            }),
            "");
}

TEST(ShardLayoutTest, AViewedShardTakesItsShapeFromTheGlobalOne) {
  // A fused [6, 4] weight, 3 blocks on dim 0 over tp = 2, which the kernels
  // see as [3, 1, 4]: the layout is the [3, 4] shard's all the same.
  plan::Buffer b;
  for (int64_t d : {3, 1, 4})
    b.add_shape(d);
  for (int64_t d : {6, 4})
    b.add_global_shape(d);
  plan::DimSharding *rows = b.add_dim_shardings();
  rows->add_axes(0);
  rows->set_blocks(3);
  b.add_dim_shardings();
  ShardLayout layout = shardLayout(b, {2}, {1});
  EXPECT_EQ(layout.local, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(globalIndices(layout, 0), (std::vector<int64_t>{1, 3, 5}));
}

TEST(ShardLayoutTest, ValidationRefusesBadShardings) {
  EXPECT_EQ(refusal([](plan::Plan &, plan::Buffer &b) {
              b.mutable_dim_shardings()->RemoveLast();
            }),
            "p.loomplan: program 0: buffer 0 'w': 1 dim_shardings for the 2 "
            "dimension(s) of global_shape [6, 4]");
  struct Case {
    std::function<void(plan::Plan &, plan::Buffer &)> mutate;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](plan::Plan &, plan::Buffer &b) {
         b.mutable_dim_shardings(1)->add_axes(2);
       },
       "dim_shardings of dimension 1 name mesh axis 2, which the mesh (dp=2 x "
       "tp=2) does not have"},
      {[](plan::Plan &, plan::Buffer &b) {
         b.mutable_dim_shardings(0)->add_axes(1);
       },
       "mesh axis 1 ('tp') splits dimension 0 twice"},
      {[](plan::Plan &, plan::Buffer &b) {
         b.mutable_dim_shardings(1)->add_axes(1);
       },
       "mesh axis 1 ('tp') splits dimension 1 and dimension 0"},
      {[](plan::Plan &, plan::Buffer &b) {
         b.mutable_dim_shardings(0)->set_blocks(-1);
       },
       "dim_shardings of dimension 0 has -1 blocks"},
      {[](plan::Plan &, plan::Buffer &b) {
         b.mutable_dim_shardings(0)->set_blocks(4);
       },
       "dimension 0 of global size 6 does not split into 4 block(s) over the "
       "2 rank(s) of mesh axes [1]"},
      {[](plan::Plan &, plan::Buffer &b) {
         b.mutable_dim_shardings(0)->add_axes(0); // blocks of 2 over 4 ranks
       },
       "dimension 0 of global size 6 does not split into 3 block(s) over the "
       "4 rank(s) of mesh axes [1, 0]"},
      {[](plan::Plan &, plan::Buffer &b) { b.set_global_shape(0, 12); },
       "dimension 0 has local size 3; global size 12 over the 2 rank(s) of "
       "mesh axes [1] is 6"},
      {[](plan::Plan &, plan::Buffer &b) {
         b.add_shard_offset(0);
         b.add_shard_offset(0);
       },
       "has both dim_shardings and shard_offset; a sharded buffer's place "
       "comes from the rank's mesh coordinate"},
      {[](plan::Plan &, plan::Buffer &b) {
         b.add_global_shape(2);
         b.add_dim_shardings();
       },
       "shape [3, 4] views a shard of 24 elements (global_shape [6, 4, 2] "
       "over its dim_shardings)"},
      {[](plan::Plan &, plan::Buffer &b) {
         b.set_role(plan::TEMPORARY);
         b.clear_zeros();
       },
       "TEMPORARY buffer has dim_shardings; only PARAMETER, OPTIMIZER_STATE "
       "and RUNNING_STAT buffers may be sharded"},
  };
  for (const Case &c : cases) {
    std::string got = refusal(c.mutate);
    EXPECT_EQ(got, "p.loomplan: program 0: buffer 0 'w': " + c.message);
    EXPECT_EQ(got.find('\n'), std::string::npos);
  }
}

} // namespace
