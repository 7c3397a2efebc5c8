//===- RaiseGelu.cpp - Recognise decomposed GELU ----------------*- C++ -*-===//
//
// Exporters write GELU as element-wise ops: PyTorch's exact `nn.GELU()` as
// `x * (1 + erf(x / sqrt(2))) * 0.5`, its `approximate='tanh'` and Hugging
// Face's `gelu_new` as `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
// The pattern reads the product as three factors `{x, 0.5, 1 + f}` grouped
// either way, then `f` as `erf(...)` or `tanh(...)` of the same `x`.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"
#include "passes/PatternPass.h"
#include "passes/RaiseUtils.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMRAISEGELUPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::raise;

namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kCubicCoefficient = 0.044715;

/// `x` when `arg` is `x / sqrt(2)` or `x * (1 / sqrt(2))` (either order).
Value matchErfArgument(Value arg, Match &m) {
  if (auto div = arg.getDefiningOp<DivOp>()) {
    if (isSplatNear(div.getRhs(), kSqrt2))
      return m.take(div).getLhs();
  } else if (auto mul = arg.getDefiningOp<MulOp>()) {
    if (std::optional<Value> x = operandBesideConstant(mul, 1 / kSqrt2)) {
      m.take(mul);
      return *x;
    }
  }
  m.fail("the erf argument is not x / sqrt(2) or x * (1 / sqrt(2))");
  return nullptr;
}

/// Whether `v` is `x^3`: `loom.pow x, 3` or `x * (x * x)` / `(x * x) * x`.
bool matchCube(Value v, Value x, Match &m) {
  if (auto pow = v.getDefiningOp<PowOp>()) {
    if (pow.getLhs() != x || !isSplatNear(pow.getRhs(), 3.0))
      return false;
    m.take(pow);
    return true;
  }
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  for (unsigned i : {0u, 1u}) {
    auto square = mul->getOperand(1 - i).getDefiningOp<MulOp>();
    if (mul->getOperand(i) == x && square && square.getLhs() == x &&
        square.getRhs() == x) {
      m.take(mul);
      m.take(square);
      return true;
    }
  }
  return false;
}

/// `x` when `arg` is `sqrt(2/pi) * (x + 0.044715 * x^3)`, the operands of
/// each op in either order.
Value matchTanhArgument(Value arg, Match &m) {
  auto scaled = arg.getDefiningOp<MulOp>();
  std::optional<Value> inner =
      scaled ? operandBesideConstant(scaled, kSqrt2OverPi) : std::nullopt;
  auto add = inner ? inner->getDefiningOp<AddOp>() : AddOp();
  if (!add) {
    m.fail("the tanh argument is not sqrt(2/pi) * (a + b)");
    return nullptr;
  }
  size_t mark = m.ops.size();
  for (unsigned i : {0u, 1u}) {
    Value x = add->getOperand(i);
    auto term = add->getOperand(1 - i).getDefiningOp<MulOp>();
    std::optional<Value> cube =
        term ? operandBesideConstant(term, kCubicCoefficient) : std::nullopt;
    if (cube && matchCube(*cube, x, m)) {
      m.take(scaled);
      m.take(add);
      m.take(term);
      return x;
    }
    m.truncate(mark);
  }
  m.fail("the tanh argument is not sqrt(2/pi) * (x + 0.044715 * x^3)");
  return nullptr;
}

/// `x` when the factors `f` are `{x, 0.5, 1 + erf(...)}` or `{x, 0.5,
/// 1 + tanh(...)}` of that `x`, in any order; `approximate` tells which.
Value matchFactors(ArrayRef<Value> f, bool &approximate, Match &m) {
  size_t mark = m.ops.size();
  m.fail("no factor is 0.5");
  for (unsigned half = 0; half < 3; ++half) {
    if (!isSplatNear(f[half], 0.5))
      continue;
    m.fail("no factor is 1 + erf(...) or 1 + tanh(...)");
    for (unsigned one = 0; one < 3; ++one) {
      auto add = f[one].getDefiningOp<AddOp>();
      std::optional<Value> g =
          add ? operandBesideConstant(add, 1.0) : std::nullopt;
      if (!g)
        continue;
      Value x;
      if (auto erf = g->getDefiningOp<ErfOp>()) {
        x = matchErfArgument(m.take(erf).getInput(), m);
        approximate = false;
      } else if (auto tanh = g->getDefiningOp<TanhOp>()) {
        x = matchTanhArgument(m.take(tanh).getInput(), m);
        approximate = true;
      }
      if (x && x == f[3 - half - one]) {
        m.take(add);
        return x;
      }
      if (x)
        m.fail("the factor beside 0.5 and 1 + f(x) is not x");
      m.truncate(mark);
    }
  }
  return nullptr;
}

/// `0.5 * x * (1 + erf(x / sqrt(2)))` or the tanh form -> `loom.gelu`.
struct RaiseGeluPattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    Match m;
    m.take(root);
    std::string why = "neither operand is a 'loom.mul' (not three factors)";
    // The product of three factors: one operand of the root is itself a
    // product; try both.
    for (unsigned i : {0u, 1u}) {
      auto inner = root->getOperand(i).getDefiningOp<MulOp>();
      if (!inner)
        continue;
      m.truncate(1);
      m.take(inner);
      Value factors[] = {inner.getLhs(), inner.getRhs(),
                         root->getOperand(1 - i)};
      bool approximate = false;
      Value x = matchFactors(factors, approximate, m);
      if (x && x.getType() != root.getType())
        m.fail("the product is broadcast beyond the shape of x");
      else if (x && usesStayInside(m)) {
        rewriter.setInsertionPoint(root);
        Value gelu = GeluOp::create(rewriter, root.getLoc(), x, approximate);
        replaceMatch(rewriter, m, gelu);
        return success();
      }
      why = m.why;
    }
    return rewriter.notifyMatchFailure(root, why);
  }
};

} // namespace

template class mlir::loom::PatternPass<loom::impl::LoomRaiseGeluPassBase,
                                       RaiseGeluPattern>;
