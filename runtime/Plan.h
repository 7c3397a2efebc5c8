//===- Plan.h - Load and validate .loomplan files ---------------*- C++ -*-===//
//
// A plan that passes `validatePlan` can be executed without further checks:
// every buffer lies inside its arena with the size its shape and dtype imply,
// every rank has exactly one program, and every instruction names a known op
// whose operands have the counts, dtypes and shapes the op requires
// (docs/plan-format.md). Kernels rely on that. The format's own rules are
// `LoomPlanFormat`'s (runtime/PlanFormat.h); these functions add the CPU
// kernels' `verify` (the rules every backend runs by) and so live in
// `LoomRuntime`.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLAN_H
#define LOOM_RUNTIME_PLAN_H

#include "runtime/PlanFormat.h"

#include <string>

namespace loom::runtime {

/// Reads the binary plan at `path` and validates it. Errors are one line and
/// start with `path`.
StatusOr<plan::Plan> loadPlan(const std::string &path);

/// Validates `plan` by the format's rules and the kernels' (see above);
/// `what` (usually the plan's path) prefixes every error, followed by the
/// program, buffer or instruction (with its `loc`) at fault.
Status validatePlan(const plan::Plan &plan, const std::string &what);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_H
