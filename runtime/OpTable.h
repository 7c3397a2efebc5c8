//===- OpTable.h - The ops a plan may name, with their arities --*- C++ -*-===//
//
// The one list of the plan format's ops (docs/plan-format.md) and how many
// operands each takes. Plan validation reads it for every backend; the CPU
// and CUDA kernel registries (kernels/KernelRegistry.cpp,
// cuda/CudaRegistry.cpp) map the same names to kernels and do not restate
// the counts. It lives in `LoomPlanFormat`, so `loomc` knows the ops without
// linking any kernel.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_OPTABLE_H
#define LOOM_RUNTIME_OPTABLE_H

#include <string>
#include <string_view>
#include <vector>

namespace loom::runtime {

/// One op of the plan format: its name and the inclusive ranges of input
/// and output counts that an instruction naming it must have.
struct OpInfo {
  std::string_view name;
  int minInputs, maxInputs;
  int minOutputs, maxOutputs;
};

/// Every op of the plan format, in the order messages list them.
const std::vector<OpInfo> &opTable();

/// The entry of op `name`, or null for an op the format does not have.
const OpInfo *findOp(std::string_view name);

/// Every op name, comma-separated, for "unknown op" messages.
std::string knownOpNames();

} // namespace loom::runtime

#endif // LOOM_RUNTIME_OPTABLE_H
