//===- SplitStages.cpp - One function per pipeline device ------*- C++ -*-===//
//
// With pp > 1, after loom-partition-stages has marked each op's stage and
// loom-unroll-micro-batches has written the micro-batches out, the step is
// cut into one function per pp device, each op placed in the turn of the
// device's schedule that runs it, and a value that one device makes and
// another reads travels between them by `shard.send` / `shard.recv` along
// the pp axis.
//
// Placement. Each device's schedule is a list of turns, its tasks (F3:
// micro-batch 3's forward; B, W), and `PipelineSchedule::startTimes` gives
// when each turn starts. An op marked with a micro-batch runs no earlier
// than its own turn; every op runs no earlier than the turns of what it
// reads on its own device, and in a turn that starts strictly after the
// turn in which another device made what it reads from there. Ops of one
// turn keep the step's order. Every device's order is then part of one
// order of the whole step in which each value is made before it is read,
// so the devices never wait on each other for ever: a send does not wait,
// and each receive's send comes before it. What one device sends another
// is received in the order it was sent, for transports without tags
// (NCCL).
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"
#include "passes/planner/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSPLITSTAGESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;
using planner::PipelineTask;

namespace {

constexpr int64_t kMaxTag = 32767;

bool isDataArg(func::FuncOp func, BlockArgument arg) {
  return isDataArgument(func, arg.getArgNumber());
}

/// When an op runs on its device: the turn of the device's order (the
/// number of turns: after the last one) and, in the turn after the last,
/// its depth in the chain of transfers that ends the step.
struct Place {
  int64_t turn = 0, level = 0;
};

/// One run of the pass over one module.
class StageSplitter {
public:
  /// Replaces `func` by the stage functions.
  LogicalResult run(shard::GridOp grid, func::FuncOp func) {
    if (failed(readSchedule(grid)) || failed(place(func)) ||
        failed(build(func)))
      return failure();
    func.erase();
    return success();
  }

private:
  /// The schedule `loom-partition-stages` chose, and its turns' times.
  LogicalResult readSchedule(shard::GridOp grid) {
    devices = grid.getShape()[kPipelineAxis];
    llvm::Expected<planner::PipelineSchedule> built = pipelineScheduleOf(grid);
    if (!built)
      return grid.emitError(llvm::toString(built.takeError()));
    schedule = std::move(*built);
    llvm::Expected<std::vector<std::vector<int64_t>>> times =
        schedule.startTimes();
    if (!times)
      return grid.emitError(llvm::toString(times.takeError()));
    startTimes = std::move(*times);
    for (int64_t d = 0; d < devices; ++d)
      for (auto [i, t] : llvm::enumerate(schedule.order[d]))
        turnOf[{d, t.kind, t.microBatch, t.chunk}] = i;
    return success();
  }

  /// When turn `turn` of device `d` starts (after the last: never).
  int64_t timeOf(int64_t d, int64_t turn) const {
    return turn < static_cast<int64_t>(startTimes[d].size())
               ? startTimes[d][turn]
               : INT64_MAX;
  }

  /// Devices and turns for every op (see the file comment).
  LogicalResult place(func::FuncOp func) {
    Block &body = func.getBody().front();
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (auto [i, op] : llvm::enumerate(ops))
      index[op] = i;

    // Constants, and what is computed from constants alone, are made again
    // on every device that reads them.
    for (Operation *op : ops)
      if (isMemoryEffectFree(op) && op->getNumRegions() == 0 &&
          llvm::all_of(op->getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def && replicated.contains(def);
          }))
        replicated.insert(op);

    // Stages: the op's mark, else the stage of the operand made last, else
    // that of its first user.
    DenseMap<Operation *, int64_t> stage;
    for (Operation *op : ops) {
      if (replicated.contains(op))
        continue;
      if (auto s = op->getAttrOfType<IntegerAttr>(
              LoomDialect::StageAttrHelper::getNameStr())) {
        stage[op] = s.getInt();
        continue;
      }
      Operation *latest = nullptr;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          if (stage.contains(def) && (!latest || index[def] > index[latest]))
            latest = def;
      if (latest)
        stage[op] = stage[latest];
    }
    for (Operation *op : llvm::reverse(ops)) {
      if (replicated.contains(op) || stage.contains(op))
        continue;
      Operation *first = nullptr;
      for (Operation *user : op->getUsers())
        if (stage.contains(user) && (!first || index[user] < index[first]))
          first = user;
      stage[op] = first ? stage[first] : 0;
    }
    int64_t stages = devices * schedule.chunks;
    for (auto [op, s] : stage) {
      if (s >= stages)
        return op->emitError("loom.stage = ")
                   << s << " but the pipeline has " << stages << " stages",
               failure();
      opDevice[op] = s % devices;
    }

    // Arguments: data on every device that reads it; a parameter or a state
    // on one, its update's (or its first reader's).
    for (BlockArgument arg : func.getArguments()) {
      if (isDataArg(func, arg))
        continue;
      Operation *first = nullptr, *update = nullptr;
      for (Operation *user : arg.getUsers()) {
        if (!stage.contains(user))
          continue;
        if (!first || index[user] < index[first])
          first = user;
        if (isa<AdamwOp, SgdOp>(user) &&
            (!update || index[user] < index[update]))
          update = user;
      }
      Operation *by = update ? update : first;
      argDevice[arg] = by ? opDevice[by] : 0;
    }

    // Who reads each value on another device.
    for (Operation *op : ops) {
      if (replicated.contains(op))
        continue;
      int64_t d = opDevice[op];
      for (Value v : op->getOperands())
        if (int64_t from = deviceOfValue(v); from >= 0 && from != d)
          readers[v].insert(d);
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() == 0 || !func.getResultAttr(0, attr::kLoss))
      return func.emitError("pipeline stages need a training step (its "
                            "first result the loss)"),
             failure();
    // Every device reports the loss; each other result stays where it is
    // made.
    Value loss = ret.getOperand(0);
    int64_t lossDevice = deviceOfValue(loss);
    if (lossDevice < 0)
      return ret.emitError("the loss is not computed by the step"), failure();
    for (int64_t d = 0; d < devices; ++d)
      if (d != lossDevice)
        readers[loss].insert(d);

    // ZB-H1: the backward ops that make a value another device reads (and
    // what they need) are the input-gradient part; the rest of the
    // backward, the weight gradients, waits for the W turn.
    DenseSet<Operation *> inputGrad;
    if (schedule.kind == planner::ScheduleKind::ZeroBubbleH1) {
      SmallVector<Operation *> work;
      for (Operation *op : ops)
        if (isBackward(op) && llvm::any_of(op->getResults(), [&](Value r) {
              return readers.contains(r);
            }))
          work.push_back(op);
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (!inputGrad.insert(op).second)
          continue;
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp())
            if (isBackward(def) && stage.lookup(def) == stage.lookup(op))
              work.push_back(def);
      }
    }

    // Turns, in the step's order (what an op reads is placed before it).
    int64_t micro = schedule.microBatches;
    for (Operation *op : ops) {
      if (replicated.contains(op))
        continue;
      Place p;
      int64_t device = opDevice[op];
      int64_t chunk = stage[op] / devices;
      auto mb = op->getAttrOfType<IntegerAttr>(
          LoomDialect::MicroBatchAttrHelper::getNameStr());
      // One micro-batch: every marked op is micro-batch 0's.
      std::optional<int64_t> j;
      if (mb)
        j = mb.getInt();
      else if (micro == 1 &&
               op->hasAttr(LoomDialect::StageAttrHelper::getNameStr()) &&
               !isa<AdamwOp, SgdOp>(op))
        j = 0;
      if (j) {
        PipelineTask::Kind kind =
            !isBackward(op) ? PipelineTask::Forward
            : schedule.kind == planner::ScheduleKind::ZeroBubbleH1 &&
                    !inputGrad.contains(op)
                ? PipelineTask::WeightGrad
                : PipelineTask::Backward;
        auto it = turnOf.find({device, kind, *j, chunk});
        if (it == turnOf.end())
          return op->emitError("no turn of pp device ")
                     << device << " runs micro-batch " << *j << " of stage "
                     << stage[op],
                 failure();
        p.turn = it->second;
      }
      int64_t after = static_cast<int64_t>(schedule.order[device].size());
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || replicated.contains(def))
          continue;
        const Place &q = places[def];
        int64_t from = opDevice[def];
        if (from == device) {
          p.turn = std::max(p.turn, q.turn);
          continue;
        }
        // Strictly after the turn that made it on the other device.
        int64_t made = timeOf(from, q.turn);
        int64_t t = p.turn;
        while (t < after && timeOf(device, t) <= made)
          ++t;
        p.turn = t;
      }
      // After the last turn: one level deeper than what another device
      // made there.
      if (p.turn == after)
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp();
              def && !replicated.contains(def)) {
            const Place &q = places[def];
            int64_t from = opDevice[def];
            if (q.turn == static_cast<int64_t>(schedule.order[from].size()))
              p.level = std::max(p.level, q.level + (from == device ? 0 : 1));
          }
      places[op] = p;
    }
    return success();
  }

  bool isBackward(Operation *op) const {
    return op->hasAttr(LoomDialect::BackwardAttrHelper::getNameStr());
  }

  /// The device that makes `v` (-1: data, or a constant made everywhere).
  int64_t deviceOfValue(Value v) const {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto it = argDevice.find(arg);
      return it == argDevice.end() ? -1 : it->second;
    }
    auto it = opDevice.find(v.getDefiningOp());
    return it == opDevice.end() ? -1 : it->second;
  }

  /// The tag of `v`'s transfer to device `to`.
  FailureOr<int64_t> tagOf(Value v, int64_t to, Location loc) {
    auto [it, added] = tags.try_emplace({v, to}, tags.size());
    if (it->second > kMaxTag)
      return emitError(loc)
                 << "the pipeline stages exchange more than " << kMaxTag + 1
                 << " values a step; use fewer micro-batches or "
                    "fewer stages",
             failure();
    return it->second;
  }

  /// Writes `@main_stage<d>` for every device, before `func`.
  LogicalResult build(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    // Each device's ops, in the order its turns run them.
    std::vector<SmallVector<Operation *>> order(devices);
    for (Operation *op : ops) {
      if (replicated.contains(op))
        continue;
      order[opDevice[op]].push_back(op);
    }
    for (SmallVector<Operation *> &list : order)
      std::stable_sort(
          list.begin(), list.end(), [&](Operation *a, Operation *b) {
            const Place &p = places[a], &q = places[b];
            return std::tie(p.turn, p.level) < std::tie(q.turn, q.level);
          });
    // Which constants each device makes: those its ops read, and theirs.
    std::vector<DenseSet<Operation *>> constants(devices);
    for (int64_t d = 0; d < devices; ++d) {
      SmallVector<Operation *> work;
      auto need = [&](Operation *op) {
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp();
              def && replicated.contains(def))
            work.push_back(def);
      };
      for (Operation *op : order[d])
        need(op);
      if (d == 0)
        for (Value v : ret.getOperands())
          if (Operation *def = v.getDefiningOp();
              def && replicated.contains(def))
            work.push_back(def);
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (constants[d].insert(op).second)
          need(op);
      }
    }

    // What each device sends each other one, in the order it sends it: its
    // parameters first, then as its ops make them.
    std::map<std::pair<int64_t, int64_t>, SmallVector<Value>> sendOrder;
    auto sends = [&](int64_t from, Value v) {
      if (auto it = readers.find(v); it != readers.end())
        for (int64_t to : it->second)
          sendOrder[{from, to}].push_back(v);
    };
    for (BlockArgument arg : func.getArguments())
      if (!isDataArg(func, arg))
        sends(argDevice[arg], arg);
    for (int64_t d = 0; d < devices; ++d)
      for (Operation *op : order[d])
        for (Value r : op->getResults())
          sends(d, r);

    OpBuilder b(func);
    StringRef grid = kMeshName;
    for (int64_t d = 0; d < devices; ++d) {
      // Arguments: this device's parameters and states, the data it reads.
      SmallVector<BlockArgument> args;
      for (BlockArgument arg : func.getArguments()) {
        // (The return and constants are on no device of their own.)
        auto readHere = [&](Operation *u) {
          auto it = opDevice.find(u);
          return it != opDevice.end() && it->second == d;
        };
        bool mine = isDataArg(func, arg)
                        ? llvm::any_of(arg.getUsers(), readHere)
                        : argDevice[arg] == d;
        if (mine)
          args.push_back(arg);
      }
      // Results: the loss, and what this device makes.
      SmallVector<unsigned> results;
      for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
        Value v = ret.getOperand(r);
        int64_t from = deviceOfValue(v);
        if (from < 0 && isa<BlockArgument>(v))
          return ret.emitError("result #")
                     << r << " returns a data argument of the step",
                 failure();
        // A constant result: the first device's.
        if (r == 0 || from == d || (from < 0 && d == 0))
          results.push_back(r);
      }
      SmallVector<Type> argTypes, resultTypes;
      for (BlockArgument a : args)
        argTypes.push_back(a.getType());
      for (unsigned r : results)
        resultTypes.push_back(ret.getOperand(r).getType());
      auto stageFunc = func::FuncOp::create(
          b, func.getLoc(), (func.getSymName() + "_stage" + Twine(d)).str(),
          b.getFunctionType(argTypes, resultTypes));
      stageFunc->setAttr(LoomDialect::PipelineDeviceAttrHelper::getNameStr(),
                         b.getI64IntegerAttr(d));
      for (auto [i, a] : llvm::enumerate(args))
        if (DictionaryAttr attrs = func.getArgAttrDict(a.getArgNumber()))
          stageFunc.setArgAttrs(i, attrs);
      for (auto [i, r] : llvm::enumerate(results))
        if (DictionaryAttr attrs = func.getResultAttrDict(r))
          stageFunc.setResultAttrs(i, attrs);
      Block *block = stageFunc.addEntryBlock();
      OpBuilder in = OpBuilder::atBlockEnd(block);
      IRMapping map;
      for (auto [i, a] : llvm::enumerate(args))
        map.map(a, block->getArgument(i));

      auto send = [&](Value v, Value local) -> LogicalResult {
        auto it = readers.find(v);
        if (it == readers.end())
          return success();
        // Transfers carry tensors of rank >= 1: a scalar (the loss) as one
        // element.
        Value payload = local;
        if (cast<RankedTensorType>(local.getType()).getRank() == 0)
          payload = ReshapeOp::create(in, v.getLoc(), local,
                                      in.getDenseI64ArrayAttr({1}));
        for (int64_t to : it->second) {
          FailureOr<int64_t> tag = tagOf(v, to, v.getLoc());
          if (failed(tag))
            return failure();
          auto s =
              shard::SendOp::create(in, v.getLoc(), payload.getType(), grid,
                                    ArrayRef<int16_t>{kPipelineAxis}, payload,
                                    ArrayRef<int64_t>{to}, ValueRange{});
          s->setAttr(LoomDialect::TagAttrHelper::getNameStr(),
                     in.getI64IntegerAttr(*tag));
        }
        return success();
      };
      // One receive of `v` from device `from`, here.
      auto receiveOne = [&](Value v, int64_t from) -> LogicalResult {
        FailureOr<int64_t> tag = tagOf(v, d, v.getLoc());
        if (failed(tag))
          return failure();
        auto type = cast<RankedTensorType>(v.getType());
        bool scalar = type.getRank() == 0;
        if (scalar)
          type = type.clone(ArrayRef<int64_t>{1});
        Value empty = tensor::EmptyOp::create(in, v.getLoc(), type.getShape(),
                                              type.getElementType());
        auto r = shard::RecvOp::create(
            in, v.getLoc(), type, grid, ArrayRef<int16_t>{kPipelineAxis}, empty,
            in.getDenseI64ArrayAttr({from}), ValueRange{});
        r->setAttr(LoomDialect::TagAttrHelper::getNameStr(),
                   in.getI64IntegerAttr(*tag));
        Value got = r.getResult();
        if (scalar)
          got = ReshapeOp::create(in, v.getLoc(), got,
                                  in.getDenseI64ArrayAttr({}));
        map.map(v, got);
        return success();
      };
      // A value from another device is received just before it is read,
      // after what that device sent here before it: the transfers between
      // two devices arrive in the order they were sent, as on transports
      // without tags (NCCL). What was sent earlier was sent before this
      // value in the order of the whole step, so the devices still never
      // wait on each other for ever.
      std::map<int64_t, size_t> nextFrom;
      auto receive = [&](Value v) -> LogicalResult {
        if (map.contains(v))
          return success();
        int64_t from = deviceOfValue(v);
        if (from == d)
          return emitError(v.getLoc(), "internal error: a value of pp device ")
                 << d << " is read before it is made";
        if (from < 0)
          return emitError(v.getLoc(), "internal error: a data argument or "
                                       "constant is missing on pp device ")
                 << d;
        const SmallVector<Value> &fifo = sendOrder[{from, d}];
        size_t &next = nextFrom[from];
        while (next < fifo.size() && !map.contains(v)) {
          Value u = fifo[next++];
          if (!map.contains(u) && failed(receiveOne(u, from)))
            return failure();
        }
        if (!map.contains(v))
          return emitError(v.getLoc(), "internal error: pp device ")
                 << from << " does not send this value to pp device " << d;
        return success();
      };

      // This device's parameters that others read go first.
      for (BlockArgument a : args)
        if (!isDataArg(func, a) && failed(send(a, map.lookup(a))))
          return failure();
      // Constants first, in the step's order.
      SmallVector<Operation *> made(constants[d].begin(), constants[d].end());
      llvm::sort(made, [&](Operation *x, Operation *y) {
        return index[x] < index[y];
      });
      for (Operation *op : made)
        in.clone(*op, map);
      for (Operation *op : order[d]) {
        for (Value v : op->getOperands())
          if (failed(receive(v)))
            return failure();
        // The micro-batch and backward marks stay: the plan's instructions
        // carry them for the runtime's count of micro-batches in flight.
        Operation *clone = in.clone(*op, map);
        clone->removeAttr(LoomDialect::StageAttrHelper::getNameStr());
        for (auto [r, c] : llvm::zip(op->getResults(), clone->getResults()))
          if (failed(send(r, c)))
            return failure();
      }
      SmallVector<Value> values;
      for (unsigned r : results) {
        if (failed(receive(ret.getOperand(r))))
          return failure();
        values.push_back(map.lookup(ret.getOperand(r)));
      }
      func::ReturnOp::create(in, ret.getLoc(), values);
    }
    return success();
  }

  int64_t devices = 1;
  planner::PipelineSchedule schedule;
  std::vector<std::vector<int64_t>> startTimes;
  // (device, kind, micro-batch, chunk) -> the turn of its order.
  std::map<std::tuple<int64_t, int, int64_t, int64_t>, int64_t> turnOf;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, size_t> index;
  DenseSet<Operation *> replicated;
  DenseMap<BlockArgument, int64_t> argDevice;
  DenseMap<Value, llvm::SmallSetVector<int64_t, 4>> readers;
  DenseMap<Operation *, Place> places;
  DenseMap<Operation *, int64_t> opDevice;
  DenseMap<std::pair<Value, int64_t>, int64_t> tags;
};

struct SplitStagesPass
    : public loom::impl::LoomSplitStagesPassBase<SplitStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    shard::GridOp grid = lookupMesh(module);
    if (!grid || grid.getShape()[kPipelineAxis] == 1)
      return;
    func::FuncOp func = lookupEntryFunction(module);
    if (grid.getRank() != 3 || !func || !func.getBody().hasOneBlock()) {
      module.emitError("loom-split-stages needs a pp x dp x tp mesh and a "
                       "single-block @main (run it after "
                       "loom-unroll-micro-batches)");
      return signalPassFailure();
    }
    StageSplitter splitter;
    if (failed(splitter.run(grid, func)))
      return signalPassFailure();
  }
};

} // namespace
