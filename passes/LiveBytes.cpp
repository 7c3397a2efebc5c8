//===- LiveBytes.cpp - The bytes a step's buffers hold at once --*- C++ -*-===//

#include "passes/LiveBytes.h"

#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/OpCost.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <algorithm>
#include <limits>
#include <map>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// One simulation: which value shares which buffer, and when each buffer
/// is first and last used.
class Simulation {
public:
  Simulation(func::FuncOp func, const LiveBytesOptions &options)
      : func(func), options(options) {}

  int64_t run(ArrayRef<RecomputeGroup> groups) {
    Block &body = func.getBody().front();
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      bool held = func.getArgAttr(i, attr::kParam) ||
                  func.getArgAttr(i, attr::kRunningMean) ||
                  func.getArgAttr(i, attr::kRunningVar);
      if (held)
        base += arenaBytes(arg);
      else
        original[arg] = newBuffer(arg, 0);
    }
    // Each group's clones, by the op they go before.
    DenseMap<Operation *, SmallVector<size_t>> before;
    for (auto [g, group] : llvm::enumerate(groups))
      if (group.insertBefore)
        before[group.insertBefore].push_back(g);
    SmallVector<DenseMap<Value, int>> cloneOf(groups.size());
    // The groups whose clones a value has, and whether an op reads them:
    // those at or after the group's place do.
    DenseMap<Value, size_t> groupOf;
    for (auto [g, group] : llvm::enumerate(groups))
      for (Operation *op : group.ops)
        for (Value r : op->getResults())
          groupOf[r] = g;
    DenseSet<size_t> placed;
    DenseSet<Operation *> unread = unreadOriginals(groups);

    int64_t heldUntil = -1;
    for (Operation &op : body) {
      if (&op == options.heldUntil)
        heldUntil = now + 1;
      if (auto it = before.find(&op); it != before.end())
        for (size_t g : it->second) {
          for (Operation *c : groups[g].ops) {
            ++now;
            define(
                c,
                [&](Value v) {
                  auto clone = cloneOf[g].find(v);
                  return clone != cloneOf[g].end() ? clone->second
                                                   : bufferOf(v);
                },
                &cloneOf[g]);
          }
          placed.insert(g);
        }
      if (unread.contains(&op))
        continue;
      ++now;
      auto read = [&](Value v) {
        auto g = groupOf.find(v);
        if (g != groupOf.end() && placed.contains(g->second))
          return cloneOf[g->second].lookup(v);
        return bufferOf(v);
      };
      if (isa<func::ReturnOp>(op)) {
        for (Value v : op.getOperands())
          extend(read(v), kEnd);
        continue;
      }
      define(&op, read, &original);
    }
    for (ArrayRef<int> bucket : buckets)
      for (int id : bucket)
        for (int other : bucket) {
          extend(id, buffers[other].first);
          extend(id, buffers[other].last);
        }
    // A sweep over the buffers' first and last uses.
    std::map<int64_t, int64_t> delta;
    for (const Buffer &b : buffers) {
      if (b.first > b.last)
        continue;
      delta[b.first] += b.bytes;
      delta[b.last == kEnd ? kEnd : b.last + 1] -= b.bytes;
    }
    if (heldUntil > 0) {
      delta[0] += options.heldBytes;
      delta[heldUntil] -= options.heldBytes;
    }
    int64_t live = 0, most = 0;
    for (auto [t, d] : delta) {
      live += d;
      most = std::max(most, live);
    }
    return base + most;
  }

private:
  static constexpr int64_t kEnd = std::numeric_limits<int64_t>::max() / 2;
  struct Buffer {
    int64_t bytes, first, last;
  };

  int newBuffer(Value value, int64_t at) {
    buffers.push_back({arenaBytes(value), at, at});
    return static_cast<int>(buffers.size()) - 1;
  }
  int bufferOf(Value v) {
    auto it = original.find(v);
    return it != original.end() ? it->second : -1;
  }
  void extend(int id, int64_t at) {
    if (id < 0)
      return;
    buffers[id].first = std::min(buffers[id].first, at);
    buffers[id].last = std::max(buffers[id].last, at);
  }

  /// Reads `op`'s operands (through `read`) and gives its results their
  /// buffers in `into`.
  template <typename Read>
  void define(Operation *op, Read read, DenseMap<Value, int> *into) {
    std::optional<unsigned> like = shapeOnlyOperand(op);
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (!like || i != *like)
        extend(read(v), isa<shard::SendOp>(op) ? kEnd : now);
    // A send's result is not read; a parameter or a constant (a tied
    // embedding) is sent from a copy, since the step updates it before the
    // send is waited for.
    if (isa<shard::SendOp>(op)) {
      if (read(op->getOperand(0)) < 0)
        extend(newBuffer(op->getOperand(0), now), kEnd);
      return;
    }
    auto alias = [&](Value result, Value of) {
      (*into)[result] = read(of);
      extend((*into)[result], now);
    };
    if (isa<ConstantOp>(op)) {
      base += arenaBytes(op->getResult(0));
      return;
    }
    if (isa<tensor::EmptyOp, shard::ShardingOp>(op))
      return;
    if (auto reshape = dyn_cast<ReshapeOp>(op))
      return alias(reshape.getResult(), reshape.getInput());
    if (auto mb = dyn_cast<MicroBatchOp>(op)) {
      auto type = cast<RankedTensorType>(mb.getInput().getType());
      if (llvm::all_of(type.getShape().take_front(mb.getAxis()),
                       [](int64_t d) { return d == 1; }))
        return alias(mb.getResult(), mb.getInput());
    }
    if (auto adamw = dyn_cast<AdamwOp>(op)) {
      Value of[] = {adamw.getParam(), adamw.getExpAvg(), adamw.getExpAvgSq()};
      for (auto [r, v] : llvm::zip(op->getResults(), of))
        alias(r, v);
      return;
    }
    if (auto sgd = dyn_cast<SgdOp>(op)) {
      alias(sgd->getResult(0), sgd.getParam());
      if (sgd.getMomentumBuffer())
        alias(sgd->getResult(1), sgd.getMomentumBuffer());
      return;
    }
    if (isa<AllReduceStartOp>(op)) {
      // A bucket's tensors are one arena range, live as one.
      SmallVector<int> bucket;
      for (Value v : op->getOperands())
        if (int id = read(v); id >= 0)
          bucket.push_back(id);
      buckets.push_back(std::move(bucket));
    }
    if (isa<AllReduceStartOp, AllReduceWaitOp>(op)) {
      for (auto [r, v] : llvm::zip(op->getResults(), op->getOperands()))
        alias(r, v);
      return;
    }
    // A reduce-scatter or all-gather bucket: send and receive staging from
    // its start to its wait (the emitter's), the tensors in flight in the
    // receive staging.
    if (isa<ReduceScatterStartOp, AllGatherStartOp>(op)) {
      auto staging = [&](ValueRange values) {
        double bytes = 0;
        for (Value v : values)
          bytes += bytesOf(v);
        buffers.push_back({alignedBytes(bytes), now, now});
        return static_cast<int>(buffers.size()) - 1;
      };
      sendStaging[op] = staging(op->getOperands());
      int recv = staging(op->getResults());
      for (Value r : op->getResults())
        (*into)[r] = recv;
      return;
    }
    if (isa<ReduceScatterWaitOp, AllGatherWaitOp>(op))
      extend(sendStaging.lookup(op->getOperand(0).getDefiningOp()), now);
    for (Value r : op->getResults())
      (*into)[r] = newBuffer(r, now);
  }

  func::FuncOp func;
  const LiveBytesOptions &options;
  std::vector<Buffer> buffers;
  std::vector<SmallVector<int>> buckets;
  /// The send staging of each reduce-scatter or all-gather bucket's start.
  DenseMap<Operation *, int> sendStaging;
  DenseMap<Value, int> original;
  int64_t base = 0, now = 0;
};

} // namespace

int64_t mlir::loom::alignedBytes(double bytes) {
  // A tensor past 1 PiB (no device holds one; the emitter refuses what int64
  // cannot address) counts as 1 PiB, so sums of many stay in int64.
  constexpr double kLargest = double(int64_t(1) << 50);
  int64_t whole = static_cast<int64_t>(std::min(bytes, kLargest));
  return (whole + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

int64_t mlir::loom::arenaBytes(Value v) { return alignedBytes(bytesOf(v)); }

DenseSet<Operation *>
mlir::loom::unreadOriginals(ArrayRef<RecomputeGroup> groups) {
  DenseSet<Operation *> unread;
  for (const RecomputeGroup &group : groups) {
    Operation *at = group.insertBefore;
    if (!at)
      continue;
    for (Operation *op : llvm::reverse(group.ops)) {
      bool read = false;
      for (Value r : op->getResults())
        for (Operation *u : r.getUsers())
          read |= !unread.contains(u) && u != at && !at->isBeforeInBlock(u);
      if (!read)
        unread.insert(op);
    }
  }
  return unread;
}

int64_t mlir::loom::simulateLiveBytes(func::FuncOp func,
                                      ArrayRef<RecomputeGroup> groups,
                                      const LiveBytesOptions &options) {
  return Simulation(func, options).run(groups);
}
