//===- OpCost.h - What an op costs the planner ------------------*- C++ -*-===//
//
// The planner's op record (FLOPs, bytes, arithmetic) of a loom op, shared by
// the auto-sharding pass (on the global step) and loomc's step estimate (on
// the lowered, per-rank step). docs/planner.md lists the FLOPs per op.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_OPCOST_H
#define LOOM_PASSES_OPCOST_H

#include "passes/planner/CostModel.h"

#include "mlir/IR/Operation.h"

namespace mlir::loom {

/// Bytes of a static-shaped tensor (0 for anything else).
double bytesOf(Value v);

/// The multiply-add FLOPs of `op` (2 per multiply-add) when it contracts:
/// matmul, linear, batch_matmul, conv2d and its two gradients, attention
/// (S = Q K^T and P V) and its gradient (S recomputed, dV, dP, dQ, dK),
/// attention at half when causal as the CUDA kernels skip masked tiles;
/// 0 for every other op.
double contractionFlops(Operation *op);

/// `op`'s FLOPs, the bytes it reads (less a shape-only operand) and writes,
/// and its arithmetic (bf16 when its float operands are). With
/// `hostKernels`, as the CPU kernels run it where they differ: a
/// convolution runs one product an image (docs/planner.md).
planner::OpRecord opRecordOf(Operation *op, bool hostKernels = false);

} // namespace mlir::loom

#endif // LOOM_PASSES_OPCOST_H
