//===- GradientRulesNN.cpp - Backward of neural-network layers -----------===//

#include "passes/GradientBuilder.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::loom;

LogicalResult GradientBuilder::backwardNN(Operation *op, Value dy) {
  Location loc = op->getLoc();
  Value y = op->getResult(0);
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<SoftmaxOp>([&](SoftmaxOp s) {
        accumulate(s.getInput(),
                   SoftmaxGradOp::create(b, loc, dy, y, s.getAxis()), loc);
        return success();
      })
      .Case<GeluOp>([&](GeluOp g) {
        accumulate(g.getInput(),
                   GeluGradOp::create(b, loc, dy, g.getInput(),
                                      g.getApproximateAttr()),
                   loc);
        return success();
      })
      .Case<LayerNormOp>([&](LayerNormOp ln) {
        auto grads = LayerNormGradOp::create(b, loc, dy, ln.getInput(),
                                             ln.getScale(), ln.getAxis(),
                                             ln.getEpsilon());
        accumulate(ln.getInput(), grads.getGradInput(), loc);
        accumulate(ln.getScale(), grads.getGradScale(), loc);
        if (ln.getBias())
          accumulate(ln.getBias(), grads.getGradBias(), loc);
        return success();
      })
      .Case<RmsNormOp>([&](RmsNormOp rms) {
        auto grads = RmsNormGradOp::create(b, loc, dy, rms.getInput(),
                                           rms.getScale(), rms.getAxis(),
                                           rms.getEpsilon());
        accumulate(rms.getInput(), grads.getGradInput(), loc);
        accumulate(rms.getScale(), grads.getGradScale(), loc);
        return success();
      })
      .Case<BatchNormOp>([&](BatchNormOp bn) {
        auto grads = BatchNormGradOp::create(b, loc, dy, bn.getInput(),
                                             bn.getScale(), bn.getEpsilon());
        accumulate(bn.getInput(), grads.getGradInput(), loc);
        accumulate(bn.getScale(), grads.getGradScale(), loc);
        accumulate(bn.getBias(), grads.getGradBias(), loc);
        return success();
      })
      .Case<Conv2dOp>([&](Conv2dOp c) {
        if (wanted(c.getInput()))
          accumulate(c.getInput(),
                     Conv2dGradInputOp::create(
                         b, loc, dy, c.getFilter(), c.getInput(),
                         c.getStrides(), c.getPads(), c.getDilations(),
                         c.getGroups()),
                     loc);
        if (wanted(c.getFilter()))
          accumulate(c.getFilter(),
                     Conv2dGradFilterOp::create(
                         b, loc, dy, c.getInput(), c.getFilter(),
                         c.getStrides(), c.getPads(), c.getDilations(),
                         c.getGroups()),
                     loc);
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp a) {
        auto grads = AttentionGradOp::create(
            b, loc, dy, a.getQuery(), a.getKey(), a.getValue(), a.getScaleAttr(),
            a.getCausalAttr());
        accumulate(a.getQuery(), grads.getGradQuery(), loc);
        accumulate(a.getKey(), grads.getGradKey(), loc);
        accumulate(a.getValue(), grads.getGradValue(), loc);
        return success();
      })
      .Case<MaxPool2dOp>([&](MaxPool2dOp p) {
        accumulate(p.getInput(),
                   MaxPool2dGradOp::create(b, loc, dy, p.getInput(),
                                           p.getKernel(), p.getStrides(),
                                           p.getPads()),
                   loc);
        return success();
      })
      .Default([](Operation *) { return failure(); });
}
