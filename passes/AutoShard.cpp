//===- AutoShard.cpp - Each op's tensor-parallel split, by ILP ---*- C++ -*-===//
//
// Reads the data-parallel shardings that propagation left, removes every
// annotation, asks the sharding ILP (passes/planner/ShardingIlp.h) for one
// `tp` strategy per op and per argument, and writes the complete shardings
// back: the `dp` axes as they were, plus `tp` where the ILP put it.
//
// Upstream `shard-partition` reshards an edge only when the two shardings
// differ by one step on one grid axis (split, unsplit, or move the last
// axis of a dimension); the strategies here keep the `dp` part of both ends
// and let `tp` differ, so every edge is one such step, and an edge whose
// `dp` parts differ keeps `tp` where it is.
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/ErrorKind.h"
#include "ir/LoomOps.h"
#include "ir/sharding/LoopNest.h"
#include "ir/NodeName.h"
#include "passes/MeshUtils.h"
#include "passes/OpCost.h"
#include "passes/Passes.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/CostModel.h"
#include "passes/planner/LayerName.h"
#include "passes/planner/MeshTopology.h"
#include "passes/planner/NoFit.h"
#include "passes/planner/ShardingIlp.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMAUTOSHARDPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;
using planner::CollectiveKind;
using planner::kForbidden;
using shard::GridAxis;
using shard::Sharding;

namespace {

/// Mesh axes splitting each dimension of a tensor.
using DimAxes = SmallVector<SmallVector<GridAxis>>;

/// Layouts of a value over `tp`, besides a split dimension (>= 0): whole,
/// or partial sums of a split reduction that the producer's all-reduce has
/// not summed yet in the cost model (it sums them in the IR; an all-reduce
/// whose one user slices the sum becomes a reduce-scatter when lowered).
constexpr int64_t kWhole = -1;
constexpr int64_t kPartial = -2;
/// The strategy of a reshape, transpose or scale that passes partial sums
/// through, or of an addition of two partial sums (the all-reduce moves past
/// them and two become one, loom-sink-all-reduces).
constexpr int64_t kCarry = -2;

/// An ILP node: an op (its loop nest and the loops `dp` splits) or an
/// argument (the dimensions `dp` splits); `choices` are the loop (op) or
/// dimension (argument) that `tp` splits, -1 for none.
struct Node {
  Operation *op = nullptr;
  BlockArgument arg;
  sharding::LoopNest nest;
  shard::ShardingArray loopAxes; // ops
  DimAxes argAxes;               // arguments
  SmallVector<int64_t> choices;
};

/// Where a value comes from: the node, and the tensor's index in it (an
/// op's operands, then its results; 0 for an argument).
struct Source {
  unsigned node = 0;
  unsigned tensor = 0;
};

bool isShardable(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() > 0 && type.hasStaticShape();
}

DimAxes toDimAxes(const Sharding &s, int64_t rank) {
  DimAxes axes(rank);
  if (!s)
    return axes;
  for (auto [d, a] : llvm::enumerate(s.getSplitAxes()))
    if (d < static_cast<size_t>(rank))
      axes[d].assign(a.asArrayRef().begin(), a.asArrayRef().end());
  return axes;
}

class AutoSharder {
public:
  AutoSharder(func::FuncOp func, shard::GridOp grid, const Cluster &cluster)
      : func(func), grid(grid), gridShape(grid.getShape()), cluster(cluster),
        topology(planner::MeshTopology::ppDpTp(
            grid.getShape()[kPipelineAxis], grid.getShape()[kDataAxis],
            grid.getShape()[kTensorAxis], cluster.devicesPerNode)),
        tp(grid.getShape()[kTensorAxis]) {}

  /// `leastMemory`: when nothing fits the budget, the fastest sharding of
  /// those that hold the least.
  LogicalResult run(double memoryBudgetBytes, bool leastMemory);

private:
  LogicalResult readDataParallel();
  void stripAnnotations();
  void addStrategies();
  planner::IlpRequest buildRequest(double memoryBudgetBytes);
  /// Each pipeline device's share of the step's saved activations held at
  /// once (its micro-batches in flight over the step's); one device
  /// without stages.
  LogicalResult readSchedule();
  /// The pipeline device of `node`: its op's stage, or a parameter's
  /// first user's (0 without stages).
  int deviceOf(const Node &node) const;
  void groupLayers(planner::IlpRequest &request);
  void annotate(ArrayRef<unsigned> choice);

  /// The dimension of tensor `tensor` of `node` that choice `c` splits on
  /// `tp`, kWhole, or kPartial (the cost model's layouts).
  int64_t layout(const Node &node, unsigned c, unsigned tensor) const;
  /// The same as the annotation writes it: partial sums are whole there.
  int64_t tpDim(const Node &node, unsigned c, unsigned tensor) const {
    int64_t d = layout(node, c, tensor);
    return d == kPartial ? kWhole : d;
  }
  /// Whether result `v` of a forward op is read after the loss (an
  /// activation the backward keeps).
  bool isSaved(Value v) const;
  /// The `dp` axes of tensor `tensor` of `node`, per dimension.
  DimAxes dpAxes(const Node &node, unsigned tensor) const;
  int64_t devices(ArrayRef<GridAxis> axes) const;
  double seconds(CollectiveKind kind, double bytes) const;
  /// Seconds to turn a value of `bytes` (this rank's, before `tp`) split on
  /// `tp` along `from` into one split along `to` (-1: whole).
  double reshardSeconds(double bytes, int64_t from, int64_t to,
                        bool oneUse) const;
  double opSeconds(const Node &node, unsigned c) const;
  Sharding shardingOf(const Node &node, unsigned c, unsigned tensor);

  func::FuncOp func;
  shard::GridOp grid;
  SmallVector<int64_t> gridShape;
  const Cluster &cluster;
  planner::MeshTopology topology;
  int64_t tp;
  std::vector<Node> nodes;
  DenseMap<Value, Source> sources;
  /// Each returned parameter or optimizer state's argument.
  DenseMap<unsigned, unsigned> returnedArg;
  /// The op computing the loss: ops before it are the forward pass.
  Operation *lossOp = nullptr;
  int64_t pp = 1;
  std::vector<double> inFlightShare{1.0};
};

LogicalResult AutoSharder::readSchedule() {
  pp = gridShape[kPipelineAxis];
  if (pp == 1) {
    inFlightShare = {1.0 / double(microAxisSize(grid))};
    return success();
  }
  llvm::Expected<planner::PipelineSchedule> schedule =
      pipelineScheduleOf(grid);
  if (!schedule)
    return func.emitError("loom-auto-shard: ")
           << llvm::toString(schedule.takeError());
  inFlightShare.clear();
  for (int64_t d = 0; d < pp; ++d)
    inFlightShare.push_back(
        double(schedule->inFlight(d)) /
        double(schedule->microBatches * schedule->chunks));
  return success();
}

int AutoSharder::deviceOf(const Node &node) const {
  if (pp == 1)
    return 0;
  StringRef mark = LoomDialect::StageAttrHelper::getNameStr();
  auto stageOf = [&](Operation *op) -> int {
    auto s = op->getAttrOfType<IntegerAttr>(mark);
    return s ? int(s.getInt() % pp) : -1;
  };
  if (node.op)
    return std::max(stageOf(node.op), 0);
  for (Operation *user : node.arg.getUsers())
    if (int d = stageOf(user); d >= 0)
      return d;
  return 0;
}

int64_t AutoSharder::devices(ArrayRef<GridAxis> axes) const {
  int64_t n = 1;
  for (GridAxis a : axes)
    n *= gridShape[a];
  return n;
}

double AutoSharder::seconds(CollectiveKind kind, double bytes) const {
  planner::AxisGroup group = topology.group(kTensorAxis);
  return planner::collectiveSeconds(kind, bytes, group.size,
                                    cluster.link(group.level));
}

double AutoSharder::reshardSeconds(double bytes, int64_t from, int64_t to,
                                   bool oneUse) const {
  if (to == kPartial)
    return from == kPartial ? 0 : kForbidden; // only partial sums carry on
  if (from == to)
    return 0;
  double slice = planner::rooflineSeconds({0, 2 * bytes / tp}, cluster);
  if (from == kPartial) {
    // Summing the partial sums: an all-reduce, or a reduce-scatter when
    // only this slice reads the sum (sequence parallelism's). Sums that
    // meet in an addition are summed once, after it (the add carries them).
    double sum = seconds(CollectiveKind::AllReduce, bytes);
    if (to == kWhole)
      return sum;
    return oneUse ? seconds(CollectiveKind::ReduceScatter, bytes)
                  : sum + slice;
  }
  if (from == kWhole) // a local slice: read the block, write it
    return slice;
  if (to == kWhole)
    return seconds(CollectiveKind::AllGather, bytes);
  return seconds(CollectiveKind::AllToAll, bytes / tp);
}

DimAxes AutoSharder::dpAxes(const Node &node, unsigned tensor) const {
  if (!node.op)
    return node.argAxes;
  DimAxes axes;
  for (int64_t loop : node.nest.maps[tensor])
    axes.emplace_back(node.loopAxes[loop].begin(), node.loopAxes[loop].end());
  return axes;
}

int64_t AutoSharder::layout(const Node &node, unsigned c,
                            unsigned tensor) const {
  int64_t choice = node.choices[c];
  if (!node.op || choice == kWhole)
    return choice;
  unsigned numOperands = node.op->getNumOperands();
  if (choice == kCarry) // partial sums in, partial sums out
    return tensor == 0 || tensor >= numOperands ||
                   (isa<AddOp>(node.op) && tensor == 1)
               ? kPartial
               : kWhole;
  ArrayRef<int64_t> map = node.nest.maps[tensor];
  auto it = llvm::find(map, choice);
  if (it != map.end())
    return it - map.begin();
  // A result that does not index the split loop holds partial sums.
  return tensor >= numOperands ? kPartial : kWhole;
}

bool AutoSharder::isSaved(Value v) const {
  Operation *def = v.getDefiningOp();
  if (!def || !lossOp || !def->isBeforeInBlock(lossOp))
    return false;
  return llvm::any_of(v.getUsers(), [&](Operation *user) {
    return lossOp->isBeforeInBlock(user);
  });
}

LogicalResult AutoSharder::readDataParallel() {
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    Node node;
    node.arg = arg;
    int64_t rank =
        isShardable(arg) ? cast<RankedTensorType>(arg.getType()).getRank() : 0;
    Sharding s;
    if (arg.hasOneUse())
      if (auto shardOp = dyn_cast<shard::ShardOp>(*arg.user_begin()))
        s = Sharding(shardOp.getSharding());
    node.argAxes = toDimAxes(s, rank);
    sources[arg] = {static_cast<unsigned>(nodes.size()), 0};
    nodes.push_back(std::move(node));
  }
  for (Operation &op : body.without_terminator()) {
    if (isa<shard::ShardDialect>(op.getDialect()))
      continue;
    if (!isa<LoomDialect>(op.getDialect()))
      return op.emitOpError("loom-auto-shard knows only loom ops");
    Node node;
    node.op = &op;
    node.nest = sharding::loopNestOf(&op);
    std::vector<Sharding> operands, results;
    for (OpOperand &operand : op.getOpOperands()) {
      FailureOr<std::pair<bool, Sharding>> s = shard::getSharding(operand);
      operands.push_back(succeeded(s) ? s->second : Sharding());
    }
    for (OpResult result : op.getResults()) {
      FailureOr<std::pair<bool, Sharding>> s = shard::getSharding(result);
      results.push_back(succeeded(s) ? s->second : Sharding());
    }
    FailureOr<shard::ShardingArray> loopAxes =
        sharding::loopAxesOf(&op, node.nest, operands, results);
    if (failed(loopAxes))
      return failure();
    node.loopAxes = std::move(*loopAxes);
    for (OpResult result : op.getResults())
      sources[result] = {static_cast<unsigned>(nodes.size()),
                         op.getNumOperands() + result.getResultNumber()};
    nodes.push_back(std::move(node));
  }
  return success();
}

void AutoSharder::stripAnnotations() {
  Block &body = func.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (auto shardOp = dyn_cast<shard::ShardOp>(op)) {
      shardOp.getResult().replaceAllUsesWith(shardOp.getSrc());
      shardOp.erase();
    }
  }
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<shard::ShardingOp>(op) && op.use_empty())
      op.erase();
}

void AutoSharder::addStrategies() {
  // Arguments: every dimension that `dp` leaves whole and `tp` divides;
  // data keeps its data-parallel split only.
  for (Node &node : nodes) {
    node.choices.push_back(-1);
    if (node.op) {
      for (auto [loop, info] : llvm::enumerate(node.nest.loops)) {
        if (!info.splittable || !node.loopAxes[loop].empty())
          continue;
        bool divides = true, indexed = false;
        Operation *op = node.op;
        SmallVector<Value> tensors(op->getOperands());
        llvm::append_range(tensors, op->getResults());
        for (auto [t, v] : llvm::enumerate(tensors)) {
          ArrayRef<int64_t> map = node.nest.maps[t];
          auto it = llvm::find(map, static_cast<int64_t>(loop));
          if (it == map.end())
            continue;
          auto type = dyn_cast<RankedTensorType>(v.getType());
          int64_t size = type ? type.getDimSize(it - map.begin()) : 0;
          indexed = true;
          divides &= size > 0 && size % tp == 0;
        }
        if (indexed && divides)
          node.choices.push_back(loop);
      }
      // What loom-sink-all-reduces moves a sum past: linear unary ops, and
      // an addition of two sums (summed once).
      if (isa<ReshapeOp, TransposeOp, ScaleOp>(node.op) ||
          (isa<AddOp>(node.op) && node.op->getOperand(0).getType() ==
                                      node.op->getOperand(1).getType()))
        node.choices.push_back(kCarry);
      continue;
    }
    unsigned i = node.arg.getArgNumber();
    if (!isShardable(node.arg) || func.getArgAttr(i, attr::kInput) ||
        func.getArgAttr(i, attr::kTarget))
      continue;
    auto type = cast<RankedTensorType>(node.arg.getType());
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (node.argAxes[d].empty() && type.getDimSize(d) % tp == 0)
        node.choices.push_back(d);
  }
}

double AutoSharder::opSeconds(const Node &node, unsigned c) const {
  Operation *op = node.op;
  int64_t shared = 1;
  for (const auto &axes : node.loopAxes)
    shared *= devices(axes);
  int64_t loop = node.choices[c];
  if (loop >= 0)
    shared *= tp;
  planner::OpRecord record = opRecordOf(op, cluster.hostKernels());
  double total = planner::rooflineSeconds(record, cluster) / shared;
  if (loop < 0) // whole, or carrying partial sums
    return total;
  // A result that does not index the split loop holds partial sums, which
  // the edges to its users sum (ir/sharding/ShardingModel.cpp all-reduces
  // them); a loop without a collective cannot leave any.
  unsigned numOperands = op->getNumOperands();
  for (OpResult result : op->getResults()) {
    ArrayRef<int64_t> map = node.nest.maps[numOperands + result.getResultNumber()];
    if (!llvm::is_contained(map, loop) &&
        node.nest.loops[loop].kind == shard::ReductionKind::Generic)
      return kForbidden;
  }
  return total;
}

planner::IlpRequest AutoSharder::buildRequest(double memoryBudgetBytes) {
  planner::IlpRequest request;
  request.memoryBudgetBytes = memoryBudgetBytes;
  for (Node &node : nodes) {
    planner::IlpNode ilp;
    ilp.device = deviceOf(node);
    // A micro-batch's activations live from its forward to its backward:
    // the device holds those of the micro-batches in flight.
    double held = inFlightShare[ilp.device];
    for (unsigned c = 0; c < node.choices.size(); ++c) {
      if (node.op) {
        ilp.cost.push_back(opSeconds(node, c));
        // The activations the backward keeps, split or whole.
        double saved = 0;
        unsigned numOperands = node.op->getNumOperands();
        for (OpResult result : node.op->getResults()) {
          if (!isShardable(result) || !isSaved(result))
            continue;
          unsigned t = numOperands + result.getResultNumber();
          int64_t dpShare = 1;
          for (const auto &axes : dpAxes(node, t))
            dpShare *= devices(axes);
          saved += bytesOf(result) / dpShare /
                   (layout(node, c, t) >= 0 ? tp : 1);
        }
        ilp.memory.push_back(saved * held);
        continue;
      }
      ilp.cost.push_back(0);
      // What a parameter or its optimizer state holds all step long.
      unsigned i = node.arg.getArgNumber();
      bool persistent = func.getArgAttr(i, attr::kParam) ||
                        func.getArgAttr(i, attr::kRunningMean) ||
                        func.getArgAttr(i, attr::kRunningVar);
      double bytes = persistent ? bytesOf(node.arg) : 0;
      ilp.memory.push_back(node.choices[c] < 0 ? bytes : bytes / tp);
    }
    request.nodes.push_back(std::move(ilp));
  }

  // A value read by several users is resharded once per layout they read
  // it in (partition's copies are merged): its edges share their costs.
  DenseMap<Value, int> valueIds;
  auto share = [&](planner::IlpEdge &edge, Value v, const Node &from,
                   unsigned tensor) {
    if (v.hasOneUse())
      return;
    edge.value = valueIds.try_emplace(v, valueIds.size()).first->second;
    for (unsigned i = 0; i < from.choices.size(); ++i)
      edge.fromLayout.push_back(layout(from, i, tensor));
  };
  // An edge per use: the producer's layout against the user's.
  auto addEdge = [&](Value v, unsigned to, auto userDim) {
    auto it = sources.find(v);
    if (it == sources.end() || !isShardable(v))
      return;
    Source src = it->second;
    const Node &from = nodes[src.node];
    const Node &user = nodes[to];
    DimAxes fromDp = dpAxes(from, src.tensor);
    int64_t dpShare = 1;
    for (const auto &axes : fromDp)
      dpShare *= devices(axes);
    double bytes = bytesOf(v) / dpShare;
    planner::IlpEdge edge;
    edge.from = src.node;
    edge.to = to;
    for (unsigned i = 0; i < from.choices.size(); ++i)
      for (unsigned j = 0; j < user.choices.size(); ++j) {
        auto [dim, userDp] = userDim(j);
        int64_t a = layout(from, i, src.tensor);
        // Partition reshards one step at a time: where `dp` already
        // changes, `tp` must not.
        bool tpChanges = (a == kPartial ? kWhole : a) !=
                         (dim == kPartial ? kWhole : dim);
        if (tpChanges && userDp != fromDp)
          edge.cost.push_back(kForbidden);
        else
          edge.cost.push_back(reshardSeconds(bytes, a, dim, v.hasOneUse()));
      }
    share(edge, v, from, src.tensor);
    if (edge.value >= 0)
      for (unsigned j = 0; j < user.choices.size(); ++j)
        edge.toLayout.push_back(userDim(j).first);
    request.edges.push_back(std::move(edge));
  };
  for (auto [n, node] : llvm::enumerate(nodes)) {
    if (!node.op)
      continue;
    for (OpOperand &operand : node.op->getOpOperands()) {
      unsigned t = operand.getOperandNumber();
      addEdge(operand.get(), n, [&, t](unsigned j) {
        return std::make_pair(layout(node, j, t), dpAxes(node, t));
      });
    }
  }
  // Returned values: an updated parameter or state keeps its argument's
  // layout (the next step reads it there); anything else is whole.
  Operation *ret = func.getBody().front().getTerminator();
  for (OpOperand &operand : ret->getOpOperands()) {
    unsigned r = operand.getOperandNumber();
    auto argIt = returnedArg.find(r);
    if (argIt == returnedArg.end()) {
      // A user with one choice: replicated, as loom-shard-data-parallel
      // annotated the returns.
      Value v = operand.get();
      auto it = sources.find(v);
      if (it == sources.end() || !isShardable(v))
        continue;
      const Node &from = nodes[it->second.node];
      DimAxes fromDp = dpAxes(from, it->second.tensor);
      int64_t dpShare = 1;
      for (const auto &axes : fromDp)
        dpShare *= devices(axes);
      planner::IlpNode sink;
      sink.cost.push_back(0);
      request.nodes.push_back(sink);
      planner::IlpEdge edge;
      edge.from = it->second.node;
      edge.to = request.nodes.size() - 1;
      bool dpChanges = llvm::any_of(fromDp, [](auto &a) { return !a.empty(); });
      for (unsigned i = 0; i < from.choices.size(); ++i) {
        int64_t a = layout(from, i, it->second.tensor);
        edge.cost.push_back(a >= 0 && dpChanges
                                ? kForbidden
                                : reshardSeconds(bytesOf(v) / dpShare, a,
                                                 kWhole, v.hasOneUse()));
      }
      share(edge, v, from, it->second.tensor);
      if (edge.value >= 0)
        edge.toLayout.push_back(kWhole);
      request.edges.push_back(std::move(edge));
      continue;
    }
    unsigned argNode = sources.lookup(func.getArgument(argIt->second)).node;
    auto it = sources.find(operand.get());
    if (it == sources.end())
      continue;
    const Node &from = nodes[it->second.node];
    const Node &arg = nodes[argNode];
    planner::IlpEdge edge;
    edge.from = it->second.node;
    edge.to = argNode;
    for (unsigned i = 0; i < from.choices.size(); ++i)
      for (unsigned j = 0; j < arg.choices.size(); ++j)
        edge.cost.push_back(tpDim(from, i, it->second.tensor) ==
                                    arg.choices[j]
                                ? 0
                                : kForbidden);
    request.edges.push_back(std::move(edge));
  }
  return request;
}

void AutoSharder::groupLayers(planner::IlpRequest &request) {
  // A node's class: its name's kind of layer, what it is (op, types and
  // attributes; or parameter, state and type), and its place among the
  // nodes of its layer with the same description. A class with members in
  // several layers is a group: its members take one strategy.
  std::map<std::string, int> classes;
  std::map<std::pair<std::string, std::string>, int> ordinals;
  std::vector<std::string> classOf(nodes.size());
  std::map<std::string, int> members;
  for (auto [n, node] : llvm::enumerate(nodes)) {
    std::string description;
    llvm::raw_string_ostream os(description);
    planner::LayerName name;
    if (node.op) {
      // An op without an ONNX node (an optimizer update) is named by the
      // parameter it reads.
      StringRef opName = onnxNodeName(node.op->getLoc());
      for (Value v : node.op->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(v); opName.empty() && arg)
          if (auto param = func.getArgAttrOfType<StringAttr>(
                  arg.getArgNumber(), attr::kParam))
            opName = param.getValue();
      name = planner::splitLayerIndex(opName);
      os << node.op->getName() << node.op->getAttrDictionary();
      for (Type t : node.op->getOperandTypes())
        os << t;
      for (Type t : node.op->getResultTypes())
        os << t;
    } else {
      unsigned i = node.arg.getArgNumber();
      auto param = func.getArgAttrOfType<StringAttr>(i, attr::kParam);
      if (!param)
        continue;
      name = planner::splitLayerIndex(param.getValue());
      for (NamedAttribute a : func.getArgAttrDict(i))
        if (a.getName() != attr::kParam)
          os << a.getName() << a.getValue();
      os << node.arg.getType();
    }
    // Members take one strategy by its index: the same strategies.
    for (int64_t c : node.choices)
      os << ' ' << c;
    if (name.layer.empty())
      continue;
    std::string key = name.kind + '\n' + description;
    int ordinal = ordinals[{key, name.layer}]++;
    classOf[n] = key + '\n' + std::to_string(ordinal);
    ++members[classOf[n]];
  }
  for (auto [n, key] : llvm::enumerate(classOf))
    if (!key.empty() && members[key] > 1)
      request.nodes[n].group =
          classes.try_emplace(key, classes.size()).first->second;
}

Sharding AutoSharder::shardingOf(const Node &node, unsigned c,
                                 unsigned tensor) {
  DimAxes axes = dpAxes(node, tensor);
  int64_t d = tpDim(node, c, tensor);
  if (d >= 0)
    axes[d].push_back(kTensorAxis);
  MLIRContext *ctx = func.getContext();
  SmallVector<shard::GridAxesAttr> split;
  for (auto &a : axes) {
    // A size-1 axis splits nothing (loom-shard-data-parallel marks the
    // batch with dp = 1).
    llvm::erase_if(a, [&](GridAxis axis) { return gridShape[axis] == 1; });
    split.push_back(shard::GridAxesAttr::get(ctx, a));
  }
  while (!split.empty() && split.back().empty())
    split.pop_back();
  return Sharding::get(FlatSymbolRefAttr::get(grid.getSymNameAttr()), split);
}

void AutoSharder::annotate(ArrayRef<unsigned> choice) {
  Block &body = func.getBody().front();
  OpBuilder b(func.getContext());
  auto shardingValue = [&](const Sharding &s, Location loc) {
    return shard::ShardingOp::create(b, loc, s).getResult();
  };
  // The producer's sharding right after each value, then each use's.
  auto annotateValue = [&](Value v, const Sharding &s) -> Value {
    if (auto arg = dyn_cast<BlockArgument>(v))
      b.setInsertionPointToStart(&body);
    else
      b.setInsertionPointAfter(v.getDefiningOp());
    Value sv = shardingValue(s, v.getLoc());
    auto shardOp = shard::ShardOp::create(b, v.getLoc(), v, sv);
    v.replaceAllUsesExcept(shardOp.getResult(), shardOp);
    return shardOp.getResult();
  };
  auto annotateUse = [&](OpOperand &use, const Sharding &s) {
    b.setInsertionPoint(use.getOwner());
    Value sv = shardingValue(s, use.get().getLoc());
    use.set(shard::ShardOp::create(b, use.get().getLoc(), use.get(), sv,
                                   /*annotate_for_users=*/true));
  };
  // Arguments first, in reverse so they appear in order at the top.
  for (Node &node : llvm::reverse(nodes))
    if (!node.op && isShardable(node.arg)) {
      unsigned n = sources.lookup(node.arg).node;
      annotateValue(node.arg, shardingOf(node, choice[n], 0));
    }
  for (auto [n, node] : llvm::enumerate(nodes)) {
    if (!node.op)
      continue;
    unsigned numOperands = node.op->getNumOperands();
    for (OpOperand &operand : node.op->getOpOperands())
      if (isShardable(operand.get()))
        annotateUse(operand, shardingOf(node, choice[n],
                                        operand.getOperandNumber()));
    for (OpResult result : node.op->getResults())
      if (isShardable(result))
        annotateValue(result, shardingOf(node, choice[n],
                                         numOperands + result.getResultNumber()));
  }
  Operation *ret = body.getTerminator();
  for (OpOperand &operand : ret->getOpOperands()) {
    if (!isShardable(operand.get()))
      continue;
    unsigned r = operand.getOperandNumber();
    auto argIt = returnedArg.find(r);
    if (argIt != returnedArg.end()) {
      unsigned n = sources.lookup(func.getArgument(argIt->second)).node;
      annotateUse(operand, shardingOf(nodes[n], choice[n], 0));
      continue;
    }
    annotateUse(operand, Sharding::get(
                             FlatSymbolRefAttr::get(grid.getSymNameAttr()), {}));
  }
}

LogicalResult AutoSharder::run(double memoryBudgetBytes, bool leastMemory) {
  // Returned parameters, optimizer states and running statistics by their
  // argument.
  for (unsigned r = 0; r < func.getNumResults(); ++r) {
    auto param = func.getResultAttr(r, attr::kParam);
    auto state = func.getResultAttr(r, attr::kState);
    auto mean = func.getResultAttr(r, attr::kRunningMean);
    auto var = func.getResultAttr(r, attr::kRunningVar);
    if (!param && !mean && !var)
      continue;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, attr::kParam) == param &&
          func.getArgAttr(i, attr::kState) == state &&
          func.getArgAttr(i, attr::kRunningMean) == mean &&
          func.getArgAttr(i, attr::kRunningVar) == var)
        returnedArg[r] = i;
  }
  if (failed(readDataParallel()) || failed(readSchedule()))
    return failure();
  stripAnnotations();
  Operation *ret = func.getBody().front().getTerminator();
  if (func.getNumResults() > 0 && func.getResultAttr(0, attr::kLoss))
    lossOp = ret->getOperand(0).getDefiningOp();
  addStrategies();
  planner::IlpRequest request = buildRequest(memoryBudgetBytes);
  request.leastMemoryOverBudget = leastMemory;
  groupLayers(request);
  llvm::Expected<planner::IlpSolution> solution =
      planner::solveShardingIlp(request);
  if (!solution) {
    bool noFit = false;
    std::string why = planner::takeMessage(solution.takeError(), noFit);
    if (noFit)
      recordErrorKind(ErrorKind::DoesNotFit);
    return func.emitError("loom-auto-shard: ") << why;
  }
  annotate(solution->choice);
  return success();
}

struct AutoShardPass
    : public loom::impl::LoomAutoShardPassBase<AutoShardPass> {
  using LoomAutoShardPassBase::LoomAutoShardPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid = lookupMesh(module);
    func::FuncOp func = lookupEntryFunction(module);
    if (!isPlannedMesh(grid) || !func) {
      module.emitError("loom-auto-shard needs a pp x dp x tp mesh and the "
                       "entry function (run loom-choose-mesh first)");
      return signalPassFailure();
    }
    if (grid.getShape()[kTensorAxis] == 1)
      return;
    std::string spec = cluster;
    llvm::Expected<Cluster> parsed = parseCluster(spec);
    if (!parsed) {
      module.emitError("loom-auto-shard: ")
          << llvm::toString(parsed.takeError());
      return signalPassFailure();
    }
    double budgetGib = memoryBudgetGib;
    double budget = budgetGib > 0 ? budgetGib * 1024.0 * 1024.0 * 1024.0
                                  : parsed->usableMemoryBytes();
    if (budget <= 0)
      budget = kForbidden;
    AutoSharder sharder(func, grid, *parsed);
    if (failed(sharder.run(budget, searched)))
      return signalPassFailure();
  }
};

} // namespace
