//===- PlanIntegrity.h - Program order and settings of a plan ---*- C++ -*-===//
//
// What `validatePlanFormat` checks beyond each buffer and instruction on its
// own: that a program computes what its instructions say in the order they
// come (every temporary is written before it is read, the loss is written),
// and that the plan's settings are ones the runtime knows and agree with its
// buffers (mesh axis names, optimizer, precision and loss strings, and the
// data buffers covering each data-parallel rank's share of the batch). A
// plan edited by hand, cut or reordered is refused with the first place it
// breaks instead of computing garbage.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLANINTEGRITY_H
#define LOOM_RUNTIME_PLANINTEGRITY_H

#include "runtime/plan.pb.h"
#include "runtime/support/Status.h"

namespace loom::runtime {

/// The plan-wide settings: mesh axes `pp`, `dp`, `tp` (each at most once, in
/// that order), and the training strings.
Status checkPlanSettings(const plan::Plan &plan);

/// One program's order: a TEMPORARY, LOSS or OUTPUT buffer is read only after
/// an instruction wrote bytes of it (plans leave views implicit: a reshape's
/// result, a gradient inside its bucket, are other buffers' bytes); no
/// instruction writes over a PARAMETER, OPTIMIZER_STATE, RUNNING_STAT or
/// CONSTANT buffer other than itself, and no two of those share bytes; a
/// training program has instructions; the INPUT/TARGET buffers of each
/// binding cover [0, global_batch / dp) once. Instruction operands must exist
/// (checked before).
Status checkProgramOrder(const plan::Plan &plan, const plan::Program &program);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLANINTEGRITY_H
