//===- Plan.cpp - Load and validate .loomplan files -------------*- C++ -*-===//

#include "runtime/Plan.h"

#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/cpu/Bf16.h"

namespace loom::runtime {

Status validatePlan(const plan::Plan &plan, const std::string &what) {
  return validatePlanFormat(plan, what, [](const OpView &view) -> Status {
    const KernelDef *kernel = findKernel(view.inst.op());
    // The op table and the CPU registry list the same ops (OpTableTest).
    if (!kernel)
      return makeError("internal error: op '%s' is in the op table but has "
                       "no CPU kernel",
                       view.inst.op().c_str());
    return cpu::verifyOnCpu(*kernel, view);
  });
}

StatusOr<plan::Plan> loadPlan(const std::string &path) {
  LOOM_ASSIGN_OR_RETURN(plan::Plan plan, readPlan(path));
  LOOM_RETURN_IF_ERROR(validatePlan(plan, path));
  return plan;
}

} // namespace loom::runtime
