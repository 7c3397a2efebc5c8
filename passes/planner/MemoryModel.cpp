//===- MemoryModel.cpp - What a device holds and if it fits -----*- C++ -*-===//

#include "passes/planner/MemoryModel.h"

using namespace mlir::loom::planner;

MemoryFit mlir::loom::planner::checkMemoryFit(const DeviceMemory &memory,
                                               int64_t capacityBytes) {
  MemoryFit fit;
  fit.requiredBytes = memory.total();
  fit.capacityBytes = capacityBytes;
  fit.fits = fit.requiredBytes <= capacityBytes;
  fit.shortfallBytes = fit.fits ? 0 : fit.requiredBytes - capacityBytes;
  return fit;
}
