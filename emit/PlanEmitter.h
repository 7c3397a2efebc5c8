//===- PlanEmitter.h - Lowered IR to the serialized plan --------*- C++ -*-===//

#ifndef LOOM_EMIT_PLANEMITTER_H
#define LOOM_EMIT_PLANEMITTER_H

#include "runtime/plan.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::loom {

/// The serialized plan's messages (runtime/plan.proto).
namespace plan = ::loom::plan;

/// What the emitted plan records besides the programs.
struct EmitOptions {
  /// ONNX model the initial weights come from (absolute path).
  std::string modelPath;
  /// Training settings copied into the plan; `training.loss` empty for a
  /// forward plan.
  plan::Training training;
  std::string producer = "loomc";
  /// Whether parameters start from the model's initializers
  /// (`onnx_initializer`); without, they have no stored value and the
  /// runtime fills them by their `init_rule` (`loomc --no-weights`).
  bool storedWeights = true;
};

/// Bytes of one program's arena by what they hold (for the summary).
struct MemoryBreakdown {
  int64_t parameters = 0, gradients = 0, optimizerState = 0, activations = 0,
          data = 0, arena = 0;
  /// The live-set bound of the arena: the most bytes (each buffer rounded
  /// up to the arena's alignment) live at one instruction. Of a plan: the
  /// most of any program, the bound of the largest arena.
  int64_t liveBytes = 0;
  /// Device memory the kernels allocate besides the arena (largest program;
  /// set by the driver for GPU clusters, runtime/Workspace.h).
  int64_t workspace = 0;
  int64_t numParameters = 0; // elements

  /// What one device holds: a program's arena and the kernels' workspace.
  int64_t perDevice(int64_t arenaBytes) const { return arenaBytes + workspace; }
};

/// Emits the plan of a lowered module: `@main` is one rank's program (a
/// training step when it returns a `loom.loss`, a forward pass otherwise)
/// and the optional `shard.grid @mesh` gives the mesh. Every SSA value gets
/// a buffer; buffers get arena offsets by a first-fit assignment over their
/// live ranges. Reports problems as diagnostics and returns failure.
FailureOr<plan::Plan> emitPlan(ModuleOp module, const EmitOptions &options,
                               MemoryBreakdown *memory = nullptr);

} // namespace mlir::loom

#endif // LOOM_EMIT_PLANEMITTER_H
