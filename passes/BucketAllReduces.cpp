//===- BucketAllReduces.cpp - Overlap sums with the backward pass -*- C++ -*-===//
//
// After partition each gradient is all-reduced where it is made and waited
// for at once. This pass groups the sums over the same mesh axes, in the
// order their operands are made, into buckets of about `bucket-bytes`: one
// `loom.all_reduce_start` per bucket right after its last operand is made,
// one `loom.all_reduce_wait` just before the first use of any of its sums.
// The ops in between (the rest of the backward pass) run while the bucket is
// reduced. The plan places a bucket's tensors side by side, so the runtime
// reduces one arena range (emit/PlanEmitter.cpp).
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "passes/BucketSize.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

#include <map>

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMBUCKETALLREDUCESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// A sum that may join a bucket: its operand is made by an op of its own
/// (not a view, a constant or an argument, whose bytes the plan places
/// elsewhere) and read by nothing else, since the bucket reduces it in
/// place.
struct Member {
  shard::AllReduceOp sum;
  Operation *def = nullptr;      // makes the operand
  Operation *firstUse = nullptr; // first reader of the sum
  int64_t bytes = 0;
};

std::optional<Member> memberOf(shard::AllReduceOp ar) {
  auto type = dyn_cast<RankedTensorType>(ar.getType());
  Value in = ar.getInput();
  Operation *def = in.getDefiningOp();
  if (ar.getReduction() != shard::ReductionKind::Sum || !type ||
      !type.hasStaticShape() || !type.getElementType().isF32() || !def ||
      isa<ReshapeOp, ConstantOp, shard::AllReduceOp>(def) || !in.hasOneUse() ||
      ar.getResult().use_empty())
    return std::nullopt;
  Member m{ar, def, nullptr, type.getNumElements() * 4};
  for (Operation *user : ar.getResult().getUsers())
    if (!m.firstUse || user->isBeforeInBlock(m.firstUse))
      m.firstUse = user;
  return m;
}

/// Whether `a` comes before `b` in their block.
bool before(Operation *a, Operation *b) { return a->isBeforeInBlock(b); }

struct BucketAllReducesPass
    : public loom::impl::LoomBucketAllReducesPassBase<BucketAllReducesPass> {
  using LoomBucketAllReducesPassBase::LoomBucketAllReducesPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (bucketBytes < 0 || func.getBody().empty())
      return;
    Block &body = func.getBody().front();
    // Candidates per mesh group, in the order their operands are made.
    std::map<SmallVector<int16_t>, SmallVector<Member>> groups;
    FlatSymbolRefAttr grid;
    for (Operation &op : body)
      if (auto ar = dyn_cast<shard::AllReduceOp>(op))
        if (std::optional<Member> m = memberOf(ar)) {
          groups[SmallVector<int16_t>(ar.getGridAxes())].push_back(*m);
          grid = ar.getGridAttr();
        }
    if (groups.empty())
      return;
    SmallVector<SmallVector<int16_t>> axisGroups;
    for (const auto &entry : groups)
      axisGroups.push_back(entry.first);
    FailureOr<int64_t> linkTarget =
        bucketBytes > 0 ? FailureOr<int64_t>(int64_t(bucketBytes))
                        : linkBucketBytes(func, axisGroups, cluster,
                                          getArgument());
    if (failed(linkTarget))
      return signalPassFailure();
    int64_t next = 0;
    for (auto &[axes, members] : groups) {
      llvm::stable_sort(members, [](const Member &a, const Member &b) {
        return before(a.def, b.def);
      });
      int64_t total = 0;
      for (const Member &m : members)
        total += m.bytes;
      // Enough bytes to reach the link's bandwidth, and at least four
      // buckets, so that most of them overlap the backward pass.
      int64_t target = planner::bucketTarget(bucketBytes, *linkTarget, total);
      SmallVector<Member> bucket;
      auto flush = [&] {
        if (!bucket.empty())
          emitBucket(bucket, grid, axes, next);
        bucket.clear();
      };
      // A sum read before the group's last operand is made, or by the op
      // that makes it (inside the backward pass, like a position
      // embedding's gradient before its scatter), goes alone: in a bucket
      // it would make the whole bucket wait early. The others are read
      // after every operand is made (by the optimizer) and fill buckets in
      // order.
      Operation *lastDef = members.back().def;
      int64_t bytes = 0;
      for (const Member &m : members) {
        if (!before(lastDef, m.firstUse)) {
          SmallVector<Member> alone{m};
          emitBucket(alone, grid, axes, next);
          continue;
        }
        bucket.push_back(m);
        bytes += m.bytes;
        if (bytes >= target) {
          flush();
          bytes = 0;
        }
      }
      flush();
    }
  }

  /// Replaces the sums of `bucket` by one start after its last operand is
  /// made and one wait before its first sum is read; a lone sum read right
  /// after it is made stays as it is.
  void emitBucket(MutableArrayRef<Member> bucket, FlatSymbolRefAttr grid,
                  ArrayRef<int16_t> axes, int64_t &next) {
    Operation *lastDef = bucket.front().def, *firstUse = bucket.front().firstUse;
    for (Member &m : bucket) {
      if (before(lastDef, m.def))
        lastDef = m.def;
      if (before(m.firstUse, firstUse))
        firstUse = m.firstUse;
    }
    bool nothingBetween = true;
    for (Operation *op = lastDef->getNextNode(); op && op != firstUse;
         op = op->getNextNode())
      if (!llvm::any_of(bucket, [&](Member &m) {
            return m.sum.getOperation() == op;
          }))
        nothingBetween = false;
    if (bucket.size() == 1 && nothingBetween)
      return;
    SmallVector<Value> inputs;
    for (Member &m : bucket)
      inputs.push_back(m.sum.getInput());
    OpBuilder b(lastDef->getContext());
    b.setInsertionPointAfter(lastDef);
    Location loc = bucket.front().sum.getLoc();
    auto start = AllReduceStartOp::create(b, loc, inputs, grid,
                                          b.getDenseI16ArrayAttr(axes),
                                          b.getI64IntegerAttr(next));
    b.setInsertionPoint(firstUse);
    auto wait = AllReduceWaitOp::create(b, loc, start.getInFlight(),
                                        b.getI64IntegerAttr(next));
    ++next;
    for (auto [m, sum] : llvm::zip(bucket, wait.getResults())) {
      m.sum.getResult().replaceAllUsesWith(sum);
      m.sum.erase();
    }
  }
};

} // namespace
