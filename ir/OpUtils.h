//===- OpUtils.h - Helpers shared by the op implementations -----*- C++ -*-===//

#ifndef LOOM_IR_OPUTILS_H
#define LOOM_IR_OPUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace mlir::loom::detail {

inline RankedTensorType f32Tensor(MLIRContext *ctx, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, Float32Type::get(ctx));
}

inline RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Reports `message` at `loc` when there is one; inference then fails.
inline LogicalResult emitInferError(std::optional<Location> loc,
                                    const Twine &message) {
  if (loc)
    return emitError(*loc, message);
  return failure();
}

/// The NumPy broadcast of the shapes of `values`, or failure.
FailureOr<SmallVector<int64_t>> broadcastShapes(ValueRange values);

} // namespace mlir::loom::detail

#endif // LOOM_IR_OPUTILS_H
