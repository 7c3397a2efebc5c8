//===- ChooseRecompute.cpp - Which layers the backward recomputes ---------===//
//
// Per program function: the layers (RecomputePlan.h) and, for each of them,
// the ops `selective` and `full` would run again and what that costs; then
// the mode asked, or under `auto` the cheapest mix of full and selective
// layers whose simulated peak fits the budget. Under every mode, with
// sequence parallelism, the backward gathers over `tp` again what the
// forward gathered (`ProgramLayers::regathered`, RecomputePlan.h). Writes the marks
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

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMCHOOSERECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// One layer instance's three ways to recompute, placed (`none` only
/// gathers over `tp` again).
struct Options {
  RecomputeGroup none, selective, full;
  double selectiveSeconds = 0, fullSeconds = 0;
};

/// A mix: `full` on the first layers, `selective` on the next ones, and
/// (`regather`) the gathers over `tp` made again on the others.
struct Mix {
  int64_t full = 0, selective = 0;
  bool regather = true;
  int64_t peak = 0;
  double seconds = 0;
};

class Chooser {
public:
  Chooser(func::FuncOp func, const Cluster &cluster)
      : func(func), layers(findLayers(func)) {
    double unused = 0;
    for (const LayerInstance &instance : layers.instances) {
      Options o;
      for (auto [mode, group, seconds] :
           {std::tuple{RematMode::None, &o.none, &unused},
            {RematMode::Selective, &o.selective, &o.selectiveSeconds},
            {RematMode::Full, &o.full, &o.fullSeconds}}) {
        group->ops = recomputedOps(instance, mode, layers);
        group->insertBefore = placeGroup(group->ops, layers.backward);
        // A gather made again is communication, in the step's figures.
        for (Operation *op : group->ops)
          if (!isa<shard::AllGatherOp>(op))
            *seconds += planner::rooflineSeconds(
                opRecordOf(op, cluster.hostKernels()), cluster);
      }
      options.push_back(std::move(o));
    }
    for (Operation *gather : layers.looseGathers) {
      RecomputeGroup g;
      g.ops.push_back(gather);
      g.insertBefore = placeGroup(g.ops, layers.backward);
      if (g.insertBefore)
        loose.push_back(std::move(g));
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
                                : mix.regather ? o.none
                                               : RecomputeGroup{};
      if (g.insertBefore)
        groups.push_back(g);
    }
    if (mix.regather)
      llvm::append_range(groups, loose);
    return groups;
  }

  Mix evaluate(int64_t full, int64_t selective, bool regather = true) const {
    Mix mix{full, selective, regather, 0, 0};
    for (auto [instance, o] : llvm::zip(layers.instances, options)) {
      if (instance.layer < full)
        mix.seconds += o.fullSeconds;
      else if (instance.layer < full + selective)
        mix.seconds += o.selectiveSeconds;
    }
    mix.peak = simulatePeakBytes(func, groupsOf(mix));
    return mix;
  }

  /// Nothing recomputed and no gather made again when that fits `budget`
  /// (a gather made again costs its communication), else the gathers made
  /// again.
  Mix nothing(double budget) const {
    Mix plain = evaluate(0, 0, /*regather=*/false);
    if (plain.peak <= budget)
      return plain;
    Mix none = evaluate(0, 0);
    return none.peak < plain.peak ? none : plain;
  }

  /// The cheapest mix whose peak fits `budget`, else the one of least peak.
  Mix choose(double budget) const {
    Mix none = nothing(budget);
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
    int64_t regathered = 0;
    for (const RecomputeGroup &g : groupsOf(mix)) {
      for (Operation *op : g.ops) {
        op->setAttr(LoomDialect::RecomputeAttrHelper::getNameStr(),
                    b.getI64IntegerAttr(nextGroup));
        regathered += isa<shard::AllGatherOp>(op);
      }
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
            b.getNamedAttr("regathered", b.getI64IntegerAttr(regathered)),
            b.getNamedAttr("peak_bytes", b.getI64IntegerAttr(mix.peak)),
            b.getNamedAttr("recompute_seconds", b.getF64FloatAttr(mix.seconds)),
        }));
  }

private:
  func::FuncOp func;
  ProgramLayers layers;
  SmallVector<Options> options;
  /// The head's gathers made again, under every mix.
  SmallVector<RecomputeGroup> loose;
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
      Mix mix = !*parsed                           ? chooser.choose(budget)
                : **parsed == RematMode::Full      ? chooser.evaluate(n, 0)
                : **parsed == RematMode::Selective ? chooser.evaluate(0, n)
                                                   : chooser.nothing(budget);
      if (*parsed != RematMode::None || !chooser.groupsOf(mix).empty())
        chooser.annotate(mix, mode, nextGroup);
    }
  }
};

} // namespace
