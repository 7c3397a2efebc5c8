//===- RaiseUtils.h - Matching helpers of the raising passes ----*- C++ -*-===//
//
// Shared by `loom-raise-gelu`, `loom-raise-layer-norm`, `loom-raise-rms-norm`
// and `loom-raise-linear`: constants matched with a relative tolerance, the
// record of the ops a pattern matched, and the check that none of their
// values escapes the pattern.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_RAISEUTILS_H
#define LOOM_PASSES_RAISEUTILS_H

#include "ir/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace mlir::loom::raise {

/// Relative tolerance of constant matching: exporters write constants such
/// as `sqrt(2)` rounded to f32 (`1.4142135381698608`).
inline constexpr double kRelTol = 1e-6;

/// The value of `v` when it is an f32 constant with one value in every
/// element (a scalar or a splat), else none.
inline std::optional<double> splatValue(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(attr);
  if (!dense || !dense.getElementType().isF32() || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// Whether `v` is an f32 scalar or splat constant within `kRelTol` of
/// `expected`.
inline bool isSplatNear(Value v, double expected) {
  std::optional<double> got = splatValue(v);
  return got && std::fabs(*got - expected) <= kRelTol * std::fabs(expected);
}

/// The ops of one candidate match, the root first, and why it failed.
struct Match {
  SmallVector<Operation *> ops;
  std::string why;

  /// Records `op` (when non-null and not yet recorded) and returns it.
  template <typename OpTy> OpTy take(OpTy op) {
    if (op && !llvm::is_contained(ops, op.getOperation()))
      ops.push_back(op.getOperation());
    return op;
  }
  /// Records the reason and returns false, for `return m.fail("...")`.
  bool fail(const llvm::Twine &reason) {
    why = reason.str();
    return false;
  }
  /// Drops the ops recorded after the first `size` (backtracking).
  void truncate(size_t size) { ops.resize(size); }
};

/// The other operand of commutative binary `op` when one of its operands
/// satisfies `pred`; `pred` is tried on the right operand first.
template <typename Pred>
inline std::optional<Value> otherOperand(Operation *op, Pred pred) {
  if (pred(op->getOperand(1)))
    return op->getOperand(0);
  if (pred(op->getOperand(0)))
    return op->getOperand(1);
  return std::nullopt;
}

/// The other operand of `op` (a commutative `loom.mul` / `loom.add`) when
/// one operand is a splat constant near `expected`.
inline std::optional<Value> operandBesideConstant(Operation *op,
                                                  double expected) {
  return otherOperand(op, [&](Value v) { return isSplatNear(v, expected); });
}

/// Whether every use of a value defined by the matched ops, other than the
/// results of `m.ops[0]` (the root), is by a matched op: the intermediates
/// die with the root.
inline bool usesStayInside(Match &m) {
  llvm::SmallPtrSet<Operation *, 16> inside(m.ops.begin(), m.ops.end());
  for (Operation *op : llvm::drop_begin(m.ops))
    for (Operation *user : op->getUsers())
      if (!inside.contains(user))
        return m.fail("'" + op->getName().getStringRef() +
                      "' has a use outside the pattern");
  return true;
}

/// Replaces the root of `m` by `replacement` and erases the other matched
/// ops, which `usesStayInside` made dead.
inline void replaceMatch(PatternRewriter &rewriter, Match &m,
                         Value replacement) {
  rewriter.replaceOp(m.ops.front(), replacement);
  SmallVector<Operation *> rest(llvm::drop_begin(m.ops));
  // Erase users before the ops defining their operands, in any order of
  // `rest`, until none is left.
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *&op : rest) {
      if (op && op->use_empty()) {
        rewriter.eraseOp(op);
        op = nullptr;
        erased = true;
      }
    }
  }
}

/// `v` when `r` is `1 / sqrt(v)`: `rsqrt(v)`, `reciprocal(sqrt(v))` or
/// `1 / sqrt(v)`; records the ops in `m`. Null otherwise.
inline Value matchRsqrt(Value r, Match &m) {
  if (auto rsqrt = r.getDefiningOp<RsqrtOp>())
    return m.take(rsqrt).getInput();
  Operation *inverse = nullptr;
  Value s;
  if (auto rec = r.getDefiningOp<ReciprocalOp>()) {
    inverse = rec;
    s = rec.getInput();
  } else if (auto div = r.getDefiningOp<DivOp>()) {
    if (isSplatNear(div.getLhs(), 1.0)) {
      inverse = div;
      s = div.getRhs();
    }
  }
  auto sqrt = s ? s.getDefiningOp<SqrtOp>() : SqrtOp();
  if (!sqrt)
    return nullptr;
  if (!llvm::is_contained(m.ops, inverse))
    m.ops.push_back(inverse);
  return m.take(sqrt).getInput();
}

/// Reads `root` as `num / sqrt(v)`: `num / sqrt(v)`, or `num * r` / `r * num`
/// with `r` a `matchRsqrt` form, and calls `rest(num, v)` on each reading
/// until one returns true. `root` must already be recorded in `m`; the ops
/// of failed readings are dropped from it.
inline bool matchDivBySqrt(Operation *root, Match &m,
                           llvm::function_ref<bool(Value, Value)> rest) {
  size_t mark = m.ops.size();
  if (auto div = dyn_cast<DivOp>(root)) {
    if (auto sqrt = div.getRhs().getDefiningOp<SqrtOp>()) {
      m.take(sqrt);
      if (rest(div.getLhs(), sqrt.getInput()))
        return true;
      m.truncate(mark);
      return false;
    }
    return m.fail("the divisor is not a 'loom.sqrt'");
  }
  if (!isa<MulOp>(root))
    return m.fail("not a 'loom.div' or 'loom.mul'");
  bool any = false;
  for (unsigned i : {1u, 0u}) {
    if (Value v = matchRsqrt(root->getOperand(i), m)) {
      any = true;
      if (rest(root->getOperand(1 - i), v))
        return true;
    }
    m.truncate(mark);
  }
  return any ? false
             : m.fail("neither factor is rsqrt(v), reciprocal(sqrt(v)) or "
                      "1 / sqrt(v)");
}

/// The shortest decimal that rounds to the f32 `value` (`1e-5` for the f32
/// nearest it, not `9.9999997473787516e-06`), as the model's author wrote it.
inline double shortestF32Decimal(double value) {
  float f = static_cast<float>(value);
  for (int digits = 1; digits < 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.*e", digits - 1,
                  static_cast<double>(f));
    double d = std::strtod(text, nullptr);
    if (static_cast<float>(d) == f)
      return d;
  }
  return f;
}

/// `v + eps` with `eps` a non-negative f32 scalar or splat constant, in
/// either order: returns `v` and sets `eps`; records the add. Null otherwise.
inline Value matchPlusEpsilon(Value sum, double &eps, Match &m) {
  auto add = sum.getDefiningOp<AddOp>();
  if (!add)
    return nullptr;
  for (unsigned i : {1u, 0u}) {
    std::optional<double> c = splatValue(add->getOperand(i));
    if (c && *c >= 0 && std::isfinite(*c)) {
      eps = shortestF32Decimal(*c);
      m.take(add);
      return add->getOperand(1 - i);
    }
  }
  return nullptr;
}

/// The base `b` when `v` is `b^2`: `loom.pow b, 2` or `b * b'` where
/// `same(b, b')` (by default `b == b'`); records the op. Null otherwise.
inline Value matchSquare(Value v, Match &m,
                         llvm::function_ref<bool(Value, Value)> same = {}) {
  if (auto pow = v.getDefiningOp<PowOp>())
    if (isSplatNear(pow.getRhs(), 2.0))
      return m.take(pow).getLhs();
  if (auto mul = v.getDefiningOp<MulOp>())
    if (same ? same(mul.getLhs(), mul.getRhs()) : mul.getLhs() == mul.getRhs())
      return m.take(mul).getLhs();
  return nullptr;
}

/// The first axis `k` when `axes` is `[k, k+1, ..., rank-1]` and `keepDims`,
/// i.e. a reduction over the trailing dimensions that keeps them; else none.
inline std::optional<int64_t> trailingAxis(ArrayRef<int64_t> axes,
                                           bool keepDims, int64_t rank) {
  if (!keepDims || axes.empty() || axes.back() != rank - 1)
    return std::nullopt;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1)
      return std::nullopt;
  return axes.front();
}

/// A `loom.constant` splat of `value` with `shape`.
inline Value splatConstant(PatternRewriter &rewriter, Location loc,
                           ArrayRef<int64_t> shape, float value) {
  auto type = RankedTensorType::get(shape, rewriter.getF32Type());
  return ConstantOp::create(rewriter, loc, DenseElementsAttr::get(type, value));
}

/// Whether `param` can be the scale or bias of a norm over the trailing
/// dimensions `normalized`: shaped like them, possibly with extra leading 1s
/// (`[1, 1, N]` for `[N]`), and not broadcast inside them.
inline bool fitsNormParam(Value param, ArrayRef<int64_t> normalized) {
  auto shape = cast<RankedTensorType>(param.getType()).getShape();
  size_t n = normalized.size();
  return shape.size() >= n && shape.take_back(n) == normalized &&
         llvm::all_of(shape.drop_back(n), [](int64_t d) { return d == 1; });
}

/// `param` (which `fitsNormParam`) reshaped to `normalized` when needed.
inline Value asNormParam(PatternRewriter &rewriter, Location loc, Value param,
                         ArrayRef<int64_t> normalized) {
  if (cast<RankedTensorType>(param.getType()).getShape() == normalized)
    return param;
  return ReshapeOp::create(rewriter, loc, param,
                           rewriter.getDenseI64ArrayAttr(normalized));
}

/// Whether `v` is a `loom.constant` of ones (a norm created without scale).
inline bool isOnes(Value v) { return splatValue(v) == 1.0; }

} // namespace mlir::loom::raise

#endif // LOOM_PASSES_RAISEUTILS_H
