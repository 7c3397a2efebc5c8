//===- Agreement.cpp - Ranks agree on how a step ended ----------*- C++ -*-===//

#include "runtime/driver/Agreement.h"

#include "runtime/driver/Driver.h"

#include <climits>

namespace loom::runtime {

namespace {

/// Prints `message` as `rank`'s error (no prefix for rank 0 or one rank).
void printRankError(const Communicator &world, const std::string &message) {
  printError(world.rank() == 0 || world.size() == 1
                 ? message
                 : "rank " + std::to_string(world.rank()) + ": " + message);
}

/// The minimum of `value` over the ranks; on a failed collective, prints it
/// and returns nullopt.
std::optional<int> reduceMin(Communicator &world, int value) {
  StatusOr<int> lowest = world.allReduceMin(value);
  if (!lowest.isOk()) {
    printError("rank " + std::to_string(world.rank()) + ": " +
               lowest.status().message());
    return std::nullopt;
  }
  return *lowest;
}

} // namespace

bool agree(Communicator &world, const Status &local) {
  return agreeOnStep(world, local, Status::ok()) == StepOutcome::Ok;
}

StepOutcome agreeOnStep(Communicator &world, const Status &failure,
                        const Status &nonFinite, bool printNonFinite) {
  // Ranks [0, n) stand for errors, [n, 2n) for non-finite values, so the
  // minimum picks the kind and the rank at once.
  int n = world.size(), me = world.rank();
  int mine = !failure.isOk() ? me : !nonFinite.isOk() ? n + me : INT_MAX;
  std::optional<int> lowest = reduceMin(world, mine);
  if (!lowest)
    return StepOutcome::Failed;
  if (*lowest == INT_MAX)
    return StepOutcome::Ok;
  if (*lowest < n) {
    if (*lowest == me)
      printRankError(world, failure.message());
    return StepOutcome::Failed;
  }
  if (printNonFinite && *lowest == mine)
    printRankError(world, nonFinite.message());
  return StepOutcome::NonFinite;
}

void reportFirstFault(Communicator &world,
                      const std::optional<NumericsFault> &fault,
                      const std::string &lossMessage) {
  // A fault's position is an instruction index + 1, well inside an int.
  int position = fault                  ? static_cast<int>(fault->position)
                 : !lossMessage.empty() ? INT_MAX - 1
                                        : INT_MAX;
  std::optional<int> first = reduceMin(world, position);
  if (!first)
    return;
  std::optional<int> who =
      reduceMin(world, position == *first ? world.rank() : INT_MAX);
  if (!who || *who != world.rank() || position == INT_MAX)
    return;
  printRankError(world, fault ? fault->message : lossMessage);
}

} // namespace loom::runtime
