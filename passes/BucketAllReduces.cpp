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
#include "passes/MeshUtils.h"
#include "passes/Passes.h"
#include "passes/planner/Cluster.h"
#include "passes/planner/CostModel.h"
#include "passes/planner/MeshTopology.h"

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
    FailureOr<int64_t> linkTarget =
        bucketBytes > 0 ? FailureOr<int64_t>(int64_t(bucketBytes))
                        : linkBytes(func, groups);
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
      int64_t target = bucketBytes > 0
                           ? *linkTarget
                           : std::max<int64_t>(
                                 kMinBucketBytes,
                                 std::min<int64_t>(*linkTarget, total / 4));
      SmallVector<Member> bucket;
      auto flush = [&] {
        if (!bucket.empty())
          emitBucket(bucket, grid, axes, next);
        bucket.clear();
      };
      // A sum read before the group's last operand is made (inside the
      // backward pass, like a position embedding's gradient before its
      // scatter) goes alone: in a bucket it would make the whole bucket
      // wait early. The others are read after every operand is made (by
      // the optimizer) and fill buckets in order.
      Operation *lastDef = members.back().def;
      int64_t bytes = 0;
      for (const Member &m : members) {
        if (before(m.firstUse, lastDef)) {
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

  static constexpr int64_t kMinBucketBytes = 64 * 1024;

  /// The bucket size the link of the data-parallel axis asks for
  /// (`planner::bucketBytes`) on the pass's cluster.
  FailureOr<int64_t>
  linkBytes(func::FuncOp func,
            const std::map<SmallVector<int16_t>, SmallVector<Member>> &groups) {
    auto module = func->getParentOfType<ModuleOp>();
    shard::GridOp mesh = module ? lookupMesh(module) : nullptr;
    std::string spec = cluster;
    llvm::Expected<Cluster> parsed = parseCluster(spec);
    if (!parsed) {
      func.emitError("loom-bucket-all-reduces: ")
          << llvm::toString(parsed.takeError());
      return failure();
    }
    if (!mesh)
      return planner::kMaxBucketBytes;
    SmallVector<planner::MeshAxis, 3> axes;
    for (int64_t size : mesh.getShape())
      axes.push_back({"", size});
    planner::MeshTopology topology(axes, parsed->devicesPerNode);
    // The largest bucket any group's link asks for.
    int64_t target = 0;
    for (const auto &entry : groups) {
      SmallVector<unsigned> ids(entry.first.begin(), entry.first.end());
      planner::AxisGroup group = topology.group(ids);
      target = std::max(target, planner::bucketBytes(
                                    group.size, parsed->link(group.level)));
    }
    return target;
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
