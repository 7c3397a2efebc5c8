//===- CostModelTest.cpp - Roofline ops and alpha-beta collectives --------===//
//
// Expected values are worked out by hand from the closed forms
// (docs/planner.md), not by calling the code under test.
//
//===----------------------------------------------------------------------===//

#include "passes/planner/CostModel.h"

#include <gtest/gtest.h>

using namespace mlir::loom;
using namespace mlir::loom::planner;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// Relative closeness, for sums of floating-point terms.
void expectClose(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 * std::abs(expected))
      << "expected " << expected;
}

/// 10 / 100 TFLOP/s fp32 / bf16, 1000 GB/s HBM; 2 nodes of 8; NVLink-like
/// 100 GB/s, 5 us inside a node, 10 GB/s, 20 us across.
Cluster testCluster() {
  Cluster c;
  c.nodes = 2;
  c.devicesPerNode = 8;
  c.peakTflopsFp32 = 10;
  c.peakTflopsBf16 = 100;
  c.hbmGBps = 1000;
  c.intraNode = {100, 5};
  c.interNode = {10, 20};
  return c;
}

const Link kLink = {/*bandwidthGBps=*/100, /*latencyUs=*/5};

TEST(Collectives, RingAllReduceOfOneGiBOverEight) {
  // 2 * 7/8 * 2^30 B / 1e11 B/s + 2 * 7 * 5 us
  //   = 0.01879048192 s + 0.00007 s
  expectClose(collectiveSeconds(CollectiveKind::AllReduce, kGiB, 8, kLink),
              0.01886048192);
}

TEST(Collectives, GatherScatterAndAllToAllMoveSevenEighths) {
  // 7/8 * 2^30 / 1e11 + 7 * 5 us = 0.00939524096 + 0.000035
  for (CollectiveKind kind : {CollectiveKind::AllGather,
                              CollectiveKind::ReduceScatter,
                              CollectiveKind::AllToAll})
    expectClose(collectiveSeconds(kind, kGiB, 8, kLink), 0.00943024096);
}

TEST(Collectives, SendAndRecvMoveEverythingOnce) {
  // 2^30 / 1e11 + 5 us
  expectClose(collectiveSeconds(CollectiveKind::Send, kGiB, 2, kLink),
              0.01074241824);
  expectClose(collectiveSeconds(CollectiveKind::Recv, kGiB, 4, kLink),
              0.01074241824);
}

TEST(Collectives, OneDeviceGroupsAreFree) {
  for (CollectiveKind kind :
       {CollectiveKind::AllReduce, CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter, CollectiveKind::AllToAll,
        CollectiveKind::Send, CollectiveKind::Recv})
    EXPECT_EQ(collectiveSeconds(kind, kGiB, 1, kLink), 0);
}

TEST(Collectives, TwoDevicesAllReduce) {
  // n = 2: 2 * 1/2 * S / B + 2 alpha = 1e8 / 1e10 + 40 us.
  expectClose(collectiveSeconds(CollectiveKind::AllReduce, 1e8, 2,
                                {/*bandwidthGBps=*/10, /*latencyUs=*/20}),
              0.01004);
  EXPECT_EQ(collectiveName(CollectiveKind::ReduceScatter), "reduce_scatter");
}

TEST(Roofline, ComputeBoundGemmInBothPrecisions) {
  Cluster c = testCluster();
  // A 4096^3 GEMM: 2 * 4096^3 = 137438953472 FLOPs.
  OpRecord fp32{137438953472.0, 3 * 4096.0 * 4096 * 4, Precision::Fp32};
  // FLOPs: 1.37e11 / 1e13 = 13.74 ms; bytes: 201326592 / 1e12 = 0.2 ms.
  expectClose(rooflineSeconds(fp32, c), 0.0137438953472);
  EXPECT_TRUE(isComputeBound(fp32, c));
  // bf16 runs at 100 TFLOP/s: ten times faster.
  OpRecord bf16{137438953472.0, 3 * 4096.0 * 4096 * 2, Precision::Bf16};
  expectClose(rooflineSeconds(bf16, c), 0.00137438953472);
  EXPECT_TRUE(isComputeBound(bf16, c));
  EXPECT_EQ(peakFlops(c, Precision::Fp32), 1e13);
  EXPECT_EQ(peakFlops(c, Precision::Bf16), 1e14);
}

TEST(Roofline, MemoryBoundElementwise) {
  Cluster c = testCluster();
  // An add of 1M f32 elements: reads 8 MB, writes 4 MB: 12e6 / 1e12 s,
  // against 1e6 / 1e13 s of FLOPs.
  OpRecord add{1e6, 12e6, Precision::Fp32};
  expectClose(rooflineSeconds(add, c), 1.2e-5);
  EXPECT_FALSE(isComputeBound(add, c));
  // No FLOPs at all (a copy) is memory time alone.
  OpRecord copy{0, 8e6, Precision::Fp32};
  expectClose(rooflineSeconds(copy, c), 8e-6);
  EXPECT_FALSE(isComputeBound(copy, c));
}

TEST(StepEstimate, SumsOpsAndCollectivesPerAxis) {
  Cluster c = testCluster();
  MeshTopology mesh = MeshTopology::ppDpTp(1, 2, 8, c.devicesPerNode);
  StepRequest r;
  r.ops.push_back({137438953472.0, 3 * 4096.0 * 4096 * 4, Precision::Fp32});
  r.ops.push_back({1e6, 12e6, Precision::Fp32});
  // dp = 2 across the nodes: 1e8 / 1e10 + 2 * 20 us = 0.01004 s.
  r.collectives.push_back({CollectiveKind::AllReduce, 1e8, {1}});
  // tp = 8 inside a node: 7/8 * 8e8 / 1e11 + 7 * 5 us = 0.007035 s.
  r.collectives.push_back({CollectiveKind::AllGather, 8e8, {2}});
  r.collectives.push_back({CollectiveKind::AllGather, 8e8, {2}});
  // pp = 1: nothing to talk about.
  r.collectives.push_back({CollectiveKind::Send, 8e8, {0}});
  StepEstimate e = estimateStep(r, c, mesh);
  expectClose(e.computeBoundSeconds, 0.0137438953472);
  expectClose(e.memoryBoundSeconds, 1.2e-5);
  ASSERT_EQ(e.commSeconds.size(), 2u);
  EXPECT_EQ(e.commSeconds[0].axes, "dp");
  expectClose(e.commSeconds[0].seconds, 0.01004);
  EXPECT_EQ(e.commSeconds[1].axes, "tp");
  expectClose(e.commSeconds[1].seconds, 2 * 0.007035);
  // No overlap: the step is the plain sum.
  double step = 0.0137438953472 + 1.2e-5 + 0.01004 + 2 * 0.007035;
  expectClose(e.stepSeconds, step);
  double flops = 137438953472.0 + 1e6;
  expectClose(e.flops, flops);
  expectClose(e.modelTflops, flops / step / 1e12);
  expectClose(e.mfu, flops / step / 1e13);
}

TEST(StepEstimate, ABucketHidesBehindTheOpsBetweenItsStartAndWait) {
  Cluster c = testCluster();
  MeshTopology mesh = MeshTopology::ppDpTp(1, 2, 8, c.devicesPerNode);
  // Three ops of 0.01 s each (1e11 FLOPs at 10 TFLOP/s).
  StepRequest r;
  for (int i = 0; i < 3; ++i)
    r.ops.push_back({1e11, 0, Precision::Fp32});
  // dp = 2 across the nodes: 0.01004 s, started after op 0.
  CollectiveRecord sum{CollectiveKind::AllReduce, 1e8, {1}};
  sum.start = 1;
  // Waited for before op 2: op 1 hides all but 40 us of it.
  sum.wait = 2;
  r.collectives = {sum};
  StepEstimate e = estimateStep(r, c, mesh);
  expectClose(e.exposedCommSeconds, 0.00004);
  expectClose(e.stepSeconds, 0.03004);
  expectClose(e.commSeconds[0].seconds, 0.01004);
  // Blocking where it starts: all of it is exposed.
  r.collectives[0].wait = 1;
  e = estimateStep(r, c, mesh);
  expectClose(e.exposedCommSeconds, 0.01004);
  expectClose(e.stepSeconds, 0.04004);
  // Two buckets started together share the link, one after the other: the
  // second ends at 0.01 + 2 * 0.01004, 80 us after op 2.
  sum.wait = 3;
  r.collectives = {sum, sum};
  e = estimateStep(r, c, mesh);
  expectClose(e.exposedCommSeconds, 0.00008);
  expectClose(e.stepSeconds, 0.03008);
}

TEST(StepEstimate, WhatTheCoresMoveIsNotHidden) {
  // As above, a bucket started after op 0 and waited for before op 2, on
  // a cluster whose cores move a quarter of each bucket beside the compute
  // (a CPU's calibration): three quarters of its 0.01004 s hold the ops up
  // where it starts, the rest hides behind op 1.
  Cluster c = testCluster();
  c.commOverlap = 0.25;
  MeshTopology mesh = MeshTopology::ppDpTp(1, 2, 8, c.devicesPerNode);
  StepRequest r;
  for (int i = 0; i < 3; ++i) {
    r.ops.push_back({1e11, 0, Precision::Fp32});
    r.ops.back().kind = "matmul";
  }
  CollectiveRecord sum{CollectiveKind::AllReduce, 1e8, {1}};
  sum.start = 1, sum.wait = 2, sum.bucket = true;
  r.collectives = {sum};
  StepEstimate e = estimateStep(r, c, mesh);
  expectClose(e.exposedCommSeconds, 0.75 * 0.01004);
  expectClose(e.stepSeconds, 0.03 + 0.75 * 0.01004);
  // A blocking collective is all exposed, whatever the overlap.
  r.collectives[0].bucket = false;
  r.collectives[0].wait = 1;
  e = estimateStep(r, c, mesh);
  expectClose(e.exposedCommSeconds, 0.01004);
  // The seconds by kind: the ops under theirs, the collective under its
  // name (a bucket's with `_start`).
  expectClose(e.secondsByKind["matmul"], 0.03);
  expectClose(e.secondsByKind["all_reduce"], 0.01004);
  r.collectives[0].bucket = true;
  e = estimateStep(r, c, mesh);
  expectClose(e.secondsByKind["all_reduce_start"], 0.01004);
  EXPECT_EQ(e.secondsByKind.count("all_reduce"), 0u);
}

TEST(BucketBytes, TenTimesTheLatencyBandwidthProductWithinBounds) {
  // 10 n alpha B: 2 devices at 5 us and 5 GB/s ask for 500 kB.
  EXPECT_EQ(bucketBytes(2, {5, 5}), 500000);
  // 8 H100s at 3 us and 450 GB/s would take 108 MB: capped at 25 MiB.
  EXPECT_EQ(bucketBytes(8, {450, 3}), kMaxBucketBytes);
  // A link without latency still takes 64 KiB buckets.
  EXPECT_EQ(bucketBytes(2, {1000, 0}), 64 << 10);
}

TEST(StepEstimate, EmptyRequestIsZero) {
  StepEstimate e = estimateStep(StepRequest(), testCluster(),
                                MeshTopology::ppDpTp(1, 1, 1, 8));
  EXPECT_EQ(e.stepSeconds, 0);
  EXPECT_EQ(e.mfu, 0);
  EXPECT_TRUE(e.commSeconds.empty());
}

} // namespace
