//===- GradientRulesShape.cpp - Backward of layout and indexing ops ------===//

#include "passes/GradientBuilder.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::loom;

LogicalResult GradientBuilder::backwardShape(Operation *op, Value dy) {
  Location loc = op->getLoc();
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<TransposeOp>([&](TransposeOp t) {
        ArrayRef<int64_t> perm = t.getPermutation();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = i;
        accumulate(t.getInput(), TransposeOp::create(b, loc, dy, inverse), loc);
        return success();
      })
      .Case<ExpandOp, BroadcastLikeOp>([&](auto e) {
        accumulate(e.getInput(), dy, loc); // sums the broadcast back
        return success();
      })
      .Case<SliceOp>([&](SliceOp s) {
        accumulate(s.getInput(),
                   SliceGradOp::create(b, loc, dy, s.getInput(), s.getAxes(),
                                       s.getStarts(), s.getEnds(),
                                       s.getSteps()),
                   loc);
        return success();
      })
      .Case<ConcatOp>([&](ConcatOp c) {
        int64_t axis = c.getAxis(), offset = 0;
        for (Value in : c.getInputs()) {
          int64_t size = cast<RankedTensorType>(in.getType()).getDimSize(axis);
          if (wanted(in))
            accumulate(in,
                       SliceOp::create(b, loc, dy, ArrayRef<int64_t>{axis},
                                       ArrayRef<int64_t>{offset},
                                       ArrayRef<int64_t>{offset + size},
                                       ArrayRef<int64_t>{1}),
                       loc);
          offset += size;
        }
        return success();
      })
      .Case<GatherOp>([&](GatherOp g) {
        accumulate(g.getData(),
                   GatherGradOp::create(b, loc, dy, g.getIndices(), g.getData(),
                                        g.getAxis()),
                   loc);
        return success();
      })
      .Case<ScatterNdOp>([&](ScatterNdOp s) -> LogicalResult {
        // none: the data's gradient without the written slices, the
        // updates' the slices they wrote; add: all of it to the data.
        StringRef reduction = s.getReduction();
        if (reduction == "mul")
          return s.emitError("loom-autodiff: no gradient rule for "
                             "'loom.scatter_nd' with reduction 'mul'");
        if (wanted(s.getData())) {
          Value dData = dy;
          if (reduction == "none") {
            auto type = cast<RankedTensorType>(s.getUpdates().getType());
            Value zeros = ConstantOp::create(
                b, loc,
                DenseElementsAttr::get(type,
                                       b.getZeroAttr(type.getElementType())));
            dData = ScatterNdOp::create(b, loc, dy, s.getIndices(), zeros,
                                        b.getStringAttr("none"));
          }
          accumulate(s.getData(), dData, loc);
        }
        if (wanted(s.getUpdates()))
          accumulate(s.getUpdates(),
                     GatherNdOp::create(b, loc, dy, s.getIndices()), loc);
        return success();
      })
      .Case<GatherNdOp>([&](GatherNdOp g) {
        auto type = cast<RankedTensorType>(g.getData().getType());
        Value zeros = ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
        accumulate(g.getData(),
                   ScatterNdOp::create(b, loc, zeros, g.getIndices(), dy,
                                       b.getStringAttr("add")),
                   loc);
        return success();
      })
      .Case<GatherElementsOp>([&](GatherElementsOp g) {
        accumulate(g.getData(),
                   GatherElementsGradOp::create(b, loc, dy, g.getIndices(),
                                                g.getData(), g.getAxis()),
                   loc);
        return success();
      })
      .Case<ConvertOp>([&](ConvertOp c) {
        // Integer inputs (token ids, masks) have no gradient; a float input
        // gets the gradient back in its own precision (`accumulate`
        // converts: bf16 activations' gradients reach f32 parameters).
        if (isa<FloatType>(c.getInput().getType().getElementType()))
          accumulate(c.getInput(), dy, loc);
        return success();
      })
      .Default([](Operation *) { return failure(); });
}
