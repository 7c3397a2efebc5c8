//===- Profile.cpp - loom-run --profile: this machine's curves ---*- C++ -*-===//

#include "runtime/driver/Profile.h"
#include "runtime/driver/Driver.h"
#include "runtime/driver/KernelProfile.h"
#include "runtime/driver/ProfileTiming.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/AtomicFile.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace loom::runtime {

using namespace profiling;

GemmCurve fitGemmCurve(const std::vector<std::pair<double, double>> &samples) {
  GemmCurve best;
  double bestError = std::numeric_limits<double>::infinity();
  // halfDim on a geometric grid from 0.5 to 8192 (and 0: no fall-off).
  for (double h = 0; h <= 8192; h = h == 0 ? 0.5 : h * 1.02) {
    double sum = 0;
    for (auto [d, rate] : samples)
      sum += std::log(rate) - 3 * std::log(d / (d + h));
    double logPeak = sum / double(samples.size());
    double error = 0;
    for (auto [d, rate] : samples) {
      double r = std::log(rate) - logPeak - 3 * std::log(d / (d + h));
      error += r * r;
    }
    if (error < bestError) {
      bestError = error;
      best = {std::exp(logPeak), h};
    }
  }
  return best;
}

LinkFit fitAllReduce(const std::vector<std::pair<double, double>> &samples,
                     int ranks) {
  double n = ranks;
  // t = a x1 + b x2 with x1 = 2(n - 1), x2 = 2(n - 1)/n S; each row divided
  // by its t (relative error), normal equations of the 2 x 2 system.
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (auto [bytes, t] : samples) {
    double x1 = 2 * (n - 1) / t, x2 = 2 * (n - 1) / n * bytes / t;
    s11 += x1 * x1, s12 += x1 * x2, s22 += x2 * x2, r1 += x1, r2 += x2;
  }
  double det = s11 * s22 - s12 * s12;
  double a = det != 0 ? (r1 * s22 - r2 * s12) / det : 0;
  double b = det != 0 ? (s11 * r2 - s12 * r1) / det : 0;
  if (a < 0 || det == 0) { // no latency term: bandwidth alone
    a = 0;
    b = s22 > 0 ? r2 / s22 : 0;
  }
  LinkFit fit;
  fit.latencyS = a;
  fit.bandwidthBytesPerS = b > 0 ? 1 / b : 0;
  return fit;
}

namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", v);
  return text;
}

/// `[[x, y], ...]`.
std::string pairs(const std::vector<std::pair<double, double>> &xy) {
  std::string text = "[";
  for (size_t i = 0; i < xy.size(); ++i)
    text += (i ? ", [" : "[") + number(xy[i].first) + ", " +
            number(xy[i].second) + "]";
  return text + "]";
}

} // namespace

namespace {

struct Measured {
  std::vector<std::pair<double, double>> gemm, allReduce;
  /// What an all-reduce of each size adds to a step, blocking and
  /// overlapped (started, tested between the ranks' compute, waited for).
  std::vector<std::pair<double, double>> inStep, overlapped;
  double streamBytesPerS = 0;
  /// Bytes a second a product reads an operand at that is not in cache,
  /// and the bytes of operands a rank's products keep in cache (0: not
  /// measured).
  double operandBytesPerS = 0, operandCacheBytes = 0;
  int threads = 1;
};

/// Seconds each of `chunks` rounds of `work` takes on every rank, from a
/// barrier to the last rank done (the slowest rank's clock), with `between`
/// run after each round.
template <typename W, typename B>
StatusOr<double> roundSeconds(Communicator &world, int chunks, W work,
                              B between) {
  LOOM_RETURN_IF_ERROR(world.barrier());
  Clock::time_point start = Clock::now();
  for (int i = 0; i < chunks; ++i) {
    work();
    LOOM_RETURN_IF_ERROR(between(i));
  }
  LOOM_RETURN_IF_ERROR(world.barrier());
  return since(start) / chunks;
}

/// What all-reduces add to a step in which every rank computes between
/// them, as loom-run's steps do, rather than in a loop of collectives
/// alone: rounds of the same matrix products (about `chunkSeconds` each)
/// with and without an all-reduce after each, the difference per round.
/// On CPU ranks the ranks' cores move the data themselves and, with more
/// ranks than cores, a collective waits for the ranks the scheduler has
/// set aside; both show here and not in the loop of collectives alone.
/// The overlapped form starts each all-reduce after a round, tests it
/// between the next round's products, and waits for it after that round.
Status measureInStep(Communicator &world, double gemmFlops, Measured &out) {
  const int64_t d = 128;
  std::vector<float> a(d * d, 0.5f), b(d * d, 0.25f), c(d * d, 0.0f);
  auto product = [&] {
    cpu::sgemm(false, false, d, d, d, 1.0f, a.data(), d, b.data(), d, 0.0f,
               c.data(), d);
  };
  const double chunkSeconds = 5e-4;
  int perChunk =
      int(std::clamp(chunkSeconds * gemmFlops / (2.0 * d * d * d), 1.0, 1e4));
  LOOM_ASSIGN_OR_RETURN(perChunk, world.allReduceMin(perChunk));
  const int chunks = 48, slices = 4;
  std::unique_ptr<PendingCollective> pending;
  auto work = [&] {
    for (int i = 0; i < perChunk; ++i) {
      product();
      // The executor tests its in-flight buckets between instructions.
      if (pending && i % std::max(1, perChunk / slices) == 0)
        (void)pending->test();
    }
  };
  auto nothing = [](int) { return Status::ok(); };
  for (int64_t floats : {int64_t(1), int64_t(1) << 10, int64_t(1) << 14,
                         int64_t(1) << 18, int64_t(1) << 20}) {
    std::vector<float> buffer(floats, 1.0f);
    auto blocking = [&](int) {
      return world.allReduceSum(buffer.data(), floats);
    };
    auto overlapped = [&](int i) -> Status {
      if (pending)
        LOOM_RETURN_IF_ERROR(pending->wait());
      pending.reset();
      if (i + 1 < chunks) {
        LOOM_ASSIGN_OR_RETURN(pending,
                              world.startAllReduceSum(buffer.data(), floats));
      }
      return Status::ok();
    };
    // Alone, blocking, alone, overlapped, alone: each difference against
    // the mean of the rounds alone around it, the ranks' mean; the median
    // of kRepeats such runs.
    std::vector<double> addBlocking, addOverlapped;
    for (int r = 0; r < kRepeats; ++r) {
      LOOM_ASSIGN_OR_RETURN(double alone1,
                            roundSeconds(world, chunks, work, nothing));
      LOOM_ASSIGN_OR_RETURN(double withBlocking,
                            roundSeconds(world, chunks, work, blocking));
      LOOM_ASSIGN_OR_RETURN(double alone2,
                            roundSeconds(world, chunks, work, nothing));
      LOOM_ASSIGN_OR_RETURN(double withOverlap,
                            roundSeconds(world, chunks, work, overlapped));
      LOOM_ASSIGN_OR_RETURN(double alone3,
                            roundSeconds(world, chunks, work, nothing));
      LOOM_ASSIGN_OR_RETURN(
          double b, meanOverRanks(world, withBlocking - (alone1 + alone2) / 2));
      LOOM_ASSIGN_OR_RETURN(
          double o, meanOverRanks(world, withOverlap - (alone2 + alone3) / 2));
      addBlocking.push_back(b);
      addOverlapped.push_back(o);
    }
    double bytes = 4.0 * double(floats);
    out.inStep.push_back({bytes, median(addBlocking)});
    out.overlapped.push_back({bytes, median(addOverlapped)});
  }
  return Status::ok();
}

/// The rate at which a product reads an operand that is not in cache, as a
/// training step's products read their weights (OpenBLAS packs it before
/// computing, well below the memory's streaming rate), and how many bytes
/// of operands stay in cache: a skinny product (a convolution over small
/// images: its filter is its big operand) cycling through distinct filters
/// that fill pools of 4 to 128 MiB, against the same product over one
/// filter (fitOperandReads).
Status measureOperandReads(Communicator &world, Measured &out) {
  const int64_t m = 512, n = 4, k = 1152, filter = m * k;
  const std::vector<double> poolMiB = {4, 8, 16, 32, 64, 128};
  const int64_t most = int64_t(poolMiB.back()) * (1 << 20) / (4 * filter);
  std::vector<float> filters(most * filter, 0.5f), b(k * n, 0.25f),
      c(m * n, 0.0f);
  auto product = [&](int64_t i) {
    cpu::sgemm(false, false, m, n, k, 1.0f, filters.data() + i * filter, k,
               b.data(), n, 0.0f, c.data(), n);
  };
  // Per pool, the extra seconds of a call over the runs.
  std::vector<std::vector<double>> extra(poolMiB.size());
  for (int r = 0; r < kRepeats; ++r) {
    LOOM_RETURN_IF_ERROR(world.barrier());
    // The rate rests on the one filter and the largest pool: longer runs.
    double warm = callsPerSecond(0.2, [&] { product(0); });
    for (size_t p = 0; p < poolMiB.size(); ++p) {
      int64_t pool = int64_t(poolMiB[p]) * (1 << 20) / (4 * filter), next = 0;
      double seconds = p + 1 == poolMiB.size() ? 0.2 : 0.05;
      LOOM_RETURN_IF_ERROR(world.barrier());
      double cold = callsPerSecond(seconds, [&] { product(next++ % pool); });
      LOOM_ASSIGN_OR_RETURN(double e,
                            meanOverRanks(world, 1 / cold - 1 / warm));
      extra[p].push_back(e);
    }
  }
  std::vector<std::pair<double, double>> poolSeconds;
  for (size_t p = 0; p < poolMiB.size(); ++p)
    poolSeconds.push_back({poolMiB[p] * (1 << 20), median(extra[p])});
  OperandFit fit = fitOperandReads(poolSeconds, 4.0 * filter);
  out.operandBytesPerS = fit.bytesPerS;
  out.operandCacheBytes = fit.cacheBytes;
  return Status::ok();
}

Status measure(Communicator &world, Measured &out) {
  // Square products of the CPU kernels' sgemm, every rank at once.
  for (int64_t d : {16, 32, 64, 128, 256, 512, 1024}) {
    std::vector<float> a(d * d, 0.5f), b(d * d, 0.25f), c(d * d, 0.0f);
    LOOM_RETURN_IF_ERROR(world.barrier());
    double rate = callsPerSecond(0.2, [&] {
      cpu::sgemm(false, false, d, d, d, 1.0f, a.data(), d, b.data(), d, 0.0f,
                 c.data(), d);
    });
    LOOM_ASSIGN_OR_RETURN(double mean,
                          meanOverRanks(world, 2.0 * d * d * d * rate));
    out.gemm.push_back({double(d), mean});
  }

  LOOM_RETURN_IF_ERROR(measureOperandReads(world, out));

  // Memory: c = a + b over 3 x 32 MiB, as the element-wise kernels run.
  int64_t count = int64_t(8) << 20;
  std::vector<float> a(count, 1.0f), b(count, 2.0f), c(count, 0.0f);
  LOOM_RETURN_IF_ERROR(world.barrier());
  out.threads = cpu::maxThreads();
  int threads = out.threads;
  std::vector<double> rates;
  for (int r = 0; r < kRepeats; ++r) {
    LOOM_RETURN_IF_ERROR(world.barrier());
    double passes = callsPerSecond(0.2, [&] {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t i = 0; i < count; ++i)
        c[i] = a[i] + b[i];
    });
    LOOM_ASSIGN_OR_RETURN(double rate,
                          meanOverRanks(world, 12.0 * count * passes));
    rates.push_back(rate);
  }
  out.streamBytesPerS = median(rates);

  // All-reduces of 4 B to 16 MiB over every rank, as many calls on each.
  if (world.size() == 1)
    return Status::ok();
  for (int64_t floats = 1; floats <= (int64_t(4) << 20); floats *= 4) {
    std::vector<float> buffer(floats, 1.0f);
    LOOM_RETURN_IF_ERROR(world.barrier());
    Clock::time_point first = Clock::now();
    LOOM_RETURN_IF_ERROR(world.allReduceSum(buffer.data(), floats));
    int want = int(std::clamp(0.1 / std::max(since(first), 1e-6), 3.0, 1e5));
    LOOM_ASSIGN_OR_RETURN(int calls, world.allReduceMin(want));
    LOOM_RETURN_IF_ERROR(world.barrier());
    Clock::time_point start = Clock::now();
    for (int i = 0; i < calls; ++i)
      LOOM_RETURN_IF_ERROR(world.allReduceSum(buffer.data(), floats));
    out.allReduce.push_back({4.0 * floats, since(start) / calls});
  }
  double gemmFlops = 0;
  for (auto [dim, flops] : out.gemm)
    if (dim == 128)
      gemmFlops = flops;
  return measureInStep(world, gemmFlops, out);
}

/// The call overhead of a copy: what the planner adds to each op of a
/// kind the profile did not measure.
double kernelCallSeconds(const std::vector<KernelCurve> &kernels) {
  for (const KernelCurve &k : kernels)
    if (k.op == "copy")
      return k.callSeconds;
  return 0;
}

/// `"op": {"call_us": .., "gbps" or "gflops": .., "up_to_bytes": ..}, ...`.
std::string kernelsJson(const std::vector<KernelCurve> &kernels) {
  std::string text;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelCurve &k = kernels[i];
    text += std::string(i ? ",\n  " : "\n  ") + "\"" + k.op +
            "\": {\"call_us\": " + number(k.callSeconds * 1e6) + ", \"" +
            (k.flopRated ? "gflops" : "gbps") + "\": " + number(k.rate / 1e9) +
            ", \"up_to_bytes\": " + number(k.upToBytes) + "}";
  }
  return text;
}

} // namespace

std::vector<std::pair<double, double>>
inStepCosts(const std::vector<std::pair<double, double>> &inStep,
            const std::vector<std::pair<double, double>> &alone) {
  std::vector<std::pair<double, double>> costs;
  for (auto [bytes, seconds] : inStep) {
    double floor = 0;
    for (auto [b, s] : alone)
      if (b == bytes)
        floor = s;
    costs.push_back({bytes, std::max(seconds, floor)});
  }
  return costs;
}

double overlapShare(const std::vector<std::pair<double, double>> &inStep,
                    const std::vector<std::pair<double, double>> &overlapped) {
  double blocking = 0, started = 0;
  for (size_t i = 0; i < inStep.size() && i < overlapped.size(); ++i)
    if (inStep[i].first >= kOverlapMinBytes) {
      blocking += inStep[i].second;
      started += overlapped[i].second;
    }
  return blocking > 0 ? std::clamp(1 - started / blocking, 0.0, 1.0) : 1;
}

OperandFit
fitOperandReads(const std::vector<std::pair<double, double>> &poolSeconds,
                double operandBytes) {
  OperandFit fit;
  if (poolSeconds.empty() || !(poolSeconds.back().second > 0))
    return fit;
  fit.bytesPerS = operandBytes / poolSeconds.back().second;
  double half = poolSeconds.back().second / 2;
  size_t p = 0;
  while (poolSeconds[p].second < half)
    ++p;
  fit.cacheBytes = poolSeconds[p].first;
  if (p > 0) {
    auto [below, belowSeconds] = poolSeconds[p - 1];
    belowSeconds = std::max(belowSeconds, 0.0);
    double t = (half - belowSeconds) / (poolSeconds[p].second - belowSeconds);
    fit.cacheBytes = below * std::pow(poolSeconds[p].first / below, t);
  }
  return fit;
}

int runProfile(const std::string &path, bool quiet, Communicator &world) {
  bool root = world.rank() == 0;
  auto failed = [&](const Status &s) {
    if (root)
      printError("--profile: " + s.message());
    return 1;
  };
  Measured m;
  if (Status s = measure(world, m); !s.isOk())
    return failed(s);
  StatusOr<std::vector<KernelCurve>> kernels = measureKernels(world);
  if (!kernels.isOk())
    return failed(kernels.status());
  GemmCurve curve = fitGemmCurve(m.gemm);
  LinkFit link;
  double overlap = 1;
  if (world.size() > 1) {
    link = fitAllReduce(inStepCosts(m.inStep, m.allReduce), world.size());
    overlap = overlapShare(m.inStep, m.overlapped);
  }
  const std::vector<std::pair<double, double>> &gemm = m.gemm,
                                               &allReduce = m.allReduce;
  int threads = m.threads;
  double stream = m.streamBytesPerS;
  if (!root)
    return 0;

  std::string json =
      "{\"loom_calibration\": 1, \"ranks\": " + std::to_string(world.size()) +
      ", \"threads_per_rank\": " + std::to_string(threads) +
      ",\n \"device\": {\"peak_tflops\": {\"fp32\": " +
      number(curve.peakFlops / 1e12) +
      ", \"bf16\": " + number(curve.peakFlops / 1e12) +
      "}, \"hbm_gbps\": " + number(stream / 1e9) +
      "},\n \"gemm\": {\"max_efficiency\": 1, \"half_dim\": " +
      number(curve.halfDim);
  if (m.operandBytesPerS > 0)
    json += ", \"operand_gbps\": " + number(m.operandBytesPerS / 1e9) +
            ", \"cache_mib\": " + number(m.operandCacheBytes / (1 << 20));
  json += "}";
  if (world.size() > 1)
    json += ",\n \"intra_node\": {\"bandwidth_gbps\": " +
            number(link.bandwidthBytesPerS / 1e9) +
            ", \"latency_us\": " + number(link.latencyS * 1e6) +
            "}, \"comm_overlap\": " + number(overlap);
  json +=
      ",\n \"kernel_call_us\": " + number(kernelCallSeconds(*kernels) * 1e6) +
      ", \"kernels\": {" + kernelsJson(*kernels) + "}";
  json += ",\n \"measured\": {\"gemm_square\": [";
  for (size_t i = 0; i < gemm.size(); ++i)
    json += (i ? ", " : "") + std::string("[") + number(gemm[i].first) + ", " +
            number(gemm[i].second / 1e12) + "]";
  json += "], \"all_reduce\": [";
  for (size_t i = 0; i < allReduce.size(); ++i)
    json += (i ? ", " : "") + std::string("[") + number(allReduce[i].first) +
            ", " + number(allReduce[i].second) + "]";
  json += "], \"all_reduce_in_step\": " + pairs(m.inStep) +
          ", \"all_reduce_overlapped\": " + pairs(m.overlapped) + "}}\n";
  if (Status s = writeFileAtomically(path, json); !s.isOk())
    return failed(s);
  if (!quiet) {
    std::printf("profile: %d rank(s), %d thread(s) each: products up to "
                "%.3g TFLOP/s (half at d = %.0f), memory %.3g GB/s",
                world.size(), threads, curve.peakFlops / 1e12, curve.halfDim,
                stream / 1e9);
    if (m.operandBytesPerS > 0)
      std::printf(", operands out of cache %.3g GB/s (beyond %.3g MiB)",
                  m.operandBytesPerS / 1e9, m.operandCacheBytes / (1 << 20));
    if (world.size() > 1)
      std::printf(", all-reduce in a step %.3g GB/s and %.3g us a round, "
                  "%.0f%% of it beside the compute",
                  link.bandwidthBytesPerS / 1e9, link.latencyS * 1e6,
                  overlap * 100);
    std::printf("; %zu other kernels, %.3g us a call for a copy; wrote %s\n",
                kernels->size(), kernelCallSeconds(*kernels) * 1e6,
                path.c_str());
  }
  return 0;
}

} // namespace loom::runtime
