//===- CostModel.cpp - Roofline ops and alpha-beta collectives --*- C++ -*-===//

#include "passes/planner/CostModel.h"

#include "llvm/ADT/SmallString.h"

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

/// Seconds a product takes to read `bytes` of operands out of cache, at
/// the calibration's measured rate (0 without one).
static double operandReadSeconds(double bytes, const Cluster &cluster) {
  double rate = cluster.efficiency.gemmOperandGBps * 1e9;
  return rate > 0 ? bytes / rate : 0;
}

/// The two roofline terms of `op`: FLOP time and memory time. A product
/// runs at its shape's share of the peak (KernelEfficiency: the datasheet
/// curve, or the calibration's), as the joint search costs it
/// (`gemmSeconds`); on a cluster that measured its operand reads it reads
/// the `coldShare` of them out of cache before it computes: its FLOP time
/// includes them.
static std::pair<double, double>
rooflineTerms(const OpRecord &op, const Cluster &cluster, double coldShare) {
  double peak = peakFlops(cluster, op.precision);
  double reads = 0;
  if (op.gemmK > 0) {
    peak *= cluster.efficiency.gemm(op.gemmM, op.gemmN, op.gemmK);
    reads = operandReadSeconds(coldShare * op.bytes, cluster);
  }
  double hbm = cluster.hbmGBps * 1e9;
  return {(peak > 0 ? op.flops / peak : 0) + reads,
          hbm > 0 ? op.bytes / hbm : 0};
}

double planner::operandColdShare(const Cluster &cluster,
                                 double workingSetBytes) {
  double cache = cluster.efficiency.gemmCacheBytes;
  if (cache <= 0 || workingSetBytes <= 0)
    return 1;
  return std::clamp((workingSetBytes - cache) / cache, 0.0, 1.0);
}

double planner::rooflineSeconds(const OpRecord &op, const Cluster &cluster,
                                double coldShare) {
  // A kernel the calibration measured runs at its own rate (its
  // broadcasting form at that form's, where measured), and beyond the sizes
  // the profile measured no faster than memory either; the others pay the
  // measured call overhead on top of the roofline.
  auto k = cluster.kernels.end();
  if (op.broadcast && !cluster.kernels.empty()) {
    llvm::SmallString<32> form(op.kind);
    form += kBroadcastSuffix;
    k = cluster.kernels.find(form.str());
  }
  if (k == cluster.kernels.end())
    k = cluster.kernels.find(op.kind);
  if (k != cluster.kernels.end()) {
    const KernelCost &cost = k->second;
    double work = cost.flopsPerSecond > 0 ? op.flops / cost.flopsPerSecond
                                          : op.bytes / cost.bytesPerSecond;
    if (cost.measuredBytes > 0 && op.bytes > cost.measuredBytes &&
        cluster.hbmGBps > 0)
      work = std::max(work, op.bytes / (cluster.hbmGBps * 1e9));
    return cost.callSeconds + work;
  }
  auto [flopTime, memoryTime] = rooflineTerms(op, cluster, coldShare);
  return cluster.kernelCallSeconds + std::max(flopTime, memoryTime);
}

bool planner::isComputeBound(const OpRecord &op, const Cluster &cluster,
                             double coldShare) {
  auto [flopTime, memoryTime] = rooflineTerms(op, cluster, coldShare);
  return op.flops > 0 && flopTime >= memoryTime;
}

double planner::gemmSeconds(double m, double n, double k, Precision precision,
                            const Cluster &cluster) {
  double share = cluster.efficiency.gemm(m, n, k);
  double peak = peakFlops(cluster, precision) * share;
  double elementBytes = precision == Precision::Bf16 ? 2 : 4;
  double bytes = elementBytes * (m * k + k * n + m * n);
  double hbm = cluster.hbmGBps * 1e9;
  return std::max((peak > 0 ? 2 * m * n * k / peak : 0) +
                      operandReadSeconds(bytes, cluster),
                  hbm > 0 ? bytes / hbm : 0);
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

int64_t planner::bucketBytes(int64_t groupSize, const Link &link) {
  double bytes = 10.0 * double(groupSize) * link.latencyUs * 1e-6 *
                 link.bandwidthGBps * 1e9;
  return std::clamp<int64_t>(int64_t(bytes), 64 << 10, kMaxBucketBytes);
}

int64_t planner::bucketTarget(int64_t given, int64_t link, int64_t total) {
  if (given > 0)
    return given;
  return std::max<int64_t>(64 << 10, std::min<int64_t>(link, total / 4));
}

StepEstimate planner::estimateStep(const StepRequest &request,
                                   const Cluster &cluster,
                                   const MeshTopology &topology) {
  StepEstimate e;
  double coldShare = operandColdShare(cluster, request.workingSetBytes);
  int64_t numOps = static_cast<int64_t>(request.ops.size());
  size_t numCollectives = request.collectives.size();
  // Each collective's seconds, axes, start and wait (index numOps: after
  // the last op), and the collectives starting and waited for at each op.
  std::vector<double> seconds(numCollectives, 0);
  std::vector<std::string> labels(numCollectives);
  std::vector<int64_t> startAt(numCollectives), waitAt(numCollectives);
  std::vector<std::vector<size_t>> starts(numOps + 1), waits(numOps + 1);
  for (auto [i, c] : llvm::enumerate(request.collectives)) {
    startAt[i] = c.start < 0 ? numOps : std::min(c.start, numOps);
    waitAt[i] = c.wait < 0 ? numOps : std::clamp(c.wait, startAt[i], numOps);
    starts[startAt[i]].push_back(i);
    waits[waitAt[i]].push_back(i);
    AxisGroup group = topology.group(c.axes);
    if (group.size <= 1)
      continue;
    seconds[i] = collectiveSeconds(c.kind, c.bytes, group.size,
                                   cluster.link(group.level));
    labels[i] = axesLabel(topology, c.axes);
    e.secondsByKind[(collectiveName(c.kind) + (c.bucket ? "_start" : ""))
                        .str()] += seconds[i];
    auto it = llvm::find_if(
        e.commSeconds, [&](const AxisTime &t) { return t.axes == labels[i]; });
    if (it == e.commSeconds.end())
      e.commSeconds.push_back({labels[i], seconds[i]});
    else
      it->seconds += seconds[i];
  }
  // The ops' clock, when each axis set's link is free, each collective's
  // end.
  double now = 0;
  std::map<std::string, double> linkFree;
  std::vector<double> done(numCollectives, 0);
  auto waitFor = [&](size_t c) {
    e.exposedCommSeconds += std::max(0.0, done[c] - now);
    now = std::max(now, done[c]);
  };
  for (int64_t i = 0; i <= numOps; ++i) {
    // Collectives started earlier are waited for first; one that starts
    // and is waited for here (a blocking one) before the next starts.
    for (size_t c : waits[i])
      if (startAt[c] < i)
        waitFor(c);
    for (size_t c : starts[i]) {
      double &free = linkFree[labels[c]];
      // What of a bucket the cores move themselves holds the ops up.
      double onCores = request.collectives[c].bucket
                           ? (1 - cluster.commOverlap) * seconds[c]
                           : 0;
      now += onCores;
      e.exposedCommSeconds += onCores;
      done[c] = std::max(now, free) + seconds[c] - onCores;
      free = done[c];
      if (waitAt[c] == i)
        waitFor(c);
    }
    if (i == numOps)
      break;
    const OpRecord &op = request.ops[i];
    e.flops += op.flops;
    double opSeconds = rooflineSeconds(op, cluster, coldShare);
    if (isComputeBound(op, cluster, coldShare))
      e.computeBoundSeconds += opSeconds;
    else
      e.memoryBoundSeconds += opSeconds;
    if (!op.kind.empty())
      e.secondsByKind[op.kind.str()] += opSeconds;
    now += opSeconds;
  }
  e.stepSeconds = now;
  if (e.stepSeconds > 0) {
    e.modelTflops = e.flops / e.stepSeconds / 1e12;
    double peak = peakFlops(cluster, request.precision);
    e.mfu = peak > 0 ? e.flops / e.stepSeconds / peak : 0;
  }
  return e;
}
