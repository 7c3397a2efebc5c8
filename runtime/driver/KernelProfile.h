//===- KernelProfile.h - loom-run --profile: each kernel --------*- C++ -*-===//
//
// What each CPU kernel that is not a matrix product costs a call: the
// profile runs every op of `kernelCases()` as a one-instruction program
// through the CPU kernel registry, at a small and at a large size, on every
// rank at once, and fits a call overhead and a rate (bytes a second, or
// FLOPs a second for attention) to the two. The planner costs an op of that
// kind from them (docs/cluster-spec.md, "Calibration").
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DRIVER_KERNELPROFILE_H
#define LOOM_RUNTIME_DRIVER_KERNELPROFILE_H

#include "runtime/comm/Communicator.h"
#include "runtime/plan.pb.h"

#include <string>
#include <vector>

namespace loom::runtime {

/// seconds(work) = callSeconds + work / rate, with `work` the bytes the op
/// reads and writes (every input and every output, as the planner counts
/// them) or, when `flopRated`, its FLOPs as the planner counts them.
struct KernelCurve {
  std::string op;
  bool flopRated = false;
  double callSeconds = 0, rate = 0;
  /// The bytes the larger size read and written: the curve is measured up
  /// to there.
  double upToBytes = 0;
};

/// The line through (work, seconds) at the two sizes: its slope's inverse
/// is the rate, its value at no work the call overhead (at least 0; when
/// the larger size did not take longer, all of its time is work).
KernelCurve fitKernelCurve(const std::string &op, bool flopRated,
                           double smallWork, double smallSeconds,
                           double largeWork, double largeSeconds);

/// One kernel the profile measures, named `op` or, for a form of it,
/// `op:form` (`mul:broadcast`: an operand of another shape than the
/// result): `build` appends the buffers and the one instruction of the op
/// at `scale` (kSmallScale or kLargeScale) and returns its FLOPs as the
/// planner counts them when the op is flop-rated, else 0.
struct KernelCase {
  std::string op;
  bool flopRated = false;
  double (*build)(plan::Program &program, const std::string &op, int64_t scale);
};
inline constexpr int64_t kSmallScale = 1, kLargeScale = 128;

/// The ops the profile measures: the element-wise, normalisation, loss,
/// data-movement, pooling, optimizer and attention kernels of the plans
/// loomc emits. Matrix products and convolutions run on the product curve.
const std::vector<KernelCase> &kernelCases();

/// The plan-format op of `kase`: its name without the form.
std::string kernelOp(const KernelCase &kase);

/// The bytes an instruction of `program` reads and writes: the sizes of
/// its inputs and of its outputs.
double instructionBytes(const plan::Program &program, int index);

/// Measures every case on every rank of `world` (the ranks' mean, median of
/// a few runs) and fits its curve.
StatusOr<std::vector<KernelCurve>> measureKernels(Communicator &world);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_KERNELPROFILE_H
