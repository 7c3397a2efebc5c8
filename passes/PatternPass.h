//===- PatternPass.h - A pass that applies a fixed set of patterns -*- C++
//-*-===//
//
// Most loom rewrite passes are "apply these patterns greedily to each
// function": the set is built and frozen once (`initialize`) and applied
// on every run. `PatternPass<impl::LoomXPassBase, P...>` is that pass, so a
// pass file holds its patterns and one explicit instantiation:
//
//   template class mlir::loom::PatternPass<loom::impl::LoomXPassBase, P>;
//
// (the instantiation defines the generated `createLoomXPass`).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PATTERNPASS_H
#define LOOM_PASSES_PATTERNPASS_H

#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::loom {

template <template <typename> class PassBase, typename... Patterns>
class PatternPass : public PassBase<PatternPass<PassBase, Patterns...>> {
  using Base = PassBase<PatternPass>;

public:
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    RewritePatternSet set(ctx);
    set.add<Patterns...>(ctx);
    patterns = std::move(set);
    return success();
  }

  void runOnOperation() override {
    if (failed(applyPatternsGreedily(this->getOperation(), patterns)))
      this->signalPassFailure();
  }

private:
  FrozenRewritePatternSet patterns;
};

} // namespace mlir::loom

#endif // LOOM_PASSES_PATTERNPASS_H
