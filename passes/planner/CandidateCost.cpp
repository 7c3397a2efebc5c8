//===- CandidateCost.cpp - Step time and memory of one plan choice -*- C++ -*-===//
//
// Each term is written out in docs/planner.md, "Joint search".
//
//===----------------------------------------------------------------------===//

#include "passes/planner/CandidateCost.h"
#include "passes/planner/MeshTopology.h"
#include "passes/planner/StagePartition.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <vector>

using namespace mlir::loom;
using namespace mlir::loom::planner;

llvm::StringRef StepBreakdown::dominant() const {
  std::array<std::pair<double, llvm::StringRef>, 7> parts = {{
      {compute, "compute"},
      {recompute, "recomputation"},
      {bubble, "pipeline bubble"},
      {tensorParallel, "tensor-parallel communication"},
      {pipelineTransfers, "transfers between stages"},
      {dataParallel, "data-parallel communication"},
      {optimizer, "optimizer step"},
  }};
  return std::max_element(parts.begin(), parts.end(),
                          [](auto &a, auto &b) { return a.first < b.first; })
      ->second;
}

double planner::modelFlopsPerStep(const ModelCost &model, int64_t globalBatch) {
  return model.modelFlopsPerSample * static_cast<double>(globalBatch);
}

bool planner::isValidChoice(const ModelCost &model, int64_t devices,
                            const TrainingSetup &setup, const PlanChoice &c) {
  if (c.dp < 1 || c.tp < 1 || c.pp < 1 || c.microBatchSize < 1 ||
      c.dp * c.tp * c.pp != devices || setup.globalBatch % c.dp != 0)
    return false;
  int64_t share = setup.globalBatch / c.dp;
  if (share % c.microBatchSize != 0 ||
      c.microBatches != share / c.microBatchSize)
    return false;
  if (model.oneMicroBatch && c.microBatches != 1)
    return false;
  if (c.tp > model.maxTp ||
      llvm::any_of(model.tpDivides, [&](int64_t n) { return n % c.tp != 0; }))
    return false;
  if (c.zero < 0 || c.zero > 3 || (c.zero > 0 && c.dp == 1))
    return false;
  int64_t layers = model.numLayers();
  if (c.pp > layers)
    return false;
  if (c.pp == 1)
    return c.schedule == ScheduleKind::OneFOneB && c.chunks == 1;
  if (c.schedule != ScheduleKind::Interleaved)
    return c.chunks == 1;
  return c.chunks >= 2 && layers % (c.pp * c.chunks) == 0 &&
         c.microBatches % c.pp == 0;
}

namespace {

/// One part's seconds on one micro-batch, by kind.
struct PartTime {
  double forward = 0;        // products, attention, memory-bound ops
  double backwardInput = 0;  // activation gradients (B)
  double backwardWeight = 0; // weight gradients (W)
  double recompute = 0;
  double tensorParallel = 0; // forward and backward (and recomputed) comm

  double total() const {
    return forward + backwardInput + backwardWeight + recompute +
           tensorParallel;
  }
};

/// What the cost of one choice is made of.
struct Costing {
  const ModelCost &model;
  const Cluster &cluster;
  const TrainingSetup &setup;
  const PlanChoice &c;
  MeshTopology mesh;
  double samples; // of one micro-batch
  double t;       // tensor-parallel degree
  /// Layers of one kind cost alike: then one time stands for them all.
  bool uniform;
  /// Each layer's seconds a micro-batch (only the first when `uniform`).
  std::vector<PartTime> layerTimes;
  /// Per pipeline device, its layers, and the first of them (layers that
  /// differ, without interleaving).
  std::vector<int64_t> layersOn, firstLayerOn;

  Costing(const ModelCost &model, const Cluster &cluster,
          const TrainingSetup &setup, const PlanChoice &c)
      : model(model), cluster(cluster), setup(setup), c(c),
        mesh(MeshTopology::ppDpTp(c.pp, c.dp, c.tp, cluster.devicesPerNode)),
        samples(static_cast<double>(c.microBatchSize)),
        t(static_cast<double>(c.tp)), uniform(model.uniformLayers()) {
    assert(model.numLayers() >= 1 && "a valid choice has a layer a stage");
    for (const PartCost &layer : model.layers) {
      layerTimes.push_back(partTime(layer));
      if (uniform)
        break;
    }
  }

  double hbmSeconds(double bytes) const {
    return cluster.hbmGBps > 0 ? bytes / (cluster.hbmGBps * 1e9) : 0;
  }
  double gemm(double m, double n, double k) const {
    return gemmSeconds(m, n, k, setup.precision, cluster);
  }
  /// Forward, activation-gradient and weight-gradient seconds of an m x k
  /// by k x n product.
  void product(double m, double n, double k, PartTime &time) const {
    time.forward += gemm(m, n, k);
    time.backwardInput += gemm(m, k, n);
    time.backwardWeight += gemm(k, n, m);
  }
  /// Seconds of a collective over mesh axis `axis` (0 pp, 1 dp, 2 tp).
  double collective(CollectiveKind kind, double bytes, unsigned axis) const {
    AxisGroup group = mesh.group(axis);
    return collectiveSeconds(kind, bytes, group.size,
                             cluster.link(group.level));
  }
  /// One tp rank's share of one micro-batch's `perSample` (bytes, FLOPs)
  /// that tp splits.
  double tpShare(double perSample) const { return perSample * samples / t; }

  /// `part`'s products and attention on one micro-batch, forward (into
  /// `forward`) and backward.
  PartTime computeTime(const PartCost &part) const {
    PartTime time;
    // A product whose split dimension tp does not divide runs whole.
    auto share = [&](double n, bool split) {
      return split && std::fmod(n, t) == 0 ? n / t : n;
    };
    for (const ProductCost &p : part.products)
      product(p.rows * samples, share(p.columns, p.split == TpSplit::Columns),
              share(p.inner, p.split == TpSplit::Inner), time);
    double attention = tpShare(part.attentionFlops);
    double peak = peakFlops(cluster, setup.precision);
    time.forward += attention / (peak * cluster.efficiency.attentionForward);
    time.backwardInput +=
        2.5 * attention / (peak * cluster.efficiency.attentionBackward);
    return time;
  }
  /// Whether a collective of `phase` runs under the choice's recomputation.
  bool runs(TpPhase phase) const {
    return phase == TpPhase::Forward || phase == TpPhase::Backward ||
           (phase == TpPhase::FullRecompute && c.remat == Remat::Full) ||
           (phase == TpPhase::SelectiveRecompute &&
            c.remat == Remat::Selective);
  }
  double tpSeconds(const TpCollective &x) const {
    return double(x.count) * collective(x.kind, x.bytesPerSample * samples, 2);
  }

  /// A layer's seconds on one micro-batch.
  PartTime partTime(const PartCost &part) const {
    PartTime time = computeTime(part);
    // Under tp the memory-bound ops run on a 1/t share (sequence
    // parallelism on whole values).
    time.forward += hbmSeconds(tpShare(part.forwardBytes) +
                               part.wholeBytes * samples + part.fixedBytes / t);
    time.backwardInput += hbmSeconds(tpShare(part.backwardBytes));
    for (const TpCollective &x : part.tpCollectives)
      if (runs(x.phase))
        time.tensorParallel += tpSeconds(x);
    if (c.remat == Remat::Full)
      time.recompute = time.forward;
    else if (c.remat == Remat::Selective)
      time.recompute = hbmSeconds(tpShare(part.selectiveBytes));
    return time;
  }

  /// The seconds on one micro-batch of what runs before the layers (on the
  /// first stage) or after them (on the last), never recomputed: its
  /// products, then its memory-bound ops with its forward's collectives,
  /// then its backward's. (Summed in this order so that a model spec's
  /// figures stay those of its closed forms, bit for bit.)
  double endSeconds(const PartCost &part) const {
    PartTime products = computeTime(part);
    double memoryBound =
        hbmSeconds(tpShare(part.forwardBytes + part.backwardBytes) +
                   part.wholeBytes * samples + part.fixedBytes / t);
    double backward = 0;
    for (const TpCollective &x : part.tpCollectives) {
      if (!runs(x.phase))
        continue;
      if (x.phase == TpPhase::Backward)
        backward += tpSeconds(x);
      else
        memoryBound += tpSeconds(x);
    }
    return products.forward + products.backwardInput + products.backwardWeight +
           memoryBound + backward;
  }

  /// Layers per pipeline device when they are alike: the fewest seconds for
  /// the slowest device, the first part on the first and the last on the
  /// last.
  std::vector<int64_t> split(double layerSeconds, double first,
                             double last) const {
    int64_t p = c.pp, L = model.numLayers();
    std::vector<int64_t> n(p, L / p);
    if (p == 1 || c.chunks > 1)
      return n; // interleaved: L / p each, in chunks
    // The least X such that each device's layers fit in X seconds and cover
    // all L, over the values X can take (k layers, with or without an
    // end's extra).
    auto capacity = [&](double x, double extra) {
      return static_cast<int64_t>(
          std::floor((x - extra) / layerSeconds + 1e-9));
    };
    auto covers = [&](double x) {
      int64_t a = capacity(x, first), z = capacity(x, last),
              mid = capacity(x, 0);
      return a >= 1 && z >= 1 && mid >= 1 && a + z + (p - 2) * mid >= L;
    };
    std::vector<double> xs;
    for (int64_t k = 1; k <= L; ++k)
      for (double extra : {0.0, first, last})
        xs.push_back(k * layerSeconds + extra);
    std::sort(xs.begin(), xs.end());
    double x = *std::partition_point(xs.begin(), xs.end(),
                                     [&](double v) { return !covers(v); });
    n[0] = std::min(capacity(x, first), L - (p - 1));
    n[p - 1] = std::min(capacity(x, last), L - n[0] - (p - 2));
    int64_t rest = L - n[0] - n[p - 1];
    for (int64_t i = 1; i + 1 < p; ++i) {
      n[i] = rest / (p - 1 - i);
      rest -= n[i];
    }
    return n;
  }

  /// Assigns the layers to the pipeline devices, `first` and `last` the
  /// ends' seconds. Layers that differ are cut where the slowest device,
  /// its end's seconds included, is fastest (interleaved: L / (pp x chunks)
  /// a chunk, as alike).
  void place(double first, double last) {
    int64_t p = c.pp, L = model.numLayers();
    if (uniform) {
      layersOn = split(layerTimes.front().total(), first, last);
      return;
    }
    if (p == 1 || c.chunks > 1) {
      layersOn.assign(p, L / p);
      firstLayerOn.assign(p, 0);
      return;
    }
    std::vector<double> seconds(L);
    for (int64_t j = 0; j < L; ++j)
      seconds[j] = layerTimes[j].total();
    seconds.front() += first;
    seconds.back() += last;
    layersOn = splitLayersByTime(seconds, p);
    firstLayerOn.assign(p, 0);
    for (int64_t i = 1; i < p; ++i)
      firstLayerOn[i] = firstLayerOn[i - 1] + layersOn[i - 1];
  }

  /// Calls `fn(layer, count)` for device `i`'s layers: the one layer that
  /// stands for all with their count when they are alike, else each once.
  template <typename Fn> void forEachLayer(int64_t i, Fn fn) const {
    if (uniform) {
      fn(0, double(layersOn[i]));
      return;
    }
    int64_t p = c.pp, L = model.numLayers();
    if (c.chunks > 1) {
      // Chunk k of the model is device k mod pp's.
      int64_t size = L / (p * c.chunks);
      for (int64_t k = i; k < p * c.chunks; k += p)
        for (int64_t j = k * size; j < (k + 1) * size; ++j)
          fn(j, 1.0);
      return;
    }
    for (int64_t j = firstLayerOn[i]; j < firstLayerOn[i] + layersOn[i]; ++j)
      fn(j, 1.0);
  }
  /// The sum of `fn(time, count)` over device `i`'s layers.
  template <typename Fn> double sumOver(int64_t i, Fn fn) const {
    double sum = 0;
    forEachLayer(i, [&](int64_t j, double n) { sum += fn(layerTimes[j], n); });
    return sum;
  }

  /// The most bytes per sample a layer hands the next stage, at a boundary
  /// between stages (or chunks).
  double boundaryBytes() const {
    if (uniform)
      return model.layers.front().boundaryBytes;
    int64_t p = c.pp, L = model.numLayers();
    double most = 0;
    if (c.chunks > 1) {
      int64_t size = L / (p * c.chunks);
      for (int64_t j = size - 1; j + 1 < L; j += size)
        most = std::max(most, model.layers[j].boundaryBytes);
      return most;
    }
    for (int64_t i = 0; i + 1 < p; ++i)
      most = std::max(
          most, model.layers[firstLayerOn[i] + layersOn[i] - 1].boundaryBytes);
    return most;
  }

  /// What one micro-batch of `part` keeps under the choice's recomputation
  /// (`remat` for the whole set), on one tp rank.
  double keptBytes(const PartCost &part, Remat remat,
                   bool sequenceParallel) const {
    const KeptBytes &k = part.kept[size_t(remat)];
    double bytes = k.bytes;
    if (c.tp == 1) {
      // nothing is split
    } else if (sequenceParallel) {
      bytes = k.sequenceParallel / t;
    } else {
      bytes = k.whole + (k.bytes - k.whole) / t;
    }
    return bytes * samples;
  }

  /// Micro-batches (times layers, in layer units) whose activations device
  /// `i` holds at once.
  double inFlightLayers(int64_t i, double layersHere) const {
    int64_t p = c.pp, m = c.microBatches;
    switch (c.schedule) {
    case ScheduleKind::GPipe:
      return double(m) * layersHere;
    case ScheduleKind::OneFOneB:
      return double(std::min(p - i, m)) * layersHere;
    case ScheduleKind::ZeroBubbleH1:
      return double(std::min(p, m)) * layersHere;
    case ScheduleKind::Interleaved: {
      int64_t chunks =
          std::min(m * c.chunks, (p - i - 1) * 2 + (c.chunks - 1) * p + 1);
      return double(chunks) * layersHere / double(c.chunks);
    }
    }
    return layersHere;
  }
};

} // namespace

CandidatePrediction planner::predictCandidate(const ModelCost &model,
                                              const Cluster &cluster,
                                              const TrainingSetup &setup,
                                              const PlanChoice &c) {
  Costing k(model, cluster, setup, c);
  CandidatePrediction out;
  double first = k.endSeconds(model.first), last = k.endSeconds(model.last);
  if (c.pp == 1)
    first += last, last = 0;
  k.place(first, last);
  int64_t p = c.pp, m = c.microBatches;

  // The busiest device's seconds a micro-batch: its layers and its end's
  // extra work.
  double busiest = -1, extraB = 0;
  int64_t busy = 0;
  for (int64_t i = 0; i < p; ++i) {
    double extra = (i == 0 ? first : 0) + (i == p - 1 && p > 1 ? last : 0);
    double seconds = k.sumOver(i, [](const PartTime &l, double n) {
      return n * l.total();
    }) + extra;
    if (seconds > busiest)
      busiest = seconds, busy = i, extraB = extra;
  }
  StepBreakdown &b = out.time;
  b.compute = m * (k.sumOver(busy, [](const PartTime &l, double n) {
                return n * (l.forward + l.backwardInput + l.backwardWeight);
              }) + extraB);
  b.recompute = k.sumOver(
      busy, [&](const PartTime &l, double n) { return m * n * l.recompute; });
  b.tensorParallel = k.sumOver(busy, [&](const PartTime &l, double n) {
    return m * n * l.tensorParallel;
  });
  if (p > 1) {
    switch (c.schedule) {
    case ScheduleKind::GPipe:
    case ScheduleKind::OneFOneB:
      b.bubble = double(p - 1) * busiest;
      break;
    case ScheduleKind::Interleaved:
      b.bubble = double(p - 1) * busiest / double(c.chunks);
      break;
    case ScheduleKind::ZeroBubbleH1:
      // (p - 1)(F + B - W): the weight gradients fill the cool-down.
      b.bubble =
          double(p - 1) *
          std::max(0.0,
                   busiest - k.sumOver(busy, [](const PartTime &l, double n) {
                     return 2 * n * l.backwardWeight;
                   }));
      break;
    }
    // Each micro-batch's boundary activation forward and its gradient
    // back, once a chunk, split over tp.
    double bytes = k.tpShare(k.boundaryBytes());
    b.pipelineTransfers =
        double(m * c.chunks) * 2 * k.collective(CollectiveKind::Send, bytes, 0);
  }

  // Parameters on each device, its memory, the busiest's gradient traffic.
  double dp = double(c.dp), t = k.t;
  double bucket = double(kMaxBucketBytes);
  DeviceMemory worst;
  double maxParams = 0; // the most any device updates and reduces
  for (int64_t i = 0; i < p; ++i) {
    bool isFirst = i == 0, isLast = i == p - 1;
    double params = 0, largestWeight = 0;
    auto weights = [&](const PartCost &part, double n) {
      params += n * (part.splitParameters / t + part.wholeParameters);
      largestWeight = std::max(largestWeight, part.largestWeight / t);
    };
    k.forEachLayer(i,
                   [&](int64_t j, double n) { weights(model.layers[j], n); });
    if (isFirst)
      weights(model.first, 1);
    if (isLast)
      weights(model.last, 1);
    double working = setup.precision == Precision::Bf16 ? 2 : 0;
    DeviceMemory mem;
    double paramShard = c.zero == 3 ? dp : 1;
    // f32 master weights and their bf16 copies; ZeRO-3 holds a shard, the
    // weight in use and the one being gathered (each gathered just before
    // its op and freed after it).
    mem.parameters =
        int64_t((4 + working) * params / paramShard +
                (c.zero == 3 ? 2 * (4 + working) * largestWeight : 0));
    // ZeRO-2/3 hold their share of the gradients and the bucket being
    // reduced (at most a quarter of them, as loom-bucket-all-reduces).
    double gradientBytes = 4 * params;
    mem.gradients = int64_t(
        c.zero >= 2 ? gradientBytes / dp + std::min(bucket, gradientBytes / 4)
                    : gradientBytes);
    mem.optimizerState = int64_t(4.0 * double(setup.optimizerMoments) * params /
                                 (c.zero >= 1 ? dp : 1));
    // What the parts keep, per micro-batch in flight, and what the layer
    // under backward makes again. Under tp the values a part keeps whole
    // (a norm's input and output) stay whole unless sequence parallelism
    // splits them, which loom-auto-shard chooses where the memory needs it:
    // the plan is costed without it, and with it when it does not fit.
    auto activationBytes = [&](bool sequenceParallel) {
      double bytes = 0, remade = 0;
      k.forEachLayer(i, [&](int64_t j, double n) {
        const PartCost &layer = model.layers[j];
        double kept = k.keptBytes(layer, c.remat, sequenceParallel);
        bytes += k.inFlightLayers(i, n) * kept;
        remade = std::max(
            remade, k.keptBytes(layer, Remat::None, sequenceParallel) - kept);
      });
      bytes += remade;
      double inFlight = k.inFlightLayers(i, 1);
      if (isFirst) // the first part's output
        bytes += inFlight * k.keptBytes(model.first, c.remat, sequenceParallel);
      if (isLast) {
        bytes += inFlight * k.keptBytes(model.last, c.remat, sequenceParallel);
        // One micro-batch's transient values (the logits, f32 for the loss).
        bytes += k.tpShare(model.last.transientBytes);
      }
      return bytes;
    };
    double activations = activationBytes(false);
    mem.activations = int64_t(activations);
    if (c.tp > 1 && double(mem.total()) > cluster.usableMemoryBytes())
      activations = activationBytes(true);
    mem.activations = int64_t(activations);
    if (mem.total() > worst.total())
      worst = mem;
    maxParams = std::max(maxParams, params);
  }
  out.memory = worst;
  out.fits = double(worst.total()) <= cluster.usableMemoryBytes();

  // Gradients over dp (f32), overlapped with the last micro-batch's
  // backward but for the last bucket; ZeRO-1/2 gather the updated
  // parameters after the step; ZeRO-2/3 reduce-scatter every micro-batch;
  // ZeRO-3 gathers each layer's parameters for its forward and again for
  // its backward (and its recomputation), prefetched a bucket ahead
  // (loom-bucket-block-collectives): the forward's behind the forward but
  // for the first bucket, the backward's with the reduce-scatters behind
  // the backward.
  double grads = 4 * maxParams;
  // The gradients go in buckets as loom-bucket-all-reduces makes them
  // (bucketTarget over the dp link), each collective paying its latency.
  AxisGroup dpGroup = k.mesh.group(1u);
  const Link &dpLink = cluster.link(dpGroup.level);
  bucket = double(bucketTarget(0, bucketBytes(dpGroup.size, dpLink),
                               int64_t(grads)));
  double buckets = grads > 0 ? std::ceil(grads / bucket) : 1;
  auto bucketed = [&](CollectiveKind kind) {
    return buckets * k.collective(kind, grads / buckets, 1);
  };
  double window = k.sumOver(busy, [](const PartTime &l, double n) {
    return n * (l.backwardInput + l.backwardWeight);
  });
  // What the cores move themselves (Cluster::commOverlap) is not hidden.
  auto hidden = [&](double seconds) {
    double onCores = (1 - cluster.commOverlap) * seconds;
    double beside = seconds - onCores;
    double lastBucket = grads > 0 ? beside * std::min(1.0, bucket / grads) : 0;
    return onCores + std::max(beside - window, lastBucket);
  };
  if (c.dp > 1) {
    double gather = bucketed(CollectiveKind::AllGather);
    double scatter = bucketed(CollectiveKind::ReduceScatter);
    if (c.zero == 0)
      b.dataParallel = hidden(bucketed(CollectiveKind::AllReduce));
    else if (c.zero == 1)
      b.dataParallel = hidden(scatter) + gather;
    else if (c.zero == 2)
      b.dataParallel = double(m) * hidden(scatter) + gather;
    else {
      double firstBucket =
          grads > 0 ? gather * std::min(1.0, bucket / grads) : 0;
      double forward = std::max(
          gather - k.sumOver(busy, [](const PartTime &l,
                                      double n) { return n * l.forward; }),
          firstBucket);
      double backward = (c.remat == Remat::Full ? 2 : 1) * gather;
      b.dataParallel = double(m) * (forward + hidden(scatter + backward));
    }
  }
  // A head tied to the embedding: its gradient is summed between the first
  // and the last stage.
  if (p > 1 && model.tiedParameters > 0) {
    AxisGroup pp = k.mesh.group(0u);
    b.dataParallel += collectiveSeconds(CollectiveKind::AllReduce,
                                        4 * model.tiedParameters / t, 2,
                                        cluster.link(pp.level));
  }
  // AdamW reads and writes the parameter and both moments and reads the
  // gradient: 12 + 8 x moments bytes a parameter it updates.
  double updated = maxParams / (c.zero >= 1 ? dp : 1);
  b.optimizer =
      k.hbmSeconds(updated * (12 + 8 * double(setup.optimizerMoments)));

  out.stepSeconds = b.total();
  double flops = modelFlopsPerStep(model, setup.globalBatch);
  double devices = double(c.dp * c.tp * c.pp);
  if (out.stepSeconds > 0) {
    out.modelTflopsPerDevice = flops / out.stepSeconds / devices / 1e12;
    double peak = peakFlops(cluster, setup.precision);
    out.mfu = peak > 0 ? flops / out.stepSeconds / devices / peak : 0;
  }
  return out;
}
