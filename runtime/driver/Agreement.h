//===- Agreement.h - Ranks agree on how a step ended ------------*- C++ -*-===//
//
// Every rank of a run decides to go on or to stop together, with a
// collective after each phase and each step, so no rank is left waiting in
// a collective that the others never reach. The error is printed once: by
// the rank the collective picks (`loom-run: error: ...`, prefixed
// `rank R: ` unless it is rank 0).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DRIVER_AGREEMENT_H
#define LOOM_RUNTIME_DRIVER_AGREEMENT_H

#include "runtime/Numerics.h"
#include "runtime/comm/Communicator.h"

#include <optional>
#include <string>

namespace loom::runtime {

/// Agrees across ranks on whether `local` failed; the lowest failing rank
/// prints its error. Returns true when every rank succeeded.
bool agree(Communicator &world, const Status &local);

/// How a training step ended, over all ranks.
enum class StepOutcome { Ok, Failed, NonFinite };

/// Agrees on a step with one collective, as `agree` does. `failure` is this
/// rank's error; `nonFinite` is failed when this rank's loss (or, with
/// --check-numerics, a value of the step) is NaN or infinite. An error on
/// any rank outranks a non-finite value; the lowest rank of the winning
/// kind prints its message, except that a NonFinite outcome prints nothing
/// when `printNonFinite` is false (`reportFirstFault` reports it).
StepOutcome agreeOnStep(Communicator &world, const Status &failure,
                        const Status &nonFinite, bool printNonFinite = true);

/// After `agreeOnStep` said NonFinite under --check-numerics (collective):
/// the rank whose `fault` comes first in the step (by position, then rank)
/// prints it; a rank with only `lossMessage` (its loss is not finite but no
/// fault was seen; empty when the loss is finite) counts as coming last.
void reportFirstFault(Communicator &world,
                      const std::optional<NumericsFault> &fault,
                      const std::string &lossMessage);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_AGREEMENT_H
