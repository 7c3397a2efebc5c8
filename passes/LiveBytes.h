//===- LiveBytes.h - The bytes a step's buffers hold at once ----*- C++ -*-===//
//
// A step's buffers as the plan emitter makes them (reshapes are views,
// updates are in place, parameters, optimizer state and constants always
// held, data from the step's start, results to its end) and the most bytes
// they hold at once. loom-choose-recompute simulates a lowered program with
// the clones it considers; the memory estimator (MemoryEstimate.h) a planned
// step, with each value's bytes those of one device's block of it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_LIVEBYTES_H
#define LOOM_PASSES_LIVEBYTES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

namespace mlir::loom {

/// The arena's alignment: every buffer's bytes are rounded up to it.
constexpr int64_t kArenaAlignment = 64;

/// A group of ops cloned together before `insertBefore`.
struct RecomputeGroup {
  SmallVector<Operation *> ops;
  Operation *insertBefore = nullptr;
};

/// How a simulation counts the buffers; every field has a default that
/// gives the emitted program's figures.
struct LiveBytesOptions {
  /// A value's bytes before alignment (default: its type's).
  std::function<int64_t(Value)> bytes;
  /// Whether an op runs on the device simulated (default: every op). A
  /// value made by an op that does not run is received where it is first
  /// read; one read by such an op is sent, and held to the step's end.
  std::function<bool(Operation *)> runs;
  /// Whether an op's result 0 is a view of its operand 0, beyond the
  /// emitter's own views.
  std::function<bool(Operation *)> isView;
  /// Sums the micro-batches accumulate into: the sum of those before is
  /// held from the step's start to where the value is made.
  llvm::DenseSet<Value> heldFromStart;
  /// The op before which `LiveBytes::atMark` is taken, and the values whose
  /// buffers it counts (default: all).
  Operation *markBefore = nullptr;
  std::function<bool(Value)> countAtMark;
};

struct LiveBytes {
  /// The most bytes held at once, `held` included.
  int64_t peak = 0;
  /// What the whole step holds: parameters, optimizer state, constants.
  int64_t held = 0;
  /// The buffers live just before `markBefore` runs that `countAtMark`
  /// accepts (`held` not included).
  int64_t atMark = 0;
};

/// The live bytes of `func`'s buffers with `groups` cloned.
LiveBytes simulateLiveBytes(func::FuncOp func, ArrayRef<RecomputeGroup> groups,
                            const LiveBytesOptions &options = {});

} // namespace mlir::loom

#endif // LOOM_PASSES_LIVEBYTES_H
