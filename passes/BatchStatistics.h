//===- BatchStatistics.h - A batch's per-channel mean and variance -*- C++ -*-===//
//
// Shared by `loom-sync-batch-norm` (which normalises with these statistics)
// and `loom-append-running-stats` (which folds them into the running
// statistics). Both build them with the same ops on the same input, so CSE
// leaves one copy, and under data parallelism one pair of all-reduces.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_BATCHSTATISTICS_H
#define LOOM_PASSES_BATCHSTATISTICS_H

#include "ir/LoomOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::loom {

/// The statistics of `x` (`[N, C, ...]`) over every dimension but the
/// channels, as `[1, C, 1, ...]` f32 tensors.
struct BatchStatistics {
  /// `x` in f32 (a conversion when `x` is bf16).
  Value input;
  Value mean;
  /// `input - mean`.
  Value centered;
  /// The biased variance: the mean of `centered` squared.
  Value variance;
  /// Elements per channel: N times the spatial size.
  int64_t count = 0;
};

/// The dimensions a batch norm of a rank-`rank` input reduces: all but 1.
SmallVector<int64_t> batchNormAxes(int64_t rank);

/// `v` converted to f32 when it is bf16, else `v`.
Value castToF32(OpBuilder &b, Location loc, Value v);

/// Builds the statistics of `x` at the builder's insertion point: the mean
/// as a sum scaled by 1/count, then the centred sum of squares scaled the
/// same way (two passes, as the fused kernels compute them). Each sum is a
/// `loom.reduce_sum` over `batchNormAxes`, which the data-parallel partition
/// completes with one all-reduce, so `count` is the global batch's.
BatchStatistics buildBatchStatistics(OpBuilder &b, Location loc, Value x);

} // namespace mlir::loom

#endif // LOOM_PASSES_BATCHSTATISTICS_H
