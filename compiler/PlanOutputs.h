//===- PlanOutputs.h - What loomc records of the plan it emits ---*- C++
//-*-===//
//
// The training settings the plan carries (optimizer as the step applies it,
// batches, precision, ZeRO stage) and the planner's figures of the emitted
// plan: each program's step estimate, the busiest stretched by its
// schedule's waits, and its memory by kind (compiler/Summary.h prints
// them).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PLANOUTPUTS_H
#define LOOM_COMPILER_PLANOUTPUTS_H

#include "compiler/LoomcOptions.h"
#include "compiler/Summary.h"
#include "emit/PlanEmitter.h"
#include "passes/planner/Cluster.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::loom::loomc {

/// Dimension 0 of the step's first data input (0 without one).
int64_t batchOf(ModuleOp module);

/// The plan's training settings (`t`) of the lowered `module`.
void setTrainingSettings(plan::Training &t, ModuleOp module, const Options &o,
                         const Checked &c, int64_t globalBatch, int64_t dp,
                         int64_t numMicroBatches, int64_t zero);

/// The planner's figures of `plan`, emitted from the lowered `module` with
/// `memory` (the emitter's accounting; on GPU clusters the CUDA kernels'
/// workspace is added).
PlanFigures stepFigures(ModuleOp module, const plan::Plan &plan,
                        MemoryBreakdown memory, const Cluster &cluster,
                        Precision precision);

} // namespace mlir::loom::loomc

#endif // LOOM_COMPILER_PLANOUTPUTS_H
