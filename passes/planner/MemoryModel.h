//===- MemoryModel.h - What a device holds and if it fits -------*- C++ -*-===//
//
// Plain data: the bytes one device holds in a step, by what they are, and
// the check against the device's memory. The figures come from whoever knows
// them (the plan's arena for the emitted plan, the runtime's workspace
// formulas for the kernels' scratch); the planner library links neither.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_MEMORYMODEL_H
#define LOOM_PASSES_PLANNER_MEMORYMODEL_H

#include <cstdint>

namespace mlir::loom::planner {

/// Bytes one device holds at its peak, by what they hold.
struct DeviceMemory {
  int64_t parameters = 0, gradients = 0, optimizerState = 0;
  /// Everything else of the arena: activations, their gradients, inputs.
  int64_t activations = 0;
  /// Device memory the kernels allocate besides the arena.
  int64_t workspace = 0;

  /// All of it.
  int64_t total() const {
    return parameters + gradients + optimizerState + activations + workspace;
  }
};

/// The result of checking a device's memory against its capacity.
struct MemoryFit {
  bool fits = true;
  int64_t requiredBytes = 0, capacityBytes = 0;
  /// How much is missing; 0 when it fits.
  int64_t shortfallBytes = 0;
};

/// Whether `memory` fits a device of `capacityBytes`.
MemoryFit checkMemoryFit(const DeviceMemory &memory, int64_t capacityBytes);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_MEMORYMODEL_H
