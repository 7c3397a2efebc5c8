//===- Plan.h - Load and validate .loomplan files -----------------*- C++ -*-===//
//
// A plan that passes `validatePlan` can be executed without further checks:
// every buffer lies inside its arena with the size its shape and dtype imply,
// every rank has exactly one program, and every instruction names a known op
// whose operands have the counts, dtypes and shapes the op requires
// (docs/plan-format.md). Kernels rely on that.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLAN_H
#define LOOM_RUNTIME_PLAN_H

#include "runtime/plan.pb.h"
#include "runtime/support/Status.h"

#include <string>
#include <vector>

namespace loom::runtime {

/// The plan format version this runtime reads.
constexpr uint32_t kPlanFormatVersion = 1;

/// Reads the binary plan at `path` and validates it. Errors are one line and
/// start with `path`.
StatusOr<plan::Plan> loadPlan(const std::string &path);

/// Validates `plan`; `what` (usually the plan's path) prefixes every error,
/// followed by the program, buffer or instruction (with its `loc`) at fault.
Status validatePlan(const plan::Plan &plan, const std::string &what);

/// Writes `plan` in binary form to `path` (tools and tests).
Status savePlan(const plan::Plan &plan, const std::string &path);

/// Index in `plan.programs()` of the program `rank` runs, or -1.
int findProgramIndex(const plan::Plan &plan, int rank);

/// `rank`'s coordinate on the mesh axis named `axis` (row-major over
/// `plan.mesh()`, last axis fastest), or 0 when the mesh has no such axis.
int64_t meshCoordinate(const plan::Plan &plan, int rank,
                       const std::string &axis);

/// Size of the mesh axis named `axis`, or 1 when the mesh has none.
int64_t meshAxisSize(const plan::Plan &plan, const std::string &axis);

/// Bytes of one element of `dtype` (0 when unspecified).
int64_t dtypeSize(plan::DType dtype);
/// "f32", "i64", "bf16" or "unspecified".
const char *dtypeName(plan::DType dtype);
/// The buffer's local shape as a vector.
std::vector<int64_t> bufferShape(const plan::Buffer &buffer);
/// Sizes of the mesh axes, outermost first (empty mesh: {world_size}).
std::vector<int64_t> meshSizes(const plan::Plan &plan);
/// "dp=2 x tp=1" style text (or "1 rank" for an empty mesh).
std::string meshToString(const plan::Plan &plan);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_H
