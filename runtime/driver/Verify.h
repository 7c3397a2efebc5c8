//===- Verify.h - Run a plan beside its one-device program ------*- C++ -*-===//
//
// `loomc --verify-plan` (through `loom-run PLAN --verify-against REF`): a
// plan of several ranks (dp, tp, ZeRO) and the one-device program of the
// same model train a few steps on the CPU from the same weights and the
// same synthetic data, the ranks as threads of one process
// (runtime/comm/ThreadCommunicator.h), and their losses must agree.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DRIVER_VERIFY_H
#define LOOM_RUNTIME_DRIVER_VERIFY_H

#include "runtime/driver/Options.h"
#include "runtime/plan.pb.h"

#include <string>

namespace loom::runtime {

struct VerifyRunOptions {
  int64_t steps = 3;
  /// Relative tolerance on each step's loss.
  double rtol = 1e-5;
  ParameterInit init;
  /// OpenMP threads per rank (LOOM_NUM_THREADS).
  int threads = 1;
};

/// `loom-run --verify-against`'s exit status when the plans cannot be
/// compared: the reference is too sensitive to judge the plan, or the
/// arenas of all its ranks would take over half of the host's available
/// memory (the plan may well be right).
constexpr int kExitIllPosed = 4;

/// The tolerance for a plan's precision: 1e-5 relative in fp32, 1e-3 in
/// bf16 (the sensitivities measured in test/e2e/sharding_parity.sh).
double verifyTolerance(const plan::Plan &plan);

struct VerifyResult {
  enum Verdict { Matches, Differs, IllPosed } verdict = Matches;
  /// One line: the match, the first step that differs, or why the
  /// reference cannot judge.
  std::string message;
};

/// Trains `plan` on its ranks and `reference` (one rank) for `steps` steps
/// and compares the losses. The data is synthetic and deterministic: floats
/// uniform in [-1, 1), integers uniform below the smallest table a gather
/// indexes with them and the class count of a cross-entropy target (2 when
/// neither bounds them). The reference also runs from its initial
/// parameters and float data perturbed by 1e-7 (each element by its own
/// factor) and with one more OpenMP thread (another summation order); the
/// tolerance is ten times the largest move, at least `rtol`, and a move
/// over 10 `rtol` makes the comparison ill-posed. Errors are failures to
/// run either plan.
StatusOr<VerifyResult> verifyPlans(const plan::Plan &plan,
                                   const plan::Plan &reference,
                                   const VerifyRunOptions &options);

/// `loom-run PLAN --verify-against REF --steps K`; returns the exit code
/// (0 matches, 1 differs or fails, kExitIllPosed cannot judge).
int runVerify(const RunOptions &opts);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_VERIFY_H
