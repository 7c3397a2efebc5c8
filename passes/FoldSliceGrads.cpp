//===- FoldSliceGrads.cpp - Sums of slice gradients as one concat -*- C++
//-*-===//
//
// A value split into pieces along one axis (the fused q/k/v projection of a
// transformer, read by three `loom.slice`s) gets its gradient from autodiff
// as a sum of `loom.slice_grad`s, each a zero tensor of the whole shape with
// one window filled: three full-size writes and two full-size additions for
// what is one copy per element. When the windows of the summed slice
// gradients tile one axis exactly (unit steps, disjoint, covering [0, dim)),
// the sum is the concatenation of their inputs in window order.
//
// Each addition is tried as the root of the tree of single-use `loom.add`s
// below it; every leaf must be a `loom.slice_grad` of the root's type. (A
// tiling cannot be part of a larger one: more windows would overlap.)
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"
#include "passes/PatternPass.h"

#include <algorithm>

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMFOLDSLICEGRADSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// The leaves of the tree of `loom.add`s rooted at `v` whose inner additions
/// have one use each (the tree is dead once the root is replaced); false
/// once there are more than `limit` (a tiling has at most one piece per
/// element of its axis, so a longer chain of additions is no tiling and
/// is not walked to its end). `inner` counts the additions walked: a tree
/// of at most `limit` leaves has fewer than `limit` of them, so a deep
/// chain stops after `limit` steps, not at its bottom.
bool collectLeaves(Value v, bool root, size_t limit,
                   SmallVectorImpl<Value> &leaves, size_t &inner) {
  auto add = v.getDefiningOp<AddOp>();
  if (add && (root || add->hasOneUse()) &&
      add.getLhs().getType() == add.getType() &&
      add.getRhs().getType() == add.getType()) {
    if (++inner >= limit)
      return false;
    return collectLeaves(add.getLhs(), false, limit, leaves, inner) &&
           collectLeaves(add.getRhs(), false, limit, leaves, inner);
  }
  leaves.push_back(v);
  return leaves.size() <= limit;
}

struct FoldSliceGradSum : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp root,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> leaves;
    ArrayRef<int64_t> dims = root.getType().getShape();
    size_t limit = dims.empty() ? 1 : *llvm::max_element(dims);
    size_t inner = 0;
    if (!collectLeaves(root, true, limit, leaves, inner) || leaves.size() < 2)
      return rewriter.notifyMatchFailure(root, "not a sum of slice grads");
    struct Piece {
      int64_t start, end;
      Value grad;
    };
    SmallVector<Piece> pieces;
    std::optional<int64_t> axis;
    ArrayRef<int64_t> shape = root.getType().getShape();
    for (Value leaf : leaves) {
      auto sg = leaf.getDefiningOp<SliceGradOp>();
      // The verifier checked the attributes and that each piece has its
      // window's shape.
      if (!sg || sg.getType() != root.getType() || sg.getAxes().size() != 1 ||
          sg.getSteps()[0] != 1 || (axis && *axis != sg.getAxes()[0]))
        return rewriter.notifyMatchFailure(
            root, "a summand is not a unit-step slice_grad along one axis");
      axis = sg.getAxes()[0];
      int64_t start = std::clamp<int64_t>(sg.getStarts()[0], 0, shape[*axis]);
      int64_t extent = sg.getGrad().getType().getShape()[*axis];
      pieces.push_back({start, start + extent, sg.getGrad()});
    }
    llvm::sort(pieces, [](const Piece &a, const Piece &b) {
      return a.start < b.start;
    });
    int64_t next = 0;
    for (const Piece &p : pieces) {
      if (p.start != next)
        return rewriter.notifyMatchFailure(
            root, "the windows overlap or leave a gap");
      next = p.end;
    }
    if (next != root.getType().getShape()[*axis])
      return rewriter.notifyMatchFailure(root, "the windows end short");
    SmallVector<Value> inputs;
    for (const Piece &p : pieces)
      inputs.push_back(p.grad);
    rewriter.replaceOpWithNewOp<ConcatOp>(root, inputs,
                                          static_cast<uint64_t>(*axis));
    return success();
  }
};

} // namespace

template class mlir::loom::PatternPass<loom::impl::LoomFoldSliceGradsPassBase,
                                       FoldSliceGradSum>;
