//===- OpUtils.h - Helpers shared by the op implementations -----*- C++ -*-===//

#ifndef LOOM_IR_OPUTILS_H
#define LOOM_IR_OPUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace mlir::loom::detail {

/// The element type of the first float operand: the precision an op computes
/// in (`SameFloatOperandElementType` makes all float operands agree); f32
/// when no operand is a float tensor.
inline Type floatElementType(ValueRange operands) {
  for (Value v : operands)
    if (auto type = dyn_cast<ShapedType>(v.getType()))
      if (isa<FloatType>(type.getElementType()))
        return type.getElementType();
  return operands.empty() ? Type()
                          : Float32Type::get(operands.front().getContext());
}

/// A tensor of `shape` in the precision of `operands`.
inline RankedTensorType floatTensor(ValueRange operands,
                                    ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, floatElementType(operands));
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
