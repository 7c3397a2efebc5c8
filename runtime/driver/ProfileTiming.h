//===- ProfileTiming.h - How --profile times things -------------*- C++ -*-===//
//
// The timing helpers the profile's measurements share (driver/Profile.cpp,
// driver/KernelProfile.cpp): calls a second of a body run for a while, the
// median of repeated runs and the mean of a figure over the ranks.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DRIVER_PROFILETIMING_H
#define LOOM_RUNTIME_DRIVER_PROFILETIMING_H

#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace loom::runtime::profiling {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point start) {
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

/// Runs of a measurement whose median the profile keeps: the ranks share
/// the machine with whatever else runs on it.
inline constexpr int kRepeats = 3;

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

/// The mean over the ranks of `value`.
inline StatusOr<double> meanOverRanks(Communicator &world, double value) {
  float v = static_cast<float>(value);
  LOOM_RETURN_IF_ERROR(world.allReduceSum(&v, 1));
  return double(v) / world.size();
}

} // namespace loom::runtime::profiling

#endif // LOOM_RUNTIME_DRIVER_PROFILETIMING_H
