//===- ClusterTopologyTest.cpp - Which link each mesh axis talks over -----===//

#include "passes/planner/MeshTopology.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

using namespace mlir::loom;
using namespace mlir::loom::planner;

namespace {

enum Axis : unsigned { PP = 0, DP = 1, TP = 2 };

TEST(MeshTopology, TensorParallelInsideANodeDataParallelAcross) {
  // h100:2x8 as pp=1 x dp=2 x tp=8: each tp group is one node's 8 GPUs,
  // each dp group pairs the same GPU of the two nodes.
  MeshTopology mesh = MeshTopology::ppDpTp(1, 2, 8, /*devicesPerNode=*/8);
  AxisGroup tp = mesh.group(TP), dp = mesh.group(DP), pp = mesh.group(PP);
  EXPECT_EQ(tp.size, 8);
  EXPECT_EQ(tp.level, LinkLevel::IntraNode);
  EXPECT_EQ(dp.size, 2);
  EXPECT_EQ(dp.level, LinkLevel::InterNode);
  EXPECT_EQ(pp.size, 1);
  // Both together: all 16 devices.
  AxisGroup both = mesh.group({DP, TP});
  EXPECT_EQ(both.size, 16);
  EXPECT_EQ(both.level, LinkLevel::InterNode);
}

TEST(MeshTopology, TensorParallelOfSixteenSpansNodes) {
  MeshTopology mesh = MeshTopology::ppDpTp(1, 1, 16, 8);
  EXPECT_EQ(mesh.group(TP).size, 16);
  EXPECT_EQ(mesh.group(TP).level, LinkLevel::InterNode);
  EXPECT_EQ(mesh.group(DP).size, 1);
}

TEST(MeshTopology, WholeMeshInOneNode) {
  // cpu:4 is one node of four ranks: every axis is intra-node.
  MeshTopology mesh = MeshTopology::ppDpTp(2, 2, 1, 4);
  EXPECT_EQ(mesh.group(PP).level, LinkLevel::IntraNode);
  EXPECT_EQ(mesh.group(DP).level, LinkLevel::IntraNode);
  EXPECT_EQ(mesh.numDevices(), 4);
  EXPECT_EQ(mesh.stride(PP), 2);
  EXPECT_EQ(mesh.axisIndex("tp"), 2);
  EXPECT_EQ(mesh.axisIndex("ep"), -1);
}

/// Whether every group over `axes` of a `sizes` mesh (row-major ranks) stays
/// on one node of `perNode` ranks, by listing the groups.
bool allGroupsIntraNode(const std::vector<int64_t> &sizes,
                        const std::vector<unsigned> &axes, int64_t perNode) {
  int64_t world = 1;
  for (int64_t s : sizes)
    world *= s;
  std::map<std::vector<int64_t>, std::set<int64_t>> nodesOfGroup;
  for (int64_t rank = 0; rank < world; ++rank) {
    // Coordinates of `rank`; the group key drops the group's own axes.
    std::vector<int64_t> coord(sizes.size());
    int64_t r = rank;
    for (int i = sizes.size() - 1; i >= 0; --i) {
      coord[i] = r % sizes[i];
      r /= sizes[i];
    }
    for (unsigned a : axes)
      coord[a] = -1;
    nodesOfGroup[coord].insert(rank / perNode);
  }
  for (auto &[key, nodes] : nodesOfGroup)
    if (nodes.size() > 1)
      return false;
  return true;
}

TEST(MeshTopology, AgreesWithListingTheGroups) {
  // Every pp x dp x tp mesh of up to 24 devices on nodes of 1..12 devices,
  // every non-empty set of axes.
  int checked = 0;
  for (int64_t pp = 1; pp <= 4; ++pp)
    for (int64_t dp = 1; dp <= 6; ++dp)
      for (int64_t tp = 1; tp <= 6; ++tp) {
        if (pp * dp * tp > 24)
          continue;
        for (int64_t perNode = 1; perNode <= 12; ++perNode) {
          MeshTopology mesh = MeshTopology::ppDpTp(pp, dp, tp, perNode);
          for (unsigned mask = 1; mask < 8; ++mask) {
            std::vector<unsigned> axes;
            for (unsigned a = 0; a < 3; ++a)
              if (mask & (1u << a))
                axes.push_back(a);
            bool intra = allGroupsIntraNode({pp, dp, tp}, axes, perNode);
            AxisGroup g = mesh.group(axes);
            EXPECT_EQ(g.level == LinkLevel::IntraNode, intra)
                << "pp=" << pp << " dp=" << dp << " tp=" << tp
                << " perNode=" << perNode << " mask=" << mask;
            ++checked;
          }
        }
      }
  EXPECT_GT(checked, 1000);
}

TEST(Cluster, LinkOfEachLevel) {
  auto h100 = parseCluster("h100:2x8");
  ASSERT_TRUE(static_cast<bool>(h100));
  EXPECT_EQ(h100->link(LinkLevel::IntraNode).bandwidthGBps, 450);
  EXPECT_EQ(h100->link(LinkLevel::InterNode).bandwidthGBps, 50);
  EXPECT_EQ(h100->link(LinkLevel::InterNode).latencyUs, 10);
}

} // namespace
