//===- PlanFormat.h - The plan format's rules, without kernels --*- C++ -*-===//
//
// What every consumer of a .loomplan agrees on (docs/plan-format.md): the
// format version, the buffer and mesh rules, the op table's ops and operand
// counts (runtime/OpTable.h), and the helpers that read them. It is the
// `LoomPlanFormat` library, which `loomc` links to check the plans it emits
// without linking a kernel, BLAS, OpenMP or MPI. The backends' per-op rules
// (dtypes, shapes, attributes) come on top through `InstructionVerifier`;
// the runtime's `validatePlan` (runtime/Plan.h) adds the CPU kernels'.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLANFORMAT_H
#define LOOM_RUNTIME_PLANFORMAT_H

#include "runtime/OpTable.h"
#include "runtime/OpView.h"
#include "runtime/plan.pb.h"
#include "runtime/support/Status.h"

#include <functional>
#include <string>
#include <vector>

namespace loom::runtime {

/// The plan format version this runtime reads.
constexpr uint32_t kPlanFormatVersion = 1;

/// A backend's own check of one instruction, run after the format's: the
/// op is in the op table and `view` has every operand resolved, in counts
/// the table allows. The message needs no location.
using InstructionVerifier = std::function<Status(const OpView &view)>;

/// Validates `plan` against the format's rules, then each instruction with
/// `verify` when one is given; `what` (usually the plan's path) prefixes
/// every error, followed by the program, buffer or instruction (with its
/// `loc`) at fault.
Status validatePlanFormat(const plan::Plan &plan, const std::string &what,
                          const InstructionVerifier &verify = nullptr);

/// Reads the binary plan at `path` without validating it, but checking its
/// `checksum` when it has one. Errors are one line and start with `path`.
StatusOr<plan::Plan> readPlan(const std::string &path);

/// The checksum of `plan` as `checksum` records it: of its deterministic
/// serialization with `checksum` empty.
StatusOr<std::string> planChecksum(const plan::Plan &plan);

/// `plan` in binary form with its `checksum` set, the bytes of a plan file.
StatusOr<std::string> serializePlan(plan::Plan plan);

/// Writes `serializePlan(plan)` to `path`, whole or not at all.
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
/// The buffer's global (unsharded) shape: `global_shape`, else its shape.
std::vector<int64_t> globalShape(const plan::Buffer &buffer);
/// The name a PARAMETER or RUNNING_STAT is exported (and checkpointed)
/// under: a PARAMETER's binding, else its onnx_initializer, else its name;
/// a RUNNING_STAT's binding.
std::string exportName(const plan::Buffer &buffer);
/// Sizes of the mesh axes, outermost first (empty mesh: {world_size}).
std::vector<int64_t> meshSizes(const plan::Plan &plan);
/// "dp=2 x tp=1" style text (or "1 rank" for an empty mesh).
std::string meshToString(const plan::Plan &plan);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLANFORMAT_H
