//===- RaiseAttention.cpp - Recognise scaled dot-product attention -------===//
//
// Matches, as the ONNX exporters emit it for GPT-2, BERT and LLaMA,
//   P = softmax(mask(scale * Q K^T), last axis);  O = P V
// where K^T is `batch_matmul {transpose_rhs}` or an explicit transpose of the
// last two dimensions, the scale a division or multiplication by a scalar
// constant, and the mask either absent, a constant all-zero additive mask,
// or a constant causal mask (a 0/1 `select` condition that is lower
// triangular, or an additive mask that is 0 on and below the diagonal and
// very negative above it). Rewrites it into `loom.attention`.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"
#include "passes/PatternPass.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMRAISEATTENTIONPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Masked-out additive entries must be at least this negative.
constexpr double kMaskedOut = -1e4;

enum class MaskKind { None, Causal, Unknown };

/// The value of a scalar (or splat) f32 constant.
std::optional<double> scalarConstant(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !attr.getElementType().isF32())
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

/// Classifies a constant mask broadcast to `[..., sq, sk]`: `additive`
/// masks add 0 / very negative values, otherwise it is a 0/1 condition.
MaskKind classifyMask(Value mask, int64_t sq, int64_t sk, bool additive) {
  // Broadcasting the constant over batch or heads keeps its pattern.
  while (Operation *def = mask.getDefiningOp()) {
    if (!isa<ExpandOp, BroadcastLikeOp>(def) || !def->hasOneUse())
      break;
    mask = def->getOperand(0);
  }
  DenseElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)) || !attr.getElementType().isF32())
    return MaskKind::Unknown;
  auto shape = cast<ShapedType>(attr.getType()).getShape();
  if (shape.size() < 2)
    return MaskKind::Unknown;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if ((rows != sq && rows != 1) || (cols != sk && cols != 1))
    return MaskKind::Unknown;
  bool allZero = true, causal = rows == sq && cols == sk && sq == sk;
  // The f32 elements in place (an APFloat apiece costs more than the rest
  // of the compile on a 1024-token model), row by row, and no further than
  // the first element that rules both patterns out.
  auto check = [&](int64_t i, int64_t j, double x) {
    bool keep = j <= i;
    if (additive) {
      allZero &= x == 0.0;
      causal &= keep ? x == 0.0 : x <= kMaskedOut;
    } else {
      allZero = false;
      causal &= keep ? x != 0.0 : x == 0.0;
    }
    return allZero || causal;
  };
  if (attr.isSplat()) {
    float x = attr.getSplatValue<float>();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (!check(i, j, x))
          return MaskKind::Unknown;
  } else {
    const float *data =
        reinterpret_cast<const float *>(attr.getRawData().data());
    int64_t blocks = attr.getNumElements() / (rows * cols);
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t i = 0; i < rows; ++i, data += cols)
        for (int64_t j = 0; j < cols; ++j)
          if (!check(i, j, data[j]))
            return MaskKind::Unknown;
  }
  if (additive && allZero)
    return MaskKind::None;
  return causal ? MaskKind::Causal : MaskKind::Unknown;
}

struct RaiseAttention : public OpRewritePattern<BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(BatchMatmulOp pv,
                                PatternRewriter &rewriter) const override {
    if (pv.getTransposeLhs() || pv.getTransposeRhs())
      return rewriter.notifyMatchFailure(pv, "P V must not be transposed");
    auto softmax = pv.getLhs().getDefiningOp<SoftmaxOp>();
    if (!softmax || !softmax->hasOneUse())
      return rewriter.notifyMatchFailure(pv, "lhs is not a single-use softmax");
    auto sType = softmax.getInput().getType();
    if (softmax.getAxis() != sType.getRank() - 1)
      return rewriter.notifyMatchFailure(pv, "softmax is not over keys");
    int64_t sq = sType.getDimSize(sType.getRank() - 2),
            sk = sType.getShape().back();

    // The mask.
    Value scores = softmax.getInput();
    bool causal = false;
    if (auto sel = scores.getDefiningOp<SelectOp>()) {
      std::optional<double> fill = scalarConstant(sel.getOnFalse());
      if (!sel->hasOneUse() || !fill || *fill > kMaskedOut ||
          classifyMask(sel.getCondition(), sq, sk, false) != MaskKind::Causal)
        return rewriter.notifyMatchFailure(pv, "select is not a causal mask");
      causal = true;
      scores = sel.getOnTrue();
    } else if (auto add = scores.getDefiningOp<AddOp>()) {
      if (!add->hasOneUse())
        return rewriter.notifyMatchFailure(pv, "masked scores reused");
      MaskKind kind = classifyMask(add.getRhs(), sq, sk, true);
      Value other = add.getLhs();
      if (kind == MaskKind::Unknown) {
        kind = classifyMask(add.getLhs(), sq, sk, true);
        other = add.getRhs();
      }
      if (kind == MaskKind::Unknown)
        return rewriter.notifyMatchFailure(pv, "additive mask not constant "
                                               "causal or zero");
      causal = kind == MaskKind::Causal;
      scores = other;
    }

    // The scale.
    double scale = 1.0;
    if (auto div = scores.getDefiningOp<DivOp>()) {
      std::optional<double> c = scalarConstant(div.getRhs());
      if (!div->hasOneUse() || !c || *c == 0.0)
        return rewriter.notifyMatchFailure(pv, "division is not by a scalar");
      scale = 1.0 / *c;
      scores = div.getLhs();
    } else if (auto mul = scores.getDefiningOp<MulOp>()) {
      std::optional<double> c = scalarConstant(mul.getRhs());
      Value other = mul.getLhs();
      if (!c) {
        c = scalarConstant(mul.getLhs());
        other = mul.getRhs();
      }
      if (!mul->hasOneUse() || !c)
        return rewriter.notifyMatchFailure(pv, "product is not by a scalar");
      scale = *c;
      scores = other;
    }

    // Q K^T.
    auto qk = scores.getDefiningOp<BatchMatmulOp>();
    if (!qk || !qk->hasOneUse() || qk.getTransposeLhs())
      return rewriter.notifyMatchFailure(pv, "scores are not Q K^T");
    Value q = qk.getLhs(), k = qk.getRhs();
    SmallVector<int64_t> kPerm; // K = transpose(k, kPerm) when not empty
    if (!qk.getTransposeRhs()) {
      // K^T = transpose(X, perm): K is X permuted by `perm` with its last two
      // entries swapped (often X itself, or the head split of the exporters).
      auto t = k.getDefiningOp<TransposeOp>();
      if (!t || !t->hasOneUse() || t.getPermutation().size() < 2)
        return rewriter.notifyMatchFailure(pv, "K is not transposed");
      SmallVector<int64_t> perm(t.getPermutation());
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      kPerm = perm;
      k = t.getInput();
    }
    Value v = pv.getRhs();
    auto qT = cast<RankedTensorType>(q.getType());
    auto kT = cast<RankedTensorType>(k.getType());
    if (!kPerm.empty()) {
      SmallVector<int64_t> shape;
      for (int64_t p : kPerm)
        shape.push_back(kT.getDimSize(p));
      kT = kT.clone(shape);
    }
    auto vT = cast<RankedTensorType>(v.getType());
    if (qT.getRank() != kT.getRank() || qT.getRank() != vT.getRank() ||
        qT.getShape().drop_back(2) != kT.getShape().drop_back(2) ||
        kT.getShape().drop_back(2) != vT.getShape().drop_back(2))
      return rewriter.notifyMatchFailure(pv, "q, k, v leading dimensions "
                                             "differ (broadcast)");

    bool identity = true;
    for (auto [i, p] : llvm::enumerate(kPerm))
      identity &= static_cast<int64_t>(i) == p;
    if (!identity)
      k = TransposeOp::create(rewriter, pv.getLoc(), k, kPerm);
    rewriter.replaceOpWithNewOp<AttentionOp>(
        pv, pv.getType(), q, k, v, rewriter.getF64FloatAttr(scale),
        causal ? rewriter.getUnitAttr() : nullptr);
    return success();
  }
};

} // namespace

template class mlir::loom::PatternPass<loom::impl::LoomRaiseAttentionPassBase,
                                       RaiseAttention>;
