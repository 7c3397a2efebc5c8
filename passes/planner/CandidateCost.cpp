//===- CandidateCost.cpp - Step time and memory of one plan choice -*- C++ -*-===//
//
// Each term is written out in docs/planner.md, "Joint search".
//
//===----------------------------------------------------------------------===//

#include "passes/planner/CandidateCost.h"
#include "passes/planner/MeshTopology.h"

#include <algorithm>
#include <array>
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

double planner::modelFlopsPerStep(const GptSpec &spec, int64_t globalBatch) {
  return 3 * spec.forwardFlopsPerSequence() * static_cast<double>(globalBatch);
}

bool planner::isValidChoice(const GptSpec &spec, int64_t devices,
                            const TrainingSetup &setup, const PlanChoice &c) {
  if (c.dp < 1 || c.tp < 1 || c.pp < 1 || c.microBatchSize < 1 ||
      c.dp * c.tp * c.pp != devices || setup.globalBatch % c.dp != 0)
    return false;
  int64_t share = setup.globalBatch / c.dp;
  if (share % c.microBatchSize != 0 ||
      c.microBatches != share / c.microBatchSize)
    return false;
  if (spec.heads % c.tp || spec.kvHeads % c.tp || spec.ffn % c.tp)
    return false;
  if (c.zero < 0 || c.zero > 3 || (c.zero > 0 && c.dp == 1))
    return false;
  if (c.pp > spec.layers)
    return false;
  if (c.pp == 1)
    return c.schedule == ScheduleKind::OneFOneB && c.chunks == 1;
  if (c.schedule != ScheduleKind::Interleaved)
    return c.chunks == 1;
  return c.chunks >= 2 && spec.layers % (c.pp * c.chunks) == 0 &&
         c.microBatches % c.pp == 0;
}

namespace {

/// One layer's seconds on one micro-batch, by kind.
struct LayerTime {
  double forward = 0;      // products, attention, memory-bound ops
  double backwardInput = 0; // activation gradients (B)
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
  const GptSpec &spec;
  const Cluster &cluster;
  const TrainingSetup &setup;
  const PlanChoice &c;
  MeshTopology mesh;
  double act;    // bytes of an activation element
  double tokens; // of one micro-batch
  double t;      // tensor-parallel degree

  Costing(const GptSpec &spec, const Cluster &cluster,
          const TrainingSetup &setup, const PlanChoice &c)
      : spec(spec), cluster(cluster), setup(setup), c(c),
        mesh(MeshTopology::ppDpTp(c.pp, c.dp, c.tp, cluster.devicesPerNode)),
        act(setup.precision == Precision::Bf16 ? 2 : 4),
        tokens(static_cast<double>(c.microBatchSize * spec.seq)),
        t(static_cast<double>(c.tp)) {}

  double hbmSeconds(double bytes) const {
    return cluster.hbmGBps > 0 ? bytes / (cluster.hbmGBps * 1e9) : 0;
  }
  double gemm(double m, double n, double k) const {
    return gemmSeconds(m, n, k, setup.precision, cluster);
  }
  /// Forward, activation-gradient and weight-gradient seconds of an m x k
  /// by k x n product.
  void product(double m, double n, double k, LayerTime &time) const {
    time.forward += gemm(m, n, k);
    time.backwardInput += gemm(m, k, n);
    time.backwardWeight += gemm(k, n, m);
  }
  /// Seconds of a collective over mesh axis `axis` (0 pp, 1 dp, 2 tp).
  double collective(CollectiveKind kind, double bytes, unsigned axis) const {
    AxisGroup group = mesh.group(axis);
    return collectiveSeconds(kind, bytes, group.size, cluster.link(group.level));
  }

  LayerTime layer() const {
    double h = double(spec.hidden), kv = double(spec.kvWidth());
    double f = double(spec.ffn), T = tokens;
    LayerTime time;
    product(T, (h + 2 * kv) / t, h, time); // q, k, v
    product(T, h, h / t, time);            // the attention's projection
    product(T, (spec.arch == Arch::Gpt ? 1 : 2) * f / t, h, time); // fc (+gate)
    product(T, h, f / t, time);            // the MLP's projection
    // Causal attention over s keys: the kernels skip the masked half.
    double attention = 2 * T * double(spec.seq) * h / t;
    double peak = peakFlops(cluster, setup.precision);
    time.forward += attention / (peak * cluster.efficiency.attentionForward);
    time.backwardInput +=
        2.5 * attention / (peak * cluster.efficiency.attentionBackward);
    // Memory-bound ops read and write each element once: the two norms
    // (2h each), two residual adds (3h each), the MLP's activation (GELU 2f,
    // SwiGLU 3f); the backward moves twice as much. Under tp they run on a
    // 1/t share (sequence parallelism on the norms and residuals).
    double normBytes = 4 * h / t * T * act;
    double activationBytes =
        (spec.arch == Arch::Gpt ? 2 : 3) * f / t * T * act;
    double elementwise = normBytes + 6 * h / t * T * act + activationBytes;
    time.forward += hbmSeconds(elementwise);
    time.backwardInput += hbmSeconds(2 * elementwise);
    // Two all-reduces of the layer's [T, h] activations forward and two
    // backward (all-gather + reduce-scatter under sequence parallelism,
    // the same bytes on the wire).
    double exchange = collective(CollectiveKind::AllReduce, T * h * act, 2);
    time.tensorParallel = 4 * exchange;
    if (c.remat == Remat::Full) {
      time.recompute = time.forward;
      time.tensorParallel += 2 * exchange;
    } else if (c.remat == Remat::Selective) {
      time.recompute = hbmSeconds(normBytes + activationBytes);
      // The split norms' outputs are gathered again for the backward.
      time.tensorParallel +=
          2 * collective(CollectiveKind::AllGather, T * h * act, 2);
    }
    return time;
  }

  /// The embedding's seconds a micro-batch (first stage): the lookup, its
  /// gradient's scatter into the table, the exchange of its output.
  double embedding() const {
    double h = double(spec.hidden);
    double table = double(spec.vocab) * h / t * 4;
    return hbmSeconds(3 * tokens * h * act + table) +
           2 * collective(CollectiveKind::AllReduce, tokens * h * act, 2);
  }
  /// The head's and the loss's seconds a micro-batch (last stage).
  double head() const {
    double h = double(spec.hidden), V = double(spec.vocab) / t;
    LayerTime time;
    product(tokens, V, h, time);
    // Softmax cross-entropy over the local vocabulary: the logits read and
    // written four times in f32; its row maxima and sums all-reduced.
    double loss = hbmSeconds(4 * tokens * V * 4) +
                  2 * collective(CollectiveKind::AllReduce, tokens * 4, 2);
    return time.forward + time.backwardInput + time.backwardWeight + loss +
           2 * collective(CollectiveKind::AllReduce, tokens * h * act, 2);
  }

  /// Layers per pipeline device: the fewest seconds for the slowest device,
  /// the embedding on the first and the head on the last.
  std::vector<int64_t> split(double layerSeconds, double first,
                             double last) const {
    int64_t p = c.pp, L = spec.layers;
    std::vector<int64_t> n(p, L / p);
    if (p == 1 || c.chunks > 1)
      return n; // interleaved: L / p each, in chunks
    // The least X such that each device's layers fit in X seconds and cover
    // all L, over the values X can take (k layers, with or without an
    // end's extra).
    auto capacity = [&](double x, double extra) {
      return static_cast<int64_t>(std::floor((x - extra) / layerSeconds + 1e-9));
    };
    auto covers = [&](double x) {
      int64_t a = capacity(x, first), z = capacity(x, last), mid = capacity(x, 0);
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

  /// Micro-batches (times layers, in layer units) whose activations device
  /// `i` holds at once.
  double inFlightLayers(int64_t i, int64_t layersHere) const {
    int64_t p = c.pp, m = c.microBatches;
    switch (c.schedule) {
    case ScheduleKind::GPipe:
      return double(m * layersHere);
    case ScheduleKind::OneFOneB:
      return double(std::min(p - i, m) * layersHere);
    case ScheduleKind::ZeroBubbleH1:
      return double(std::min(p, m) * layersHere);
    case ScheduleKind::Interleaved: {
      int64_t chunks = std::min(m * c.chunks,
                                (p - i - 1) * 2 + (c.chunks - 1) * p + 1);
      return double(chunks) * double(layersHere) / double(c.chunks);
    }
    }
    return double(layersHere);
  }
};

} // namespace

CandidatePrediction planner::predictCandidate(const GptSpec &spec,
                                              const Cluster &cluster,
                                              const TrainingSetup &setup,
                                              const PlanChoice &c) {
  Costing k(spec, cluster, setup, c);
  CandidatePrediction out;
  LayerTime layer = k.layer();
  double first = k.embedding(), last = k.head();
  if (c.pp == 1)
    first += last, last = 0;
  std::vector<int64_t> layersOn = k.split(layer.total(), first, last);
  int64_t p = c.pp, m = c.microBatches;

  // The busiest device's seconds a micro-batch: its layers and its end's
  // extra work.
  double busiest = -1, layersB = 0, extraB = 0;
  for (int64_t i = 0; i < p; ++i) {
    double extra = (i == 0 ? first : 0) + (i == p - 1 && p > 1 ? last : 0);
    double seconds = double(layersOn[i]) * layer.total() + extra;
    if (seconds > busiest)
      busiest = seconds, layersB = double(layersOn[i]), extraB = extra;
  }
  StepBreakdown &b = out.time;
  b.compute = m * (layersB * (layer.forward + layer.backwardInput +
                              layer.backwardWeight) +
                   extraB);
  b.recompute = m * layersB * layer.recompute;
  b.tensorParallel = m * layersB * layer.tensorParallel;
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
      b.bubble = double(p - 1) *
                 std::max(0.0, busiest - 2 * layersB * layer.backwardWeight);
      break;
    }
    // Each micro-batch's boundary activation forward and its gradient
    // back, once a chunk; the residual stream is split over tp.
    double bytes = k.tokens * double(spec.hidden) * k.act / k.t;
    b.pipelineTransfers = double(m * c.chunks) * 2 *
                          k.collective(CollectiveKind::Send, bytes, 0);
  }

  // Parameters on each device, its memory, the busiest's gradient traffic.
  double normParams = double(spec.layerNormParameters());
  double splitLayer = double(spec.layerParameters()) - normParams;
  double dp = double(c.dp);
  double bucket = double(kMaxBucketBytes);
  DeviceMemory worst;
  double maxParams = 0; // the most any device updates and reduces
  for (int64_t i = 0; i < p; ++i) {
    double n = double(layersOn[i]);
    double params = n * (splitLayer / k.t + normParams);
    if (i == 0)
      params += double(spec.embeddingParameters()) / k.t;
    if (i == p - 1)
      params += double(spec.headParameters()) / k.t;
    // The largest weight of a layer (the MLP's), split over tp.
    double largestWeight =
        double(spec.hidden) * double(spec.ffn) / k.t;
    double working = setup.precision == Precision::Bf16 ? 2 : 0;
    DeviceMemory mem;
    double paramShard = c.zero == 3 ? dp : 1;
    // f32 master weights and their bf16 copies; ZeRO-3 holds a shard, the
    // weight in use and the one being gathered (each gathered just before
    // its op and freed after it).
    mem.parameters = int64_t((4 + working) * params / paramShard +
                             (c.zero == 3 ? 2 * (4 + working) * largestWeight : 0));
    // ZeRO-2/3 hold their share of the gradients and the bucket being
    // reduced (at most a quarter of them, as loom-bucket-all-reduces).
    double gradientBytes = 4 * params;
    mem.gradients = int64_t(
        c.zero >= 2 ? gradientBytes / dp + std::min(bucket, gradientBytes / 4)
                    : gradientBytes);
    mem.optimizerState = int64_t(4.0 * double(setup.optimizerMoments) * params /
                                 (c.zero >= 1 ? dp : 1));
    // What the layers keep, per micro-batch in flight; with recomputation,
    // what the layer under backward makes again on top. Under tp the
    // norms' inputs and outputs stay whole unless sequence parallelism
    // splits them, which loom-auto-shard chooses where the memory needs it:
    // the plan is costed without it, and with it when it does not fit.
    double h = double(spec.hidden), t = k.t;
    auto activationBytes = [&](bool sequenceParallel) {
      double none = spec.keptElementsPerToken("none");
      double kept = spec.keptElementsPerToken(stringifyRemat(c.remat));
      double whole = c.remat == Remat::None ? 4 * h
                     : c.remat == Remat::Selective ? 2 * h
                                                   : h;
      if (c.tp == 1) {
        // nothing is split
      } else if (sequenceParallel) {
        kept = c.remat == Remat::Full ? 2 * h / t : kept / t;
        none /= t;
      } else {
        kept = c.remat == Remat::Full ? h : whole + (kept - whole) / t;
        none = 4 * h + (none - 4 * h) / t;
      }
      double perLayer = kept * k.tokens * k.act;
      double remade = (none - kept) * k.tokens * k.act;
      double bytes = k.inFlightLayers(i, layersOn[i]) * perLayer + remade;
      double split = sequenceParallel ? t : 1;
      double inFlight = k.inFlightLayers(i, 1);
      if (i == 0) // the embedding's output
        bytes += inFlight * k.tokens * h * k.act / split;
      if (i == p - 1) // one micro-batch's logits, f32 for the loss
        bytes += k.tokens * double(spec.vocab) / t * 4;
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
  double window = layersB * (layer.backwardInput + layer.backwardWeight);
  // What the cores move themselves (Cluster::commOverlap) is not hidden.
  auto hidden = [&](double seconds) {
    double onCores = (1 - cluster.commOverlap) * seconds;
    double beside = seconds - onCores;
    double lastBucket = grads > 0 ? beside * std::min(1.0, bucket / grads) : 0;
    return onCores + std::max(beside - window, lastBucket);
  };
  if (c.dp > 1) {
    double gather = k.collective(CollectiveKind::AllGather, grads, 1);
    double scatter = k.collective(CollectiveKind::ReduceScatter, grads, 1);
    if (c.zero == 0)
      b.dataParallel = hidden(k.collective(CollectiveKind::AllReduce, grads, 1));
    else if (c.zero == 1)
      b.dataParallel = hidden(scatter) + gather;
    else if (c.zero == 2)
      b.dataParallel = double(m) * hidden(scatter) + gather;
    else {
      double firstBucket =
          grads > 0 ? gather * std::min(1.0, bucket / grads) : 0;
      double forward =
          std::max(gather - layersB * layer.forward, firstBucket);
      double backward = (c.remat == Remat::Full ? 2 : 1) * gather;
      b.dataParallel = double(m) * (forward + hidden(scatter + backward));
    }
  }
  // GPT's head is the embedding: its gradient is summed between the first
  // and the last stage.
  if (p > 1 && spec.arch == Arch::Gpt) {
    AxisGroup pp = k.mesh.group(0u);
    b.dataParallel += collectiveSeconds(
        CollectiveKind::AllReduce,
        4 * double(spec.vocab) * double(spec.hidden) / k.t, 2,
        cluster.link(pp.level));
  }
  // AdamW reads and writes the parameter and both moments and reads the
  // gradient: 12 + 8 x moments bytes a parameter it updates.
  double updated = maxParams / (c.zero >= 1 ? dp : 1);
  b.optimizer =
      k.hbmSeconds(updated * (12 + 8 * double(setup.optimizerMoments)));

  out.stepSeconds = b.total();
  double flops = modelFlopsPerStep(spec, setup.globalBatch);
  double devices = double(c.dp * c.tp * c.pp);
  if (out.stepSeconds > 0) {
    out.modelTflopsPerDevice = flops / out.stepSeconds / devices / 1e12;
    double peak = peakFlops(cluster, setup.precision);
    out.mfu = peak > 0 ? flops / out.stepSeconds / devices / peak : 0;
  }
  return out;
}
