//===- ModelCostAnalysis.h - The planner's request from the IR --*- C++ -*-===//
//
// Turns a training step (the module after the train phase: forward, loss,
// backward, optimizer; not yet planned) into the joint search's table
// (planner/ModelCost.h): per layer its products, attention, memory-bound
// bytes, parameters, what its backward keeps under each recomputation mode,
// and what tensor parallelism splits and exchanges; the embedding before the
// layers and the head after them. So an imported model is searched by the
// same search and cost model as a model spec. docs/planner.md, "The request
// from the IR".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_MODELCOSTANALYSIS_H
#define LOOM_PASSES_MODELCOSTANALYSIS_H

#include "passes/planner/ModelCost.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::loom {

/// The table of `module`'s training step, figures per sample of its global
/// batch (the step's data inputs' first dimension). `name` names the model
/// in the table. An error on the step when it is not a training step.
FailureOr<planner::ModelCost> analyzeModelCost(ModuleOp module,
                                               llvm::StringRef name);

} // namespace mlir::loom

#endif // LOOM_PASSES_MODELCOSTANALYSIS_H
