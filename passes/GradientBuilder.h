//===- GradientBuilder.h - Backward rules of loom ops -----------*- C++ -*-===//

#ifndef LOOM_PASSES_GRADIENTBUILDER_H
#define LOOM_PASSES_GRADIENTBUILDER_H

#include "ir/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::loom {

/// Builds backward ops for one function in reverse order of its forward ops,
/// accumulating the gradient of every value that needs one.
class GradientBuilder {
public:
  GradientBuilder(OpBuilder &b, const DenseSet<Value> &needsGrad)
      : b(b), needsGrad(needsGrad) {}

  Value gradOf(Value v) const { return grads.lookup(v); }
  void seed(Value v, Value g) { grads[v] = g; }

  /// Emits the backward of `op` given its result gradients; an error on the
  /// op when it has no rule.
  LogicalResult backward(Operation *op);

private:
  /// Adds `g` to the gradient of `v` (if `v` needs one), first bringing `g`
  /// to `v`'s shape: summing broadcast dimensions or reshaping.
  void accumulate(Value v, Value g, Location loc);

  bool wanted(Value v) const { return needsGrad.contains(v); }

  // Builders for the rules.
  Value scale(Value x, double factor, Location loc);
  /// A scalar constant in the precision of `like`.
  Value scalar(double value, Value like, Location loc);
  Value mul(Value a, Value c, Location loc);
  Value div(Value a, Value c, Location loc);
  Value matmul(Value lhs, Value rhs, bool tl, bool tr, Location loc);
  Value batchMatmul(Value lhs, Value rhs, bool tl, bool tr, Location loc);
  /// Multiplies a loss gradient by the scalar seed unless the seed is 1.
  Value timesSeed(Value g, Value seed, Location loc);

  // Rules by op family (GradientRules*.cpp).
  LogicalResult backwardMath(Operation *op, Value dy);
  LogicalResult backwardShape(Operation *op, Value dy);
  LogicalResult backwardNN(Operation *op, Value dy);

  OpBuilder &b;
  const DenseSet<Value> &needsGrad;
  DenseMap<Value, Value> grads;
};

} // namespace mlir::loom

#endif // LOOM_PASSES_GRADIENTBUILDER_H
