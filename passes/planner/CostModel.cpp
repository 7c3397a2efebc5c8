//===- CostModel.cpp - Roofline ops and alpha-beta collectives --*- C++ -*-===//

#include "passes/planner/CostModel.h"

#include <algorithm>

using namespace mlir::loom;
using namespace mlir::loom::planner;

double planner::peakFlops(const Cluster &cluster, Precision precision) {
  return (precision == Precision::Bf16 ? cluster.peakTflopsBf16
                                       : cluster.peakTflopsFp32) *
         1e12;
}

llvm::StringRef planner::collectiveName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Send:
    return "send";
  case CollectiveKind::Recv:
    return "recv";
  }
  llvm_unreachable("unknown collective kind");
}

/// The two roofline terms of `op`: FLOP time and memory time.
static std::pair<double, double> rooflineTerms(const OpRecord &op,
                                               const Cluster &cluster) {
  double peak = peakFlops(cluster, op.precision);
  double hbm = cluster.hbmGBps * 1e9;
  return {peak > 0 ? op.flops / peak : 0, hbm > 0 ? op.bytes / hbm : 0};
}

double planner::rooflineSeconds(const OpRecord &op, const Cluster &cluster) {
  auto [flopTime, memoryTime] = rooflineTerms(op, cluster);
  return std::max(flopTime, memoryTime);
}

bool planner::isComputeBound(const OpRecord &op, const Cluster &cluster) {
  auto [flopTime, memoryTime] = rooflineTerms(op, cluster);
  return op.flops > 0 && flopTime >= memoryTime;
}

double planner::collectiveSeconds(CollectiveKind kind, double bytes,
                                  int64_t groupSize, const Link &link) {
  if (groupSize <= 1)
    return 0;
  double n = static_cast<double>(groupSize);
  double bandwidth = link.bandwidthGBps * 1e9;
  double alpha = link.latencyUs * 1e-6;
  // The share of S each device sends and the number of latency-bound rounds
  // (ring algorithms; nccl-tests' bus-bandwidth factors).
  double share, rounds;
  switch (kind) {
  case CollectiveKind::AllReduce:
    share = 2 * (n - 1) / n;
    rounds = 2 * (n - 1);
    break;
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    share = (n - 1) / n;
    rounds = n - 1;
    break;
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    share = 1;
    rounds = 1;
    break;
  }
  return (bandwidth > 0 ? share * bytes / bandwidth : 0) + rounds * alpha;
}

double StepEstimate::totalCommSeconds() const {
  double s = 0;
  for (const AxisTime &t : commSeconds)
    s += t.seconds;
  return s;
}

/// `axes` by name, joined by '+'.
static std::string axesLabel(const MeshTopology &topology,
                             llvm::ArrayRef<unsigned> axes) {
  std::string label;
  for (unsigned axis : axes) {
    if (topology.axes()[axis].size <= 1)
      continue;
    if (!label.empty())
      label += "+";
    label += topology.axes()[axis].name;
  }
  return label;
}

StepEstimate planner::estimateStep(const StepRequest &request,
                                   const Cluster &cluster,
                                   const MeshTopology &topology) {
  StepEstimate e;
  for (const OpRecord &op : request.ops) {
    e.flops += op.flops;
    double seconds = rooflineSeconds(op, cluster);
    if (isComputeBound(op, cluster))
      e.computeBoundSeconds += seconds;
    else
      e.memoryBoundSeconds += seconds;
  }
  for (const CollectiveRecord &c : request.collectives) {
    AxisGroup group = topology.group(c.axes);
    if (group.size <= 1)
      continue;
    double seconds = collectiveSeconds(c.kind, c.bytes, group.size,
                                       cluster.link(group.level));
    std::string label = axesLabel(topology, c.axes);
    auto it = llvm::find_if(e.commSeconds,
                            [&](const AxisTime &t) { return t.axes == label; });
    if (it == e.commSeconds.end())
      e.commSeconds.push_back({label, seconds});
    else
      it->seconds += seconds;
  }
  e.stepSeconds =
      e.computeBoundSeconds + e.memoryBoundSeconds + e.totalCommSeconds();
  if (e.stepSeconds > 0) {
    e.modelTflops = e.flops / e.stepSeconds / 1e12;
    double peak = peakFlops(cluster, request.precision);
    e.mfu = peak > 0 ? e.flops / e.stepSeconds / peak : 0;
  }
  return e;
}
