//===- CompilePlan.h - One compile of the imported model -------*- C++ -*-===//
//
// loomc imports the model once (importModel) and compiles a clone of it for
// each plan it tries: the searched plan, the attempts that make it fit
// (compiler/PlanAttempts.h), their quiet probes, and --verify-plan's
// one-device reference (compileOnce).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_COMPILEPLAN_H
#define LOOM_COMPILER_COMPILEPLAN_H

#include "compiler/LoomcOptions.h"
#include "compiler/PlanAttempts.h"
#include "compiler/Summary.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/MemoryModel.h"
#include "runtime/PlanFormat.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <string>

namespace mlir::loom::loomc {

/// What one compile is for: the cluster, the pins and --micro-batch; the
/// options' own, or --verify-plan's one-device reference's.
struct Target {
  std::string clusterSpec;
  Cluster cluster;
  Forced forced;
  int64_t microBatch = 0;
  /// The one-device plan --verify-plan checks against: no summary, no
  /// memory estimate, no format check.
  bool reference = false;
};

/// The model, imported once; every compile takes a clone.
struct Model {
  OwningOpRef<ModuleOp> module;
  /// Batch norms take the whole batch's statistics: no micro-batches.
  bool hasBatchNorm = false;
  int64_t globalBatch = 0;
  bool specModule = false;
};

/// What one compile made: its plan and figures, or only printed IR.
struct Compiled {
  bool printed = false;
  plan::Plan plan;
  PlanFigures figures;
  planner::MemoryFit fit;
  int64_t dp = 1, numMicroBatches = 1, zero = 0;
  std::string summary;
};

/// Compiles a clone of `model` for `target` with `attempt`'s choices, up to
/// the phase --emit asks for (then the IR is printed). `quiet`: a probe,
/// whose errors only rule its choice out. The exit code.
int compileOnce(const Options &o, const Checked &checked, const Model &model,
                const Target &target, const Attempt &attempt, bool quiet,
                Compiled &out);

/// Imports the model (an ONNX file, or the model a spec describes) once,
/// with what every compile of it shares.
std::optional<Model> importModel(MLIRContext *ctx, const Options &o,
                                 const Checked &checked, bool specModule);

/// Prints `module` to `path` (stdout when empty).
LogicalResult printModule(ModuleOp module, const std::string &path);

} // namespace mlir::loom::loomc

#endif // LOOM_COMPILER_COMPILEPLAN_H
