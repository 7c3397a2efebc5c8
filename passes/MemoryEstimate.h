//===- MemoryEstimate.h - A planned step's memory, before lowering -*- C++
//-*-===//
//
// What each device holds at its peak, read from the planned step (the mesh,
// each value's sharding, the pipeline stages and micro-batches as the plan
// phase annotates them) without lowering it: every value counts the bytes
// of one device's block of it, the step's buffers are simulated as the
// emitter places them (LiveBytes.h) for one micro-batch of one pipeline
// device, and micro-batches and stages are added by what they hold beside
// it: the sums the micro-batches accumulate into for the whole step, the
// activations of the micro-batches a schedule keeps in flight, the sends a
// stage holds to the step's end. Its cost is the planned step's size: it
// does not grow with micro-batches, stages or devices, which is what lets a
// search weigh many plans of a large model (docs/planner.md, "Memory").
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_MEMORYESTIMATE_H
#define LOOM_PASSES_MEMORYESTIMATE_H

#include "passes/RecomputePlan.h"
#include "passes/planner/MemoryModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlir::loom {

/// One pipeline device's estimate (the only one when pp = 1).
struct DeviceEstimate {
  /// Its peak by what it holds; `workspace` is not estimated (0).
  planner::DeviceMemory memory;
  /// The activations one micro-batch keeps from its forward for its
  /// backward, and the micro-batches the device's schedule keeps in flight.
  int64_t keptBytes = 0, inFlight = 1;
};

struct MemoryEstimate {
  std::vector<DeviceEstimate> devices;

  /// The busiest device's bytes.
  int64_t peakBytes() const;
};

/// What the lowering would be asked for beside the planned module.
struct MemoryEstimateOptions {
  /// Every layer recomputed so.
  RematMode remat = RematMode::None;
  /// loom-bucket-all-reduces' options (bucket bytes < 0: no buckets).
  std::string cluster = "cpu:1";
  int64_t bucketBytes = 0;
};

/// The estimate of `planned`, a module after the plan phase
/// (loom-choose-mesh and what follows it, before loom-verify-sharding).
llvm::Expected<MemoryEstimate>
estimateMemory(ModuleOp planned, const MemoryEstimateOptions &options = {});

} // namespace mlir::loom

#endif // LOOM_PASSES_MEMORYESTIMATE_H
