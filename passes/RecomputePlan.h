//===- RecomputePlan.h - What recomputation runs again, and its peak -*- C++
//-*-===//
//
// Shared by loom-choose-recompute (which decides) and loom-recompute (which
// clones): both find a program's layers and place a group of recomputed ops
// the same way, so the peak the choice predicts is the peak of the program
// the lowering writes. A program is one device's step as it runs (after
// partition, micro-batch unrolling and pipeline stages), so its micro-batches
// in flight and its schedule are in the op order the figures come from.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_RECOMPUTEPLAN_H
#define LOOM_PASSES_RECOMPUTEPLAN_H

#include "passes/LiveBytes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>

namespace mlir::loom {

/// What a layer keeps for its backward pass.
enum class RematMode {
  /// Everything its backward reads.
  None,
  /// All but the results of its cheap ops (no contraction: norms,
  /// activations, copies) whose operands are kept anyway.
  Selective,
  /// Only its inputs: the layer runs again in the backward.
  Full
};

/// `--force remat=` and loom-choose-recompute's `mode`: none, selective,
/// full or auto (std::nullopt: the cheapest that fits the budget).
std::optional<std::optional<RematMode>> parseRematMode(llvm::StringRef text);
llvm::StringRef stringifyRematMode(RematMode mode);

/// The backward ops of `func`: the losses' gradients, the ops marked
/// `loom.backward`, the clones loom-recompute made (`loom.recomputed`), and
/// every op that reads a result of one.
llvm::DenseSet<Operation *> backwardOps(func::FuncOp func);

/// One layer's forward ops for one micro-batch: ops with one layer key
/// (LayerKey.h) joined by the values they pass each other, in block order.
/// Ops that read only arguments and constants (a weight's transpose, shared
/// by every micro-batch) belong to none.
struct LayerInstance {
  int64_t layer = 0; // index into ProgramLayers::keys
  SmallVector<Operation *> ops;
};

struct ProgramLayers {
  /// The layer keys in the order the program first runs them.
  SmallVector<std::string> keys;
  SmallVector<LayerInstance> instances;
  llvm::DenseSet<Operation *> backward;
  /// The forward ops computed from parameters and constants alone.
  llvm::DenseSet<Operation *> fixed;
  /// The forward gathers whose result the backward gathers again rather
  /// than keep it: each gathers an activation over `tp` alone (sequence
  /// parallelism), the backward reads it, and a contraction runs between its
  /// last forward reader and its first backward one (so the whole copy
  /// would be held meanwhile).
  llvm::DenseSet<Operation *> regathered;
  /// Those of no layer (the head's), in block order.
  SmallVector<Operation *> looseGathers;
};

ProgramLayers findLayers(func::FuncOp func);

/// The ops of `instance` (of `layers`) that `mode` runs again, in block
/// order: with `regather`, under every mode, its gathers in
/// `layers.regathered`;
/// for `Full`, every op it can recompute (pure, no collective or transfer
/// but those gathers and local slices over the grid) that leads to a value
/// its backward reads; for `Selective`, those without a contraction whose
/// result the backward (or a gather made again) reads and whose operands
/// are kept anyway, recomputed themselves, or computed from parameters
/// alone.
SmallVector<Operation *> recomputedOps(const LayerInstance &instance,
                                       RematMode mode,
                                       const ProgramLayers &layers,
                                       bool regather = true);

/// Where a group's clones go: just before the first backward op that reads
/// one of its results (nullptr: none does, nothing to recompute). Ops of
/// `ops` that do not come before that point are dropped from it.
Operation *placeGroup(SmallVectorImpl<Operation *> &ops,
                      const llvm::DenseSet<Operation *> &backward);

/// The peak of the bytes `func`'s buffers hold at once, placed as the plan
/// emitter places them (reshapes are views, updates are in place,
/// parameters, optimizer state and constants always held, data from the
/// step's start, results to its end), with `groups` cloned: each buffer
/// rounded up to the arena's 64-byte alignment, which the emitted arena is
/// at least.
int64_t simulatePeakBytes(func::FuncOp func, ArrayRef<RecomputeGroup> groups);

/// The activation bytes `instance` keeps for the backward under `mode`:
/// its results the backward or the recomputed ops read (each buffer once,
/// a view counted as the buffer it views), less those `mode` (with
/// `regather`, as recomputedOps) recomputes. Its inputs are another layer's
/// (or data), counted there; its output, which the next layer's backward
/// reads, is counted here.
int64_t keptActivationBytes(const LayerInstance &instance, RematMode mode,
                            const ProgramLayers &layers, bool regather = true);

} // namespace mlir::loom

#endif // LOOM_PASSES_RECOMPUTEPLAN_H
