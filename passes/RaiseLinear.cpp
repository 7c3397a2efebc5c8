//===- RaiseLinear.cpp - Fuse a matmul and its bias add ---------*- C++ -*-===//
//
// ONNX `Gemm` imports as `loom.matmul {transpose_rhs}` + `loom.add`, and
// PyTorch exports `nn.Linear` on inputs of rank > 2 as `MatMul` + `Add`.
// Both become one `loom.linear`, so backends can fuse the bias into the GEMM.
// Exporters that flatten the leading dimensions around a linear layer
// (Hugging Face's `Conv1D`: `view(-1, K)`, `addmm`, `view(..., N)`) get the
// linear on the unflattened input, so the sequence dimension stays a loop
// of its own that the planner can split (sequence parallelism).
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/Passes.h"
#include "passes/PatternPass.h"
#include "passes/RaiseUtils.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMRAISELINEARPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::raise;

namespace {

/// `matmul(x, w) + b` (either order) -> `loom.linear x, w, b`.
struct RaiseLinearPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp root,
                                PatternRewriter &rewriter) const override {
    std::string why = "no operand is a 'loom.matmul'";
    for (unsigned i : {0u, 1u}) {
      auto mm = root->getOperand(i).getDefiningOp<MatmulOp>();
      Value bias = root->getOperand(1 - i);
      if (!mm)
        continue;
      auto lhs = mm.getLhs().getType().getShape();
      auto rhs = mm.getRhs().getType().getShape();
      auto result = mm.getType().getShape();
      auto biasShape = cast<RankedTensorType>(bias.getType()).getShape();
      if (!mm->hasOneUse()) {
        why = "the matmul result has another use";
      } else if (mm.getTransposeLhs()) {
        why = "the matmul transposes its left operand";
      } else if (lhs.empty() || rhs.size() != 2) {
        why = "the matmul's right operand is not 2-D";
      } else if (result.drop_back() != lhs.drop_back()) {
        why = "the matmul does not keep the leading dimensions of its left "
              "operand";
      } else if (root.getType() != mm.getType()) {
        why = "the bias broadcasts the matmul result to another shape";
      } else if (biasShape.empty() || biasShape.back() != result.back() ||
                 biasShape.size() > result.size() ||
                 !llvm::all_of(biasShape.drop_back(),
                               [](int64_t d) { return d == 1; })) {
        why = "the bias is not [N] or [1, ..., 1, N]";
      } else {
        Location loc = root.getLoc();
        if (biasShape.size() != 1)
          bias =
              ReshapeOp::create(rewriter, loc, bias,
                                rewriter.getDenseI64ArrayAttr(result.back()));
        rewriter.replaceOpWithNewOp<LinearOp>(root, mm.getLhs(), mm.getRhs(),
                                              bias, mm.getTransposeRhs());
        rewriter.eraseOp(mm);
        return success();
      }
    }
    return rewriter.notifyMatchFailure(root, why);
  }
};

/// `reshape(linear(reshape(x: [D..., K] -> [prod(D), K])) -> [D..., N])`
/// -> `loom.linear x` of type `[D..., N]`.
struct UnflattenLinearPattern : OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LinearOp linear,
                                PatternRewriter &rewriter) const override {
    auto flatten = linear.getInput().getDefiningOp<ReshapeOp>();
    if (!flatten)
      return rewriter.notifyMatchFailure(linear, "the input is no reshape");
    if (!linear->hasOneUse())
      return rewriter.notifyMatchFailure(linear, "the result has several uses");
    auto unflatten = dyn_cast<ReshapeOp>(*linear->user_begin());
    if (!unflatten)
      return rewriter.notifyMatchFailure(linear, "the user is no reshape");
    auto source = cast<RankedTensorType>(flatten.getInput().getType());
    auto flat = linear.getInput().getType().getShape();
    auto result = unflatten.getType().getShape();
    auto leading = source.getShape().drop_back();
    if (!source.hasStaticShape() || flat.size() != 2 || leading.empty() ||
        source.getShape().back() != flat.back() ||
        result.drop_back() != leading ||
        result.back() != linear.getType().getShape().back())
      return rewriter.notifyMatchFailure(
          linear, "the reshapes do not flatten and restore the leading "
                  "dimensions");
    rewriter.replaceOpWithNewOp<LinearOp>(
        unflatten, flatten.getInput(), linear.getWeight(), linear.getBias(),
        linear.getTransposeWeight());
    rewriter.eraseOp(linear);
    return success();
  }
};

} // namespace

template class mlir::loom::PatternPass<loom::impl::LoomRaiseLinearPassBase,
                                       RaiseLinearPattern,
                                       UnflattenLinearPattern>;
