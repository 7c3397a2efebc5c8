//===- SplitFusedProjections.cpp - q, k and v as blocks of one weight -*- C++ -*-===//
//
// Exporters write attention's projections as one linear of 3·d outputs and
// a Split (GPT-2's `c_attn`, `nn.Linear(d, 3d)` + `.split`). Split over
// `tp` as it is, each rank would hold a contiguous third of the fused
// outputs — not its heads of q, k and v — and the Split's slices would need
// the fused dimension whole. So, before the training step is built, such a
// linear becomes one linear per block, and its weight (and bias) argument
// the same bytes viewed with the blocks as a dimension of their own:
// `[K, 3d]` as `[K, 3, d]` (`[3d, K]` as `[3, d, K]` for a transposed
// weight, the bias `[3d]` as `[3, d]`). Each block's linear reads its block
// through a slice and a reshape, so `d` can split over `tp` while the
// blocks stay whole: every rank holds its piece of q, of k and of v.
//
// `loom.fused_blocks = array<i64: D, B>` on the argument records that ONNX
// dimension D (of the initializer) is the view's dimensions D (B blocks)
// and D + 1; the plan describes the buffer in the initializer's shape with
// a several-block split (docs/plan-format.md, "Sharded buffers").
//
//===----------------------------------------------------------------------===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSPLITFUSEDPROJECTIONSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

/// A parameter argument that only `user` reads, or null.
BlockArgument soleParameter(Value v, Operation *user, func::FuncOp func) {
  auto arg = dyn_cast_or_null<BlockArgument>(v);
  if (!arg || arg.getOwner() != &func.getBody().front() ||
      !func.getArgAttr(arg.getArgNumber(), attr::kParam) ||
      func.getArgAttr(arg.getArgNumber(), attr::kFusedBlocks) ||
      !arg.hasOneUse() || *arg.user_begin() != user)
    return {};
  return arg;
}

/// Whether a tied copy of the module names `param` (its layout is the
/// initializer's; leave it alone).
bool isTied(ModuleOp module, StringAttr param) {
  auto tied = module ? module->getAttrOfType<DictionaryAttr>(attr::kTied)
                     : DictionaryAttr();
  if (!tied)
    return false;
  return llvm::any_of(tied, [&](NamedAttribute entry) {
    auto tie = dyn_cast<DictionaryAttr>(entry.getValue());
    return tie && tie.get("of") == param;
  });
}

struct Match {
  LinearOp linear;
  SmallVector<ReshapeOp> chain; // reshapes from the linear to the slices
  SmallVector<SliceOp> slices;  // one per block, in block order
};

/// The fused linear `op` feeds, through reshapes that keep its last
/// dimension, only slices that cut that dimension into equal blocks.
std::optional<Match> match(LinearOp op) {
  Match m{op, {}, {}};
  Value v = op.getResult();
  auto type = cast<RankedTensorType>(v.getType());
  int64_t n = type.getDimSize(type.getRank() - 1);
  while (v.hasOneUse()) {
    auto reshape = dyn_cast<ReshapeOp>(*v.user_begin());
    if (!reshape)
      break;
    auto out = cast<RankedTensorType>(reshape.getType());
    if (!out.hasStaticShape() || out.getDimSize(out.getRank() - 1) != n)
      return std::nullopt;
    m.chain.push_back(reshape);
    v = reshape.getResult();
  }
  int64_t last = cast<RankedTensorType>(v.getType()).getRank() - 1;
  std::map<int64_t, SliceOp> byStart;
  for (Operation *user : v.getUsers()) {
    auto slice = dyn_cast<SliceOp>(user);
    if (!slice || slice.getAxes().size() != 1)
      return std::nullopt;
    int64_t axis = slice.getAxes()[0];
    if (axis < 0)
      axis += last + 1;
    if (axis != last || slice.getSteps()[0] != 1 || slice.getStarts()[0] < 0 ||
        slice.getEnds()[0] > n)
      return std::nullopt;
    if (!byStart.emplace(slice.getStarts()[0], slice).second)
      return std::nullopt;
  }
  if (byStart.size() < 2 || n % byStart.size() != 0)
    return std::nullopt;
  int64_t block = n / byStart.size(), next = 0;
  for (auto &[start, slice] : byStart) {
    if (start != next || slice.getEnds()[0] != start + block)
      return std::nullopt;
    m.slices.push_back(slice);
    next += block;
  }
  return m;
}

RankedTensorType withLast(RankedTensorType type, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = size;
  return type.clone(shape);
}

/// `shape` with dimension `dim` cut into `blocks` x (size / blocks).
RankedTensorType blocked(RankedTensorType type, int64_t dim, int64_t blocks) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= blocks;
  shape.insert(shape.begin() + dim, blocks);
  return type.clone(shape);
}

/// Block `j` of the view `value` (blocks along `dim`), without the block
/// dimension.
Value blockOf(OpBuilder &b, Location loc, Value value, int64_t dim, int64_t j) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> sliced(type.getShape());
  sliced[dim] = 1;
  Value s = SliceOp::create(b, loc, type.clone(sliced), value,
                            b.getDenseI64ArrayAttr({dim}),
                            b.getDenseI64ArrayAttr({j}),
                            b.getDenseI64ArrayAttr({j + 1}),
                            b.getDenseI64ArrayAttr({1}));
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + dim);
  return ReshapeOp::create(b, loc, type.clone(shape), s,
                           b.getDenseI64ArrayAttr(shape));
}

void rewrite(Match &m, func::FuncOp func) {
  LinearOp op = m.linear;
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t blocks = m.slices.size();
  auto retype = [&](BlockArgument arg, int64_t dim) {
    auto type = cast<RankedTensorType>(arg.getType());
    arg.setType(blocked(type, dim, blocks));
    func.setArgAttr(arg.getArgNumber(), attr::kFusedBlocks,
                    b.getDenseI64ArrayAttr({dim, blocks}));
  };
  auto weight = cast<BlockArgument>(op.getWeight());
  int64_t weightDim = op.getTransposeWeight() ? 0 : 1;
  retype(weight, weightDim);
  BlockArgument bias;
  if (op.getBias()) {
    bias = cast<BlockArgument>(op.getBias());
    retype(bias, 0);
  }
  auto resultType = cast<RankedTensorType>(op.getType());
  int64_t blockSize = resultType.getShape().back() / blocks;
  for (auto [j, slice] : llvm::enumerate(m.slices)) {
    b.setInsertionPoint(op);
    Value w = blockOf(b, loc, weight, weightDim, j);
    Value bj = bias ? blockOf(b, loc, bias, 0, j) : Value();
    Value y = LinearOp::create(b, loc, withLast(resultType, blockSize),
                               op.getInput(), w, bj,
                               op.getTransposeWeightAttr());
    for (ReshapeOp reshape : m.chain) {
      auto type = withLast(cast<RankedTensorType>(reshape.getType()), blockSize);
      y = ReshapeOp::create(b, reshape.getLoc(), type, y,
                            b.getDenseI64ArrayAttr(type.getShape()));
    }
    slice.getResult().replaceAllUsesWith(y);
  }
  for (SliceOp slice : m.slices)
    slice.erase();
  for (ReshapeOp reshape : llvm::reverse(m.chain))
    reshape.erase();
  op.erase();
}

struct SplitFusedProjectionsPass
    : public loom::impl::LoomSplitFusedProjectionsPassBase<
          SplitFusedProjectionsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isEntryFunction(func))
      return;
    auto module = func->getParentOfType<ModuleOp>();
    SmallVector<Match> matches;
    func.walk([&](LinearOp op) {
      BlockArgument weight = soleParameter(op.getWeight(), op, func);
      if (!weight ||
          isTied(module, func.getArgAttrOfType<StringAttr>(
                             weight.getArgNumber(), attr::kParam)))
        return;
      if (op.getBias() && !soleParameter(op.getBias(), op, func))
        return;
      if (std::optional<Match> m = match(op))
        matches.push_back(std::move(*m));
    });
    for (Match &m : matches)
      rewrite(m, func);
    // The arguments changed type.
    SmallVector<Type> inputs(func.getBody().front().getArgumentTypes());
    func.setFunctionType(
        FunctionType::get(&getContext(), inputs, func.getResultTypes()));
  }
};

} // namespace
