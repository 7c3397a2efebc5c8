//===- ModelCostAnalysis.cpp - The planner's request from the IR ----------===//
//
// One walk over the forward pass assigns each op its part (ForwardLayers.h)
// and follows what tensor parallelism would split, Megatron-LM's way: a
// product whose weight is a parameter splits its columns when its input is
// whole and its inner dimension when its input is split (then its partial
// results are summed); element-wise ops, attention and views keep a split;
// a norm or a reduction reading a split value gathers it first. The
// backward ops (after the loss, carrying their forward op's location) give
// each part its backward bytes and what its backward keeps.
//
//===----------------------------------------------------------------------===//

#include "passes/ModelCostAnalysis.h"
#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/ForwardLayers.h"
#include "passes/OpCost.h"
#include "passes/planner/PlanChoice.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Hashing.h"

#include <map>
#include <numeric>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::planner;

namespace {

/// How tensor parallelism leaves a forward value.
enum class Tp { Whole, Split };

double numElementsOf(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() ? double(type.getNumElements()) : 0;
}

/// The parameter `v` is, through conversions and views (bf16 copies,
/// transposed weights), or null.
BlockArgument parameterOf(func::FuncOp func, Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<ConvertOp, TransposeOp, ReshapeOp>(def))
      return {};
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || !func.getArgAttr(arg.getArgNumber(), attr::kParam) ||
      func.getArgAttr(arg.getArgNumber(), attr::kState))
    return {};
  return arg;
}

/// Ops that gather or reduce over the last dimension and so need it whole.
bool needsWhole(Operation *op) {
  return isa<LayerNormOp, RmsNormOp, BatchNormOp, ReduceSumOp, ReduceMeanOp,
             ReduceMaxOp, MseOp>(op);
}

struct Analysis {
  func::FuncOp func;
  ForwardLayers fwd;
  double batch = 1;
  /// Per part: -1 the embedding, numLayers the head.
  std::map<int64_t, PartCost> parts;
  DenseMap<Value, Tp> tp;
  DenseMap<Value, int64_t> partOfValue;
  /// Values whose gradient is summed over tp in the backward (the whole
  /// inputs of column-split products), once each.
  DenseSet<Value> columnInputs;
  DenseSet<Value> data; // values that depend on the step's inputs
  DenseSet<Value> splitParams;
  /// The heads and kv heads of each attention: tp must divide them.
  std::vector<int64_t> divides;
  bool anySplit = false;
  double forwardFlops = 0;

  PartCost &part(int64_t layer) { return parts[layer]; }
  double perSample(double x) const { return x / batch; }

  bool isData(Value v) const { return data.contains(v); }
  Tp stateOf(Value v) const {
    auto it = tp.find(v);
    return it == tp.end() ? Tp::Whole : it->second;
  }

  void addCollective(PartCost &p, CollectiveKind kind, double bytes,
                     TpPhase phase) {
    p.tpCollectives.push_back({kind, perSample(bytes), phase, 1});
  }

  /// A product whose one operand is the parameter `weight`.
  void product(Operation *op, Value input, BlockArgument weight,
               PartCost &p) {
    Value result = op->getResult(0);
    double flops = contractionFlops(op);
    double elements = numElementsOf(result);
    auto type = cast<RankedTensorType>(result.getType());
    double columns = isa<Conv2dOp>(op) ? double(type.getDimSize(1))
                                       : double(type.getShape().back());
    ProductCost c{perSample(elements / columns), columns,
                  elements > 0 ? flops / (2 * elements) : 0, TpSplit::None};
    double weightElements = numElementsOf(weight);
    p.largestWeight = std::max(p.largestWeight, weightElements);
    if (isa<Conv2dOp>(op)) {
      p.products.push_back(c);
      return;
    }
    if (stateOf(input) == Tp::Split) {
      // Row-parallel: partial sums, added up at once.
      c.split = TpSplit::Inner;
      addCollective(p, CollectiveKind::AllReduce, bytesOf(result),
                    TpPhase::Forward);
    } else {
      c.split = TpSplit::Columns;
      tp[result] = Tp::Split;
      // The input's gradient is a partial sum over tp ranks.
      if (isData(input) && columnInputs.insert(input).second)
        addCollective(p, CollectiveKind::AllReduce, bytesOf(input),
                      TpPhase::Backward);
    }
    anySplit = true;
    splitParams.insert(weight);
    p.products.push_back(c);
  }

  void forwardOp(Operation *op, int64_t layer) {
    PartCost &p = part(layer);
    bool fromData = llvm::any_of(op->getOperands(),
                                 [&](Value v) { return isData(v); });
    for (Value r : op->getResults()) {
      partOfValue[r] = layer;
      if (fromData)
        data.insert(r);
    }
    bool anySplitOperand = llvm::any_of(
        op->getOperands(), [&](Value v) { return stateOf(v) == Tp::Split; });
    if (isa<ConstantOp, ReshapeOp>(op) || op->getNumResults() == 0) {
      if (anySplitOperand) // a view keeps the split
        for (Value r : op->getResults())
          tp[r] = Tp::Split;
      return;
    }
    if (!fromData) {
      // Made from parameters and constants alone (a weight's bf16 copy):
      // once a micro-batch whatever its samples.
      p.fixedBytes += opRecordOf(op).bytes;
      return;
    }
    double flops = contractionFlops(op);
    forwardFlops += flops * (isa<AttentionOp>(op) &&
                                     cast<AttentionOp>(op).getCausal()
                                 ? 2
                                 : 1);
    if (flops > 0) {
      BlockArgument weight;
      Value input;
      for (Value v : op->getOperands()) {
        if (BlockArgument w = parameterOf(func, v); w && !weight)
          weight = w;
        else if (!input)
          input = v;
      }
      if (weight && input) {
        product(op, input, weight, p);
        return;
      }
      // Attention, or a product of two activations (unfused attention's):
      // split over the heads when its operands are.
      p.attentionFlops += perSample(flops);
      if (auto att = dyn_cast<AttentionOp>(op)) {
        auto q = cast<RankedTensorType>(att.getQuery().getType());
        auto k = cast<RankedTensorType>(att.getKey().getType());
        if (q.getRank() >= 3) {
          divides.push_back(q.getDimSize(q.getRank() - 3));
          divides.push_back(k.getDimSize(k.getRank() - 3));
        }
      }
      if (anySplitOperand)
        for (Value r : op->getResults())
          tp[r] = Tp::Split;
      return;
    }
    double bytes = opRecordOf(op).bytes;
    if (layer < 0)
      p.wholeBytes += perSample(bytes);
    else
      p.forwardBytes += perSample(bytes);
    if (auto gather = dyn_cast<GatherOp>(op)) {
      // A table lookup: the table split over tp (vocabulary-parallel), its
      // rows summed over the ranks forward and backward.
      if (parameterOf(func, gather.getData())) {
        addCollective(p, CollectiveKind::AllReduce, bytesOf(gather.getResult()),
                      TpPhase::Forward);
        addCollective(p, CollectiveKind::AllReduce, bytesOf(gather.getResult()),
                      TpPhase::Backward);
      }
      return;
    }
    if (!anySplitOperand)
      return;
    if (isa<CrossEntropyOp>(op)) {
      // Over a split vocabulary: each row's maximum and sum, summed.
      double rows = numElementsOf(op->getOperand(0)) /
                    double(cast<RankedTensorType>(op->getOperand(0).getType())
                               .getShape()
                               .back());
      addCollective(p, CollectiveKind::AllReduce, 4 * rows, TpPhase::Forward);
      addCollective(p, CollectiveKind::AllReduce, 4 * rows, TpPhase::Forward);
      return;
    }
    if (needsWhole(op)) {
      for (Value v : op->getOperands())
        if (stateOf(v) == Tp::Split) {
          addCollective(p, CollectiveKind::AllGather, bytesOf(v),
                        TpPhase::Forward);
          addCollective(p, CollectiveKind::ReduceScatter, bytesOf(v),
                        TpPhase::Backward);
        }
      return;
    }
    for (Value r : op->getResults())
      tp[r] = Tp::Split;
  }
};

/// The structure of a layer's forward ops, for telling identical layers.
llvm::hash_code layerShape(ArrayRef<Operation *> ops) {
  llvm::hash_code h = llvm::hash_value(ops.size());
  for (Operation *op : ops) {
    h = llvm::hash_combine(h, op->getName().getStringRef());
    for (Type t : op->getResultTypes())
      h = llvm::hash_combine(h, t.getAsOpaquePointer());
  }
  return h;
}

} // namespace

FailureOr<ModelCost> mlir::loom::analyzeModelCost(ModuleOp module,
                                                  llvm::StringRef name) {
  func::FuncOp func = lookupEntryFunction(module);
  if (!func)
    return module.emitError("no entry function to plan"), failure();
  FailureOr<ForwardLayers> fwd = forwardLayersOf(func);
  if (failed(fwd))
    return failure();
  Analysis a;
  a.func = func;
  a.fwd = std::move(*fwd);
  int64_t numLayers = a.fwd.numLayers();
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), attr::kInput) ||
        func.getArgAttr(arg.getArgNumber(), attr::kTarget)) {
      a.data.insert(arg);
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (func.getArgAttr(arg.getArgNumber(), attr::kInput) && type &&
          type.getRank() > 0 && a.batch == 1)
        a.batch = double(type.getDimSize(0));
    }
  if (!(a.batch > 0))
    return func.emitError("the step's inputs have no batch to plan over"),
           failure();
  for (int64_t l = -1; l <= numLayers; ++l)
    a.part(l).name = l < 0            ? "embedding"
                     : l == numLayers ? "head"
                                      : a.fwd.keys[l];

  // Parameters: in the part of their first use; split when tp splits the
  // op that reads them (a split product's weight and bias, a lookup table).
  DenseMap<Value, int64_t> paramPart;
  DenseSet<Value> tied;
  for (auto [op, layer] : llvm::zip(a.fwd.ops, a.fwd.layerOf)) {
    a.forwardOp(op, layer);
    for (Value v : op->getOperands())
      if (BlockArgument p = parameterOf(func, v)) {
        auto [it, added] = paramPart.try_emplace(p, layer);
        if (!added && it->second != layer)
          tied.insert(p);
      }
  }
  // Besides the split products' weights: the parameters of an op whose
  // result is split (a column-split product's bias), and lookup tables.
  DenseSet<Value> &splitParams = a.splitParams;
  for (Operation *op : a.fwd.ops) {
    bool splits = llvm::any_of(op->getResults(), [&](Value r) {
                    return a.stateOf(r) == Tp::Split;
                  }) ||
                  isa<GatherOp>(op);
    if (splits && a.anySplit)
      for (Value v : op->getOperands())
        if (BlockArgument p = parameterOf(func, v))
          splitParams.insert(p);
  }
  ModelCost out;
  for (auto [param, layer] : paramPart) {
    double n = numElementsOf(param);
    PartCost &p = a.part(layer);
    (splitParams.contains(param) ? p.splitParameters : p.wholeParameters) += n;
    out.parameters += int64_t(n);
    if (tied.contains(param) && layer < 0)
      out.tiedParameters += n;
  }

  // The backward: its memory-bound bytes, and the forward values it reads
  // (what a part keeps for it). A backward op has its forward op's
  // location.
  DenseMap<Location, int64_t> layerAt;
  for (auto [op, layer] : llvm::zip(a.fwd.ops, a.fwd.layerOf))
    layerAt.try_emplace(op->getLoc(), layer);
  DenseSet<Operation *> isForward(a.fwd.ops.begin(), a.fwd.ops.end());
  DenseSet<Value> keptValues;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (isForward.contains(&op) || isa<AdamwOp, SgdOp>(op))
      continue;
    for (Value v : op.getOperands())
      if (a.isData(v) && a.partOfValue.count(v))
        keptValues.insert(v);
    auto it = layerAt.find(op.getLoc());
    if (it == layerAt.end() || isa<ConstantOp, ReshapeOp>(op) ||
        contractionFlops(&op) > 0)
      continue;
    PartCost &p = a.part(it->second);
    double bytes = a.perSample(opRecordOf(&op).bytes);
    if (it->second < 0)
      p.wholeBytes += bytes;
    else
      p.backwardBytes += bytes;
  }

  // What each part keeps. `selective` recomputes a kept result of an op
  // without a contraction whose operands are kept anyway (or are
  // parameters); `full` keeps the part's inputs.
  for (auto [op, layer] : llvm::zip(a.fwd.ops, a.fwd.layerOf)) {
    PartCost &p = a.part(layer);
    for (Value r : op->getResults()) {
      if (!keptValues.contains(r))
        continue;
      double bytes = a.perSample(bytesOf(r));
      bool whole = a.stateOf(r) == Tp::Whole;
      KeptBytes &none = p.kept[size_t(Remat::None)];
      none.bytes += bytes;
      none.whole += whole ? bytes : 0;
      bool remade = contractionFlops(op) == 0 && !isa<GatherOp>(op) &&
                    llvm::all_of(op->getOperands(), [&](Value v) {
                      return !a.isData(v) || keptValues.contains(v);
                    });
      if (remade) {
        p.selectiveBytes += a.perSample(opRecordOf(op).bytes);
        continue;
      }
      KeptBytes &sel = p.kept[size_t(Remat::Selective)];
      sel.bytes += bytes;
      sel.whole += whole ? bytes : 0;
    }
    // The part's inputs: data made by another part (the step's inputs
    // count as the embedding's).
    for (Value v : op->getOperands()) {
      auto it = a.partOfValue.find(v);
      int64_t from = it != a.partOfValue.end() ? it->second : -1;
      if (!a.isData(v) || from == layer ||
          (isa<BlockArgument>(v) &&
           !func.getArgAttr(cast<BlockArgument>(v).getArgNumber(),
                            attr::kInput)))
        continue;
      PartCost &maker = a.part(from);
      maker.boundaryBytes =
          std::max(maker.boundaryBytes, a.perSample(bytesOf(v)));
    }
  }
  for (auto &[layer, p] : a.parts) {
    for (KeptBytes &k : p.kept)
      k.sequenceParallel = k.bytes;
    // `full` keeps the layer's input: its boundary with the part before.
    double input = layer >= 0 ? a.part(layer - 1).boundaryBytes : 0;
    KeptBytes &full = p.kept[size_t(Remat::Full)];
    full = {input, input, input};
    bool rowSplit = llvm::any_of(p.products, [](const ProductCost &c) {
      return c.split == TpSplit::Inner;
    });
    // Under sequence parallelism also the attention's reduce-scattered
    // output, kept split.
    if (rowSplit)
      full.sequenceParallel = 2 * input;
  }
  // The head's values are held while its micro-batch runs. A model
  // without numbered layers is one layer: its ops are all in the head.
  PartCost &head = a.part(numLayers);
  if (numLayers == 0) {
    a.fwd.keys.push_back("model");
    head.name = "model";
    ++numLayers;
    a.part(numLayers).name = "head";
  } else {
    head.transientBytes = head.kept[size_t(Remat::None)].bytes;
    head.kept = {};
  }
  // The embedding's output is kept whole (split under sequence
  // parallelism) by each micro-batch in flight.
  PartCost &embedding = a.part(-1);
  for (KeptBytes &k : embedding.kept)
    k = {embedding.boundaryBytes, embedding.boundaryBytes,
         embedding.boundaryBytes};

  // Identical layers: the same ops over the same types.
  std::vector<SmallVector<Operation *>> opsOf(numLayers);
  for (auto [op, layer] : llvm::zip(a.fwd.ops, a.fwd.layerOf))
    if (layer >= 0 && layer < numLayers)
      opsOf[layer].push_back(op);
  std::map<llvm::hash_code, int64_t> kinds;
  for (int64_t l = 0; l < numLayers; ++l)
    a.part(l).kind =
        kinds.try_emplace(layerShape(opsOf[l]), int64_t(kinds.size()))
            .first->second;

  out.name = name.str();
  out.family = "onnx";
  out.first = std::move(a.part(-1));
  out.last = std::move(a.part(numLayers));
  for (int64_t l = 0; l < numLayers; ++l)
    out.layers.push_back(std::move(a.part(l)));
  out.modelFlopsPerSample = 3 * a.forwardFlops / a.batch;
  out.oneMicroBatch =
      module->walk([](BatchNormOp) { return WalkResult::interrupt(); })
          .wasInterrupted();
  // tp divides the heads and every split dimension of the layers' products
  // (the first and last parts' may run whole: GPT-2's head over 50257
  // words); a tp that splits nothing is no plan.
  int64_t widths = 0;
  for (const PartCost &layer : out.layers)
    for (const ProductCost &p : layer.products)
      if (p.split != TpSplit::None)
        widths = std::gcd(widths, int64_t(p.split == TpSplit::Columns
                                              ? p.columns
                                              : p.inner));
  if (a.anySplit && widths > 1) {
    out.tpDivides = a.divides;
    out.tpDivides.push_back(widths);
    out.maxTp = *std::min_element(out.tpDivides.begin(), out.tpDivides.end());
  }
  return out;
}
