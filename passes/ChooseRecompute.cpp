//===- ChooseRecompute.cpp - Which layers the backward recomputes ---------===//
//
// Per program function: the layers (RecomputePlan.h) and, for each of them,
// the ops `selective` and `full` would run again and what that costs; then
// the mode asked, or under `auto` the cheapest mix of full and selective
// layers whose simulated peak fits the budget. Writes the marks
// loom-recompute materialises.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/OpCost.h"
#include "passes/Passes.h"
#include "passes/RecomputePlan.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/CostModel.h"

#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMCHOOSERECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// One layer instance's two ways to recompute, placed.
struct Options {
  RecomputeGroup selective, full;
  double selectiveSeconds = 0, fullSeconds = 0;
};

/// A mix: `full` on the first layers, `selective` on the next ones.
struct Mix {
  int64_t full = 0, selective = 0;
  int64_t peak = 0;
  double seconds = 0;
};

class Chooser {
public:
  Chooser(func::FuncOp func, const Cluster &cluster)
      : func(func), layers(findLayers(func)) {
    for (const LayerInstance &instance : layers.instances) {
      Options o;
      for (auto [mode, group, seconds] :
           {std::tuple{RematMode::Selective, &o.selective, &o.selectiveSeconds},
            {RematMode::Full, &o.full, &o.fullSeconds}}) {
        group->ops = recomputedOps(instance, mode, layers);
        group->insertBefore = placeGroup(group->ops, layers.backward);
        for (Operation *op : group->ops)
          *seconds += planner::rooflineSeconds(opRecordOf(op), cluster);
      }
      options.push_back(std::move(o));
    }
  }

  int64_t numLayers() const { return layers.keys.size(); }

  /// The groups of `mix`, in program order of their layer instances.
  SmallVector<RecomputeGroup> groupsOf(const Mix &mix) const {
    SmallVector<RecomputeGroup> groups;
    for (auto [instance, o] : llvm::zip(layers.instances, options)) {
      const RecomputeGroup &g = instance.layer < mix.full ? o.full
                                : instance.layer < mix.full + mix.selective
                                    ? o.selective
                                    : RecomputeGroup{};
      if (g.insertBefore)
        groups.push_back(g);
    }
    return groups;
  }

  Mix evaluate(int64_t full, int64_t selective) const {
    Mix mix{full, selective, 0, 0};
    for (auto [instance, o] : llvm::zip(layers.instances, options)) {
      if (instance.layer < full)
        mix.seconds += o.fullSeconds;
      else if (instance.layer < full + selective)
        mix.seconds += o.selectiveSeconds;
    }
    mix.peak = simulatePeakBytes(func, groupsOf(mix));
    return mix;
  }

  /// The cheapest mix whose peak fits `budget`, else the one of least peak.
  Mix choose(double budget) const {
    Mix none = evaluate(0, 0);
    if (none.peak <= budget)
      return none;
    int64_t n = numLayers();
    std::optional<Mix> best;
    Mix smallest = none;
    auto consider = [&](const Mix &m) {
      if (m.peak < smallest.peak)
        smallest = m;
      if (m.peak <= budget &&
          (!best || m.seconds < best->seconds ||
           (m.seconds == best->seconds && m.peak < best->peak)))
        best = m;
    };
    for (int64_t full = 0; full <= n; ++full) {
      // More selective layers never hold more: the fewest that fit.
      int64_t lo = 0, hi = n - full;
      Mix most = evaluate(full, hi);
      consider(most);
      if (most.peak > budget)
        continue;
      while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        Mix m = evaluate(full, mid);
        consider(m);
        if (m.peak <= budget)
          hi = mid;
        else
          lo = mid + 1;
      }
    }
    return best ? *best : smallest;
  }

  /// Marks the ops of `mix`'s groups and records the choice.
  void annotate(const Mix &mix, StringRef mode, int64_t &nextGroup) {
    Builder b(func.getContext());
    for (const RecomputeGroup &g : groupsOf(mix)) {
      for (Operation *op : g.ops)
        op->setAttr(LoomDialect::RecomputeAttrHelper::getNameStr(),
                    b.getI64IntegerAttr(nextGroup));
      ++nextGroup;
    }
    func->setAttr(
        LoomDialect::RematAttrHelper::getNameStr(),
        b.getDictionaryAttr({
            b.getNamedAttr("mode", b.getStringAttr(mode)),
            b.getNamedAttr("layers", b.getI64IntegerAttr(numLayers())),
            b.getNamedAttr("full_layers", b.getI64IntegerAttr(mix.full)),
            b.getNamedAttr("selective_layers",
                           b.getI64IntegerAttr(mix.selective)),
            b.getNamedAttr("peak_bytes", b.getI64IntegerAttr(mix.peak)),
            b.getNamedAttr("recompute_seconds", b.getF64FloatAttr(mix.seconds)),
        }));
  }

private:
  func::FuncOp func;
  ProgramLayers layers;
  SmallVector<Options> options;
};

struct ChooseRecomputePass
    : public loom::impl::LoomChooseRecomputePassBase<ChooseRecomputePass> {
  using LoomChooseRecomputePassBase::LoomChooseRecomputePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<std::optional<RematMode>> parsed = parseRematMode(mode);
    if (!parsed) {
      module.emitError("loom-choose-recompute: unknown mode '")
          << mode << "'; expected none, selective, full or auto";
      return signalPassFailure();
    }
    if (*parsed == RematMode::None)
      return;
    std::string spec = cluster;
    llvm::Expected<Cluster> device = parseCluster(spec);
    if (!device) {
      module.emitError("loom-choose-recompute: ")
          << llvm::toString(device.takeError());
      return signalPassFailure();
    }
    double budget = memoryBudgetGib > 0
                        ? memoryBudgetGib * 1024.0 * 1024.0 * 1024.0
                        : device->usableMemoryBytes();
    int64_t nextGroup = 0;
    for (func::FuncOp func : programFunctions(module)) {
      if (!func.getBody().hasOneBlock())
        continue;
      Chooser chooser(func, *device);
      int64_t n = chooser.numLayers();
      Mix mix = !*parsed                      ? chooser.choose(budget)
                : **parsed == RematMode::Full ? chooser.evaluate(n, 0)
                                              : chooser.evaluate(0, n);
      chooser.annotate(mix, mode, nextGroup);
    }
  }
};

} // namespace
