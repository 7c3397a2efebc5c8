//===- Profile.cpp - loom-run --profile: this machine's curves ---*- C++ -*-===//

#include "runtime/driver/Profile.h"
#include "runtime/driver/Driver.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/AtomicFile.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace loom::runtime {

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

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Runs `body` until `seconds` have passed (at least twice); its rate in
/// calls per second.
template <typename F> double callsPerSecond(double seconds, F body) {
  body(); // warm the caches and the BLAS
  int64_t calls = 0;
  Clock::time_point start = Clock::now();
  do {
    body();
    ++calls;
  } while (calls < 2 || since(start) < seconds);
  return double(calls) / since(start);
}

/// The mean over the ranks of `value`.
StatusOr<double> meanOverRanks(Communicator &world, double value) {
  float v = static_cast<float>(value);
  LOOM_RETURN_IF_ERROR(world.allReduceSum(&v, 1));
  return double(v) / world.size();
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", v);
  return text;
}

} // namespace

namespace {

struct Measured {
  std::vector<std::pair<double, double>> gemm, allReduce;
  double streamBytesPerS = 0;
  int threads = 1;
};

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

  // Memory: c = a + b over 3 x 32 MiB, as the element-wise kernels run.
  int64_t count = int64_t(8) << 20;
  std::vector<float> a(count, 1.0f), b(count, 2.0f), c(count, 0.0f);
  LOOM_RETURN_IF_ERROR(world.barrier());
  out.threads = cpu::maxThreads();
  int threads = out.threads;
  double passes = callsPerSecond(0.3, [&] {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < count; ++i)
      c[i] = a[i] + b[i];
  });
  LOOM_ASSIGN_OR_RETURN(out.streamBytesPerS,
                        meanOverRanks(world, 12.0 * count * passes));

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
  return Status::ok();
}

} // namespace

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
  GemmCurve curve = fitGemmCurve(m.gemm);
  LinkFit link;
  if (world.size() > 1)
    link = fitAllReduce(m.allReduce, world.size());
  const std::vector<std::pair<double, double>> &gemm = m.gemm,
                                               &allReduce = m.allReduce;
  int threads = m.threads;
  double stream = m.streamBytesPerS;
  if (!root)
    return 0;

  std::string json = "{\"loom_calibration\": 1, \"ranks\": " +
                     std::to_string(world.size()) +
                     ", \"threads_per_rank\": " + std::to_string(threads) +
                     ",\n \"device\": {\"peak_tflops\": {\"fp32\": " +
                     number(curve.peakFlops / 1e12) +
                     ", \"bf16\": " + number(curve.peakFlops / 1e12) +
                     "}, \"hbm_gbps\": " + number(stream / 1e9) +
                     "},\n \"gemm\": {\"max_efficiency\": 1, \"half_dim\": " +
                     number(curve.halfDim) + "}";
  if (world.size() > 1)
    json += ",\n \"intra_node\": {\"bandwidth_gbps\": " +
            number(link.bandwidthBytesPerS / 1e9) +
            ", \"latency_us\": " + number(link.latencyS * 1e6) + "}";
  json += ",\n \"measured\": {\"gemm_square\": [";
  for (size_t i = 0; i < gemm.size(); ++i)
    json += (i ? ", " : "") + std::string("[") + number(gemm[i].first) + ", " +
            number(gemm[i].second / 1e12) + "]";
  json += "], \"all_reduce\": [";
  for (size_t i = 0; i < allReduce.size(); ++i)
    json += (i ? ", " : "") + std::string("[") + number(allReduce[i].first) +
            ", " + number(allReduce[i].second) + "]";
  json += "]}}\n";
  if (Status s = writeFileAtomically(path, json); !s.isOk())
    return failed(s);
  if (!quiet) {
    std::printf("profile: %d rank(s), %d thread(s) each: products up to "
                "%.3g TFLOP/s (half at d = %.0f), memory %.3g GB/s",
                world.size(), threads, curve.peakFlops / 1e12, curve.halfDim,
                stream / 1e9);
    if (world.size() > 1)
      std::printf(", all-reduce %.3g GB/s and %.3g us", link.bandwidthBytesPerS / 1e9,
                  link.latencyS * 1e6);
    std::printf("; wrote %s\n", path.c_str());
  }
  return 0;
}

} // namespace loom::runtime
