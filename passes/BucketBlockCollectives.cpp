//===- BucketBlockCollectives.cpp - Overlap ZeRO's collectives --*- C++ -*-===//
//
// After partition, ZeRO reduce-scatters each gradient where it is made and
// gathers each parameter where it is read, and the step waits for each at
// once. This pass groups them into buckets, as loom-bucket-all-reduces does
// the sums: a bucket of gradient reduce-scatters starts right after its
// last gradient is made and is waited for just before its first block is
// read; a bucket of all-gathers of values the step makes (ZeRO-1 and 2
// gather the updated blocks) likewise. A gather that recomputation placed
// late (loom.recomputed: its result is freed in between) never starts
// before the place it was given. The
// gathers of parameter shards (ZeRO-3, the step's arguments) are prefetched:
// taken in the order the step reads them, each bucket starts when the one
// before it is waited for, so a layer's parameters travel while the layer
// before computes.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/BucketSize.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

#include <limits>
#include <map>
#include <tuple>

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMBUCKETBLOCKCOLLECTIVESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// A reduce-scatter or all-gather that may join a bucket.
struct Member {
  Operation *collective;
  Operation *def = nullptr;      // makes the operand (null: an argument)
  Operation *firstUse = nullptr; // first reader of the result
  /// Where a start may read the operand: after its def, or, for a
  /// recomputed gather (`late`), where the collective is.
  Operation *ready = nullptr;
  bool late = false;
  int64_t dim = 0;
  int64_t bytes = 0; // of the whole tensor
};

/// Which buckets a member may share: one kind, one group of mesh axes, one
/// element type, and whether it gathers an argument (prefetched).
using GroupKey = std::tuple<bool, SmallVector<int16_t>, std::string, bool>;

bool before(Operation *a, Operation *b) { return a->isBeforeInBlock(b); }

std::optional<Member> memberOf(Operation *op) {
  Value in = op->getOperand(0), out = op->getResult(0);
  auto whole = dyn_cast<RankedTensorType>(
      isa<shard::ReduceScatterOp>(op) ? in.getType() : out.getType());
  if (!whole || !whole.hasStaticShape() || out.use_empty() ||
      !cast<RankedTensorType>(in.getType()).hasStaticShape())
    return std::nullopt;
  Member m{op, in.getDefiningOp()};
  if (auto rs = dyn_cast<shard::ReduceScatterOp>(op)) {
    if (rs.getReduction() != shard::ReductionKind::Sum ||
        !whole.getElementType().isF32() || !m.def)
      return std::nullopt;
    m.dim = rs.getScatterAxis().getSExtValue();
  } else {
    auto ag = cast<shard::AllGatherOp>(op);
    if (!whole.getElementType().isF32() && !whole.getElementType().isBF16())
      return std::nullopt;
    m.dim = ag.getGatherAxis().getSExtValue();
  }
  m.bytes = whole.getNumElements() *
            (whole.getElementType().getIntOrFloatBitWidth() / 8);
  for (Operation *user : out.getUsers()) {
    // A reader inside another op's region counts where that op stands.
    Operation *at = op->getBlock()->findAncestorOpInBlock(*user);
    if (!at)
      return std::nullopt;
    if (!m.firstUse || before(at, m.firstUse))
      m.firstUse = at;
  }
  m.late = op->hasAttr(LoomDialect::RecomputedAttrHelper::getNameStr());
  m.ready = m.late ? op : m.def;
  return m;
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

struct BucketBlockCollectivesPass
    : public loom::impl::LoomBucketBlockCollectivesPassBase<
          BucketBlockCollectivesPass> {
  using LoomBucketBlockCollectivesPassBase::LoomBucketBlockCollectivesPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (bucketBytes < 0 || func.getBody().empty())
      return;
    next = 0;
    std::map<GroupKey, SmallVector<Member>> groups = collect(func);
    if (groups.empty())
      return;
    SmallVector<SmallVector<int16_t>> axisGroups;
    for (const auto &entry : groups)
      axisGroups.push_back(std::get<1>(entry.first));
    FailureOr<int64_t> link =
        bucketBytes > 0
            ? FailureOr<int64_t>(int64_t(bucketBytes))
            : linkBucketBytes(func, axisGroups, cluster, getArgument());
    if (failed(link))
      return signalPassFailure();
    // One group at a time, each collected again: a bucket replaces
    // collectives that another group's members may read or be read by
    // (sequence parallelism gathers what it reduce-scatters).
    SmallVector<GroupKey> keys;
    for (const auto &entry : groups)
      keys.push_back(entry.first);
    for (const GroupKey &key : keys) {
      SmallVector<Member> members = std::move(collect(func)[key]);
      if (members.empty())
        continue;
      // The link's size, at most a quarter of the parameters a prefetch
      // gathers (so that buckets overlap, and hold a few layers, not the
      // model); not a share of the group's bytes otherwise: a step written
      // out in part for the memory estimate (written-micro-batches) must
      // get the buckets the whole step gets.
      int64_t total = std::numeric_limits<int64_t>::max();
      if (std::get<3>(key)) {
        DenseMap<Value, int64_t> shards;
        for (const Member &m : members)
          shards[m.collective->getOperand(0)] = m.bytes;
        total = 0;
        for (const auto &entry : shards)
          total += entry.second;
      }
      int64_t target = planner::bucketTarget(bucketBytes, *link, total);
      ArrayRef<int16_t> axes = std::get<1>(key);
      if (std::get<3>(key))
        prefetch(members, target, axes);
      else
        afterDefs(members, target, axes, std::get<0>(key));
    }
  }

  /// The candidates of `func` by group, each group in block order; sets
  /// `grid` and makes `next` follow every bucket id in use.
  std::map<GroupKey, SmallVector<Member>> collect(func::FuncOp func) {
    std::map<GroupKey, SmallVector<Member>> groups;
    for (Operation &op : func.getBody().front()) {
      // Bucket ids are the step's: after those of the sums' buckets.
      if (auto start = dyn_cast<AllReduceStartOp>(op))
        next = std::max<int64_t>(next, start.getBucket() + 1);
      bool scatter = isa<shard::ReduceScatterOp>(op);
      if (!scatter && !isa<shard::AllGatherOp>(op))
        continue;
      std::optional<Member> m = memberOf(&op);
      if (!m)
        continue;
      auto axes = scatter ? cast<shard::ReduceScatterOp>(op).getGridAxes()
                          : cast<shard::AllGatherOp>(op).getGridAxes();
      grid = scatter ? cast<shard::ReduceScatterOp>(op).getGridAttr()
                     : cast<shard::AllGatherOp>(op).getGridAttr();
      Type element =
          cast<RankedTensorType>(op.getResult(0).getType()).getElementType();
      groups[{scatter, SmallVector<int16_t>(axes), typeName(element), !m->def}]
          .push_back(*m);
    }
    return groups;
  }

  /// Buckets of values the step makes, in the order they are ready: each
  /// starts after its last operand is ready. A member read before the
  /// group's last operand is ready goes alone (in a bucket it would make
  /// the whole bucket wait early).
  void afterDefs(MutableArrayRef<Member> members, int64_t target,
                 ArrayRef<int16_t> axes, bool scatter) {
    llvm::stable_sort(members, [](const Member &a, const Member &b) {
      return before(a.ready, b.ready);
    });
    Operation *last = members.back().ready;
    SmallVector<Member> bucket;
    int64_t bytes = 0;
    auto flush = [&] {
      if (!bucket.empty())
        emitAfterDefs(bucket, axes, scatter);
      bucket.clear();
      bytes = 0;
    };
    for (const Member &m : members) {
      if (!before(last, m.firstUse)) {
        SmallVector<Member> alone{m};
        emitAfterDefs(alone, axes, scatter);
        continue;
      }
      bucket.push_back(m);
      bytes += m.bytes;
      if (bytes >= target)
        flush();
    }
    flush();
  }

  void emitAfterDefs(MutableArrayRef<Member> bucket, ArrayRef<int16_t> axes,
                     bool scatter) {
    const Member &last = bucket.back();
    Operation *firstUse = last.firstUse;
    for (Member &m : bucket)
      if (before(m.firstUse, firstUse))
        firstUse = m.firstUse;
    // The start goes right after the last operand is made, or where a
    // recomputed gather was.
    Operation *at = last.late ? last.ready : last.ready->getNextNode();
    // A lone collective whose result is read right after its operand is
    // ready (nothing but the collective between them) has nothing to
    // overlap.
    if (bucket.size() == 1) {
      Operation *after = at == last.collective ? at->getNextNode() : at;
      if (after == firstUse)
        return;
    }
    OpBuilder b(at);
    emit(b, bucket, firstUse, axes, scatter);
  }

  /// ZeRO-3's gathers of parameter shards, in the order the step reads
  /// them: the first bucket starts where its first gather was, each next
  /// one when the bucket before it is waited for, and each is waited for
  /// just before its first tensor is read.
  void prefetch(MutableArrayRef<Member> members, int64_t target,
                ArrayRef<int16_t> axes) {
    llvm::stable_sort(members, [](const Member &a, const Member &b) {
      return before(a.firstUse, b.firstUse);
    });
    SmallVector<SmallVector<Member>> buckets(1);
    int64_t bytes = 0;
    DenseSet<Value> held; // the shards the current bucket gathers
    for (const Member &m : members) {
      // A shard gathered again (ZeRO-3's backward gathers each parameter
      // anew, loom-regather-parameters) goes in a later bucket: in one
      // bucket, its whole copy would stay from the first use to the last.
      Value shard = m.collective->getOperand(0);
      if (bytes >= target || held.contains(shard)) {
        buckets.emplace_back();
        bytes = 0;
        held.clear();
      }
      held.insert(shard);
      buckets.back().push_back(m);
      bytes += m.bytes;
    }
    // The first bucket starts where the earliest of its gathers was.
    Operation *startAt = buckets.front().front().collective;
    for (const Member &m : buckets.front())
      if (before(m.collective, startAt))
        startAt = m.collective;
    OpBuilder b(startAt->getContext());
    for (MutableArrayRef<Member> bucket : buckets) {
      Operation *firstUse = bucket.front().firstUse;
      // A lone gather whose start would be right before its wait has
      // nothing to overlap.
      if (bucket.size() == 1 && startAt->getNextNode() == firstUse &&
          startAt == bucket.front().collective) {
        startAt = firstUse;
        continue;
      }
      b.setInsertionPoint(startAt);
      Operation *wait = emit(b, bucket, firstUse, axes, false);
      // The next bucket starts right after this one is waited for.
      startAt = wait->getNextNode();
    }
  }

  /// One start at `b`'s insertion point and one wait before `firstUse`
  /// replace the bucket's collectives; returns the wait.
  Operation *emit(OpBuilder &b, MutableArrayRef<Member> bucket,
                  Operation *firstUse, ArrayRef<int16_t> axes, bool scatter) {
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    SmallVector<int64_t> dims;
    for (Member &m : bucket) {
      inputs.push_back(m.collective->getOperand(0));
      types.push_back(m.collective->getResult(0).getType());
      dims.push_back(m.dim);
    }
    Location loc = bucket.front().collective->getLoc();
    auto create = [&](auto startTag, auto waitTag) -> Operation * {
      using StartOp = decltype(startTag);
      using WaitOp = decltype(waitTag);
      auto start = StartOp::create(b, loc, types, inputs, grid,
                                   b.getDenseI16ArrayAttr(axes),
                                   b.getDenseI64ArrayAttr(dims),
                                   b.getI64IntegerAttr(next));
      b.setInsertionPoint(firstUse);
      return WaitOp::create(b, loc, start->getResults(),
                            b.getI64IntegerAttr(next));
    };
    Operation *wait =
        scatter ? create(ReduceScatterStartOp(), ReduceScatterWaitOp())
                : create(AllGatherStartOp(), AllGatherWaitOp());
    ++next;
    for (auto [m, result] : llvm::zip(bucket, wait->getResults())) {
      m.collective->getResult(0).replaceAllUsesWith(result);
      m.collective->erase();
    }
    return wait;
  }

  int64_t next = 0;
  FlatSymbolRefAttr grid;
};

} // namespace
