//===- BucketSize.h - How many bytes a bucket of collectives holds -*- C++ -*-===//
//
// The overlapped collectives (loom-bucket-all-reduces,
// loom-bucket-block-collectives) group tensors into buckets sized alike:
// enough bytes to reach the link's bandwidth, few enough that most buckets
// overlap the ops around them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_BUCKETSIZE_H
#define LOOM_PASSES_BUCKETSIZE_H

#include "passes/planner/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>

namespace mlir::loom {

/// The largest bucket the links of the groups of mesh axes `axisGroups` ask
/// for (`planner::bucketBytes`) on `cluster` (docs/cluster-spec.md), or the
/// largest bucket worth reducing when the module has no planned mesh. An
/// error at `func`, from `pass`, when the cluster does not parse.
FailureOr<int64_t> linkBucketBytes(func::FuncOp func,
                                   ArrayRef<SmallVector<int16_t>> axisGroups,
                                   StringRef cluster, StringRef pass);

} // namespace mlir::loom

#endif // LOOM_PASSES_BUCKETSIZE_H
