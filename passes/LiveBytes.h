//===- LiveBytes.h - The bytes a step's buffers hold at once ----*- C++ -*-===//
//
// A step's buffers as the plan emitter makes them (reshapes are views,
// updates are in place, parameters, optimizer state and constants always
// held, data from the step's start, results to its end, sends to its end
// (a parameter's from a copy), a gradient bucket as one range) and the most
// bytes they hold at once. loom-choose-recompute simulates a lowered program
// with the clones it considers; the memory estimator (MemoryEstimate.h) the
// lowered copy of a planned step.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_LIVEBYTES_H
#define LOOM_PASSES_LIVEBYTES_H

#include "emit/ArenaAssignment.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::loom {

/// The bytes `v`'s buffer takes in the arena: its type's, rounded up to
/// the arena's alignment (the emitter's `kArenaAlignment`); at most 1 PiB.
int64_t arenaBytes(Value v);
/// `bytes` rounded up to the arena's alignment; at most 1 PiB.
int64_t alignedBytes(double bytes);

/// A group of ops cloned together before `insertBefore`.
struct RecomputeGroup {
  SmallVector<Operation *> ops;
  Operation *insertBefore = nullptr;
};

/// The ops of `groups` that nothing reads once the clones are made: each
/// of their readers runs at or after the group's place (and reads the
/// clone) or is such an op itself. The lowering erases them.
llvm::DenseSet<Operation *> unreadOriginals(ArrayRef<RecomputeGroup> groups);

/// Bytes a simulation holds beside the program's own buffers.
struct LiveBytesOptions {
  /// Held from the step's start until just before `heldUntil` runs (the
  /// data of micro-batches a shortened step leaves out; MemoryEstimate.h).
  int64_t heldBytes = 0;
  Operation *heldUntil = nullptr;
};

/// The most bytes `func`'s buffers hold at once with `groups` cloned.
int64_t simulateLiveBytes(func::FuncOp func, ArrayRef<RecomputeGroup> groups,
                          const LiveBytesOptions &options = {});

} // namespace mlir::loom

#endif // LOOM_PASSES_LIVEBYTES_H
