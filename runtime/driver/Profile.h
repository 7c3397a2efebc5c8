//===- Profile.h - loom-run --profile: this machine's curves -----*- C++ -*-===//
//
// `[mpirun -np N] loom-run --profile FILE.json` measures, with every rank
// busy at once as in training, the matrix products of the CPU kernels at
// growing sizes, a product over operands out of cache (their rate and the
// cache), the memory bandwidth of an element-wise pass, the all-reduce over
// the N ranks at growing sizes and each other CPU kernel, fits the
// planner's curves to them and writes a calibration file `loomc --calibration` reads
// (docs/cluster-spec.md, "Calibration").
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DRIVER_PROFILE_H
#define LOOM_RUNTIME_DRIVER_PROFILE_H

#include "runtime/comm/Communicator.h"

#include <string>
#include <utility>
#include <vector>

namespace loom::runtime {

/// rate(d) = peak x (d / (d + halfDim))^3 fitted to square products of side
/// d (least squares on the logarithms): what `Cluster::efficiency` models
/// with gemmMax = 1.
struct GemmCurve {
  double peakFlops = 0, halfDim = 0;
};
GemmCurve fitGemmCurve(const std::vector<std::pair<double, double>> &dimFlops);

/// seconds(S) = 2(n-1) alpha + 2(n-1)/n S / bandwidth fitted to ring
/// all-reduces of S bytes over n ranks (least squares on the relative
/// error, so small and large sizes count alike; alpha >= 0).
struct LinkFit {
  double bandwidthBytesPerS = 0, latencyS = 0;
};
LinkFit fitAllReduce(const std::vector<std::pair<double, double>> &bytesSeconds,
                     int ranks);

/// What each all-reduce of `inStep` (bytes, seconds it added to rounds of
/// compute) cost, at least what the same size took in a loop of collectives
/// alone (`alone`): below that is the noise of the rounds. The link of the
/// calibration is fitted to these.
std::vector<std::pair<double, double>>
inStepCosts(const std::vector<std::pair<double, double>> &inStep,
            const std::vector<std::pair<double, double>> &alone);

/// Overlapped all-reduces of at least this many bytes say how much of a
/// bucket runs beside the compute (smaller ones are within the noise).
inline constexpr double kOverlapMinBytes = 1 << 20;

/// The share of an all-reduce that runs beside the compute: 1 less what
/// the overlapped ones (started, tested between compute, waited for)
/// added over what the blocking ones added, summed over the sizes of at
/// least kOverlapMinBytes, within [0, 1]; 1 without such sizes.
double overlapShare(const std::vector<std::pair<double, double>> &inStep,
                    const std::vector<std::pair<double, double>> &overlapped);

/// What products over pools of distinct operands added to each call (pool
/// bytes, extra seconds; growing pools, the last beyond the caches) say of
/// operands out of cache: the rate of the largest pool (bytes of one
/// operand, `operandBytes`, over its extra seconds) and the cache, the pool
/// at which the extra time reaches half of the largest pool's (between the
/// pools measured, geometrically; the smallest pool when it already does).
/// Both 0 when the largest pool added nothing.
struct OperandFit {
  double bytesPerS = 0, cacheBytes = 0;
};
OperandFit
fitOperandReads(const std::vector<std::pair<double, double>> &poolSeconds,
                double operandBytes);

/// Runs the measurements on every rank of `world` and has rank 0 write the
/// calibration file to `path`. Returns the exit code.
int runProfile(const std::string &path, bool quiet, Communicator &world);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_PROFILE_H
