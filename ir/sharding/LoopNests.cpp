//===- LoopNests.cpp - The loop nest of each loom op ------------*- C++ -*-===//
//
// One function per op family. A nest lists its loops, then one map per
// operand and per result, in operand order (optional operands only when
// present). Splittable loops are the ones a device split leaves local:
// batch, rows, channels, heads, contraction dimensions (whose partial sums
// are all-reduced); windows, normalised axes and softmax axes are not.
//
//===----------------------------------------------------------------------===//

#include "ir/LoomOps.h"
#include "ir/sharding/LoopNest.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::sharding;
using shard::ReductionKind;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
int64_t rankOf(Value v) { return static_cast<int64_t>(shapeOf(v).size()); }

SmallVector<int64_t> parallelLoops(LoopNest &n, int64_t count) {
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < count; ++i)
    dims.push_back(n.parallel());
  return dims;
}

/// The loops of a tensor shaped `shape` broadcast NumPy-style to a result
/// shaped `resultShape` with loops `resultLoops`: a dimension equal to the
/// result's shares its loop; a broadcast one gets an unsplittable loop.
SmallVector<int64_t> broadcastDims(LoopNest &n, ArrayRef<int64_t> shape,
                                   ArrayRef<int64_t> resultShape,
                                   ArrayRef<int64_t> resultLoops) {
  int64_t offset = static_cast<int64_t>(resultShape.size()) -
                   static_cast<int64_t>(shape.size());
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    int64_t r = d + offset;
    bool same = r >= 0 && shape[d] == resultShape[r];
    dims.push_back(same ? resultLoops[r] : n.fixed());
  }
  return dims;
}

/// Every operand and result shaped alike, all loops parallel.
LoopNest elementwise(Operation *op) {
  LoopNest n;
  SmallVector<int64_t> dims = parallelLoops(n, rankOf(op->getResult(0)));
  for (unsigned i = 0; i < op->getNumOperands() + op->getNumResults(); ++i)
    n.map(dims);
  return n;
}

/// Operands broadcast against the result (binary ops, select, expand, ...).
LoopNest broadcasting(Operation *op) {
  LoopNest n;
  Value result = op->getResult(0);
  SmallVector<int64_t> dims = parallelLoops(n, rankOf(result));
  for (Value operand : op->getOperands())
    n.map(broadcastDims(n, shapeOf(operand), shapeOf(result), dims));
  n.map(dims);
  return n;
}

/// Like `elementwise`, but `axis` is a reduction no split may cut (softmax).
LoopNest alongAxis(Operation *op, int64_t axis) {
  LoopNest n;
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < rankOf(op->getResult(0)); ++d)
    dims.push_back(d == axis ? n.fixedReduction() : n.parallel());
  for (unsigned i = 0; i < op->getNumOperands() + op->getNumResults(); ++i)
    n.map(dims);
  return n;
}

/// `sum_to`: the input's loops; dimensions the result (and `like`) lack or
/// keep at size 1 are summed.
LoopNest sumTo(SumToOp op) {
  LoopNest n;
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
  int64_t offset = static_cast<int64_t>(in.size() - out.size());
  SmallVector<int64_t> inDims, outDims;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    int64_t r = d - offset;
    bool kept = r >= 0 && out[r] == in[d];
    inDims.push_back(kept ? n.parallel() : n.reduction(ReductionKind::Sum));
    if (r >= 0)
      outDims.push_back(kept ? inDims.back() : n.fixed());
  }
  n.map(inDims);
  n.map(outDims); // like
  n.map(outDims);
  return n;
}

template <typename ReduceOp>
LoopNest reduce(ReduceOp op, ReductionKind kind) {
  LoopNest n;
  ArrayRef<int64_t> axes = op.getAxes();
  SmallVector<int64_t> inDims, outDims;
  for (int64_t d = 0; d < rankOf(op.getInput()); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    inDims.push_back(reduced ? n.reduction(kind) : n.parallel());
    if (!reduced)
      outDims.push_back(inDims.back());
    else if (op.getKeepDims())
      outDims.push_back(n.fixed());
  }
  n.map(inDims);
  n.map(outDims);
  return n;
}

LoopNest transpose(TransposeOp op) {
  LoopNest n;
  ArrayRef<int64_t> perm = op.getPermutation();
  SmallVector<int64_t> outDims = parallelLoops(n, perm.size());
  SmallVector<int64_t> inDims(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inDims[p] = outDims[i];
  n.map(inDims);
  n.map(outDims);
  return n;
}

/// A reshape splits into groups of input and result dimensions with equal
/// products (`[B, S, H] -> [B*S, H]`: {B, S} -> {B*S}, {H} -> {H}). The
/// outermost dimensions of a group share a loop — a block split of one is a
/// block split of the other — and the inner ones are not splittable.
LoopNest reshape(ReshapeOp op) {
  LoopNest n;
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
  SmallVector<int64_t> inDims(in.size(), -1), outDims(out.size(), -1);
  size_t i = 0, j = 0;
  while (i < in.size() && j < out.size()) {
    if (in[i] == 1 || out[j] == 1) { // a unit dimension groups with nothing
      if (in[i] == 1)
        inDims[i++] = n.fixed();
      if (j < out.size() && out[j] == 1)
        outDims[j++] = n.fixed();
      continue;
    }
    int64_t loop = n.parallel();
    inDims[i] = outDims[j] = loop;
    int64_t pi = in[i++], pj = out[j++];
    while (pi != pj && pi > 0 && pj > 0) {
      if (pi < pj && i < in.size()) {
        pi *= in[i];
        inDims[i++] = n.fixed();
      } else if (pj < pi && j < out.size()) {
        pj *= out[j];
        outDims[j++] = n.fixed();
      } else {
        break;
      }
    }
    if (pi != pj) { // not a reshape of static shapes: nothing is splittable
      n = LoopNest();
      n.mapFixed(in.size());
      n.mapFixed(out.size());
      return n;
    }
  }
  for (int64_t &d : inDims)
    if (d < 0)
      d = n.fixed();
  for (int64_t &d : outDims)
    if (d < 0)
      d = n.fixed();
  n.map(inDims);
  n.map(outDims);
  return n;
}

/// Dimensions listed in `axes` get their own unsplittable loop per tensor;
/// the others are shared parallel loops (slice, slice_grad, concat).
LoopNest sharedExcept(Operation *op, ArrayRef<int64_t> axes,
                      ArrayRef<unsigned> alike = {}) {
  LoopNest n;
  int64_t rank = rankOf(op->getResult(0));
  SmallVector<int64_t> shared;
  for (int64_t d = 0; d < rank; ++d)
    shared.push_back(llvm::is_contained(axes, d) ? -1 : n.parallel());
  SmallVector<int64_t> alikeDims; // one fixed loop set for `alike` tensors
  auto mapOne = [&](unsigned index) {
    bool isAlike = llvm::is_contained(alike, index);
    SmallVector<int64_t> dims = shared;
    for (int64_t d = 0; d < rank; ++d) {
      if (dims[d] >= 0)
        continue;
      if (isAlike && !alikeDims.empty()) {
        dims[d] = alikeDims[d];
        continue;
      }
      dims[d] = n.fixed();
    }
    if (isAlike && alikeDims.empty())
      alikeDims = dims;
    n.map(dims);
  };
  for (unsigned i = 0; i < op->getNumOperands() + op->getNumResults(); ++i)
    mapOne(i);
  return n;
}

/// `gather`: data `[pre, A, post]`, indices `[I]` -> `[pre, I, post]`.
/// `gather_grad` sums over the index loops into `[pre, A, post]`.
LoopNest gather(Value data, Value indices, int64_t axis, bool grad) {
  LoopNest n;
  int64_t rank = rankOf(data);
  SmallVector<int64_t> pre = parallelLoops(n, axis);
  int64_t table = n.fixed();
  SmallVector<int64_t> idx;
  for (int64_t i = 0; i < rankOf(indices); ++i)
    idx.push_back(grad ? n.reduction(ReductionKind::Sum) : n.parallel());
  SmallVector<int64_t> post = parallelLoops(n, rank - axis - 1);
  SmallVector<int64_t> dataDims(pre), gathered(pre);
  dataDims.push_back(table);
  llvm::append_range(dataDims, post);
  llvm::append_range(gathered, idx);
  llvm::append_range(gathered, post);
  if (grad) { // grad, indices, like -> result
    n.map(gathered);
    n.map(idx);
    n.map(dataDims);
    n.map(dataDims);
  } else { // data, indices -> result
    n.map(dataDims);
    n.map(idx);
    n.map(gathered);
  }
  return n;
}

/// gather_elements (data, indices -> result) and its gradient (grad,
/// indices, like -> result): every dimension but `axis` is one loop of all
/// four; along `axis` the indices' loop (a sum for the gradient, whose
/// positions add into the same element) and the data's, which no split may
/// cut.
LoopNest gatherElements(Value data, int64_t axis, bool grad) {
  LoopNest n;
  int64_t rank = rankOf(data);
  SmallVector<int64_t> pre = parallelLoops(n, axis);
  int64_t table = n.fixed();
  int64_t j = grad ? n.reduction(ReductionKind::Sum) : n.parallel();
  SmallVector<int64_t> post = parallelLoops(n, rank - axis - 1);
  SmallVector<int64_t> dataDims(pre), indexDims(pre);
  dataDims.push_back(table);
  indexDims.push_back(j);
  llvm::append_range(dataDims, post);
  llvm::append_range(indexDims, post);
  if (grad) { // grad, indices, like -> result
    n.map(indexDims);
    n.map(indexDims);
    n.map(dataDims);
    n.map(dataDims);
  } else { // data, indices -> result
    n.map(dataDims);
    n.map(indexDims);
    n.map(indexDims);
  }
  return n;
}

/// scatter_nd (data, indices, updates -> result) and gather_nd (data,
/// indices -> result): the slice dimensions (data's from k on) are loops of
/// the data, the updates or result and the scatter's result; the indexed
/// dimensions and the index rows are loops no split may cut (a row writes
/// wherever its indices say).
LoopNest scatterNd(Value data, Value indices, bool gather) {
  LoopNest n;
  ArrayRef<int64_t> idx = shapeOf(indices);
  int64_t k = idx.back(), rank = rankOf(data);
  SmallVector<int64_t> indexed, rows, slice;
  for (int64_t i = 0; i < k; ++i)
    indexed.push_back(n.fixed());
  for (size_t i = 0; i + 1 < idx.size(); ++i)
    rows.push_back(n.fixed());
  int64_t tuple = n.fixed();
  for (int64_t i = k; i < rank; ++i)
    slice.push_back(n.parallel());
  SmallVector<int64_t> dataDims(indexed), rowDims(rows), indexDims(rows);
  llvm::append_range(dataDims, slice);
  llvm::append_range(rowDims, slice);
  indexDims.push_back(tuple);
  n.map(dataDims);
  n.map(indexDims);
  if (gather) { // data, indices -> result
    n.map(rowDims);
  } else { // data, indices, updates -> result
    n.map(rowDims);
    n.map(dataDims);
  }
  return n;
}

LoopNest matmul(MatmulOp op) {
  LoopNest n;
  ArrayRef<int64_t> lhs = shapeOf(op.getLhs()), rhs = shapeOf(op.getRhs());
  int64_t rl = lhs.size(), rr = rhs.size();
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
  // op(lhs) x op(rhs) on the operands viewed as matrices (leading dimensions
  // collapsed into rows).
  auto replicatedOnly = [&] {
    LoopNest f;
    f.mapFixed(rl);
    f.mapFixed(rr);
    f.mapFixed(rankOf(op.getResult()));
    return f;
  };
  if (rl < 2 || rr < 2)
    return replicatedOnly();
  if (!tl) {
    // [rows..., K] x op([K, N]) -> [rows..., N]
    if (rr != 2)
      return replicatedOnly();
    SmallVector<int64_t> lhsDims = parallelLoops(n, rl - 1);
    int64_t k = n.reduction(ReductionKind::Sum), cols = n.parallel();
    SmallVector<int64_t> outDims = lhsDims;
    lhsDims.push_back(k);
    outDims.push_back(cols);
    n.map(lhsDims);
    n.map(tr ? ArrayRef<int64_t>{cols, k} : ArrayRef<int64_t>{k, cols});
    n.map(outDims);
    return n;
  }
  // [rows..., M]^T x [rows..., N] -> [M, N]: the rows contract (a weight
  // gradient); they split when both operands' rows have the same dimensions.
  bool sameRows = !tr && lhs.drop_back() == rhs.drop_back();
  bool matrixRows = tr && rl == 2 && rr == 2;
  if (!sameRows && !matrixRows)
    return replicatedOnly();
  SmallVector<int64_t> rows;
  for (int64_t d = 0; d + 1 < rl; ++d)
    rows.push_back(n.reduction(ReductionKind::Sum));
  int64_t m = n.parallel(), cols = n.parallel();
  SmallVector<int64_t> lhsDims = rows, rhsDims = rows;
  lhsDims.push_back(m);
  if (sameRows)
    rhsDims.push_back(cols);
  else // [K, M]^T x [N, K]^T
    rhsDims = {cols, rows[0]};
  n.map(lhsDims);
  n.map(rhsDims);
  n.map({m, cols});
  return n;
}

LoopNest linear(LinearOp op) {
  LoopNest n;
  int64_t rank = rankOf(op.getInput());
  SmallVector<int64_t> inDims = parallelLoops(n, rank - 1);
  int64_t k = n.reduction(ReductionKind::Sum), cols = n.parallel();
  SmallVector<int64_t> outDims = inDims;
  inDims.push_back(k);
  outDims.push_back(cols);
  n.map(inDims);
  n.map(op.getTransposeWeight() ? ArrayRef<int64_t>{cols, k}
                                : ArrayRef<int64_t>{k, cols});
  if (op.getBias())
    n.map({cols});
  n.map(outDims);
  return n;
}

LoopNest batchMatmul(BatchMatmulOp op) {
  LoopNest n;
  ArrayRef<int64_t> out = shapeOf(op.getResult());
  int64_t batch = static_cast<int64_t>(out.size()) - 2;
  SmallVector<int64_t> outDims = parallelLoops(n, batch);
  int64_t m = n.parallel(), cols = n.parallel();
  int64_t k = n.reduction(ReductionKind::Sum);
  auto operandDims = [&](Value v, bool transposed, int64_t rowLoop,
                         int64_t colLoop) {
    ArrayRef<int64_t> s = shapeOf(v);
    SmallVector<int64_t> dims = broadcastDims(
        n, s.drop_back(2), ArrayRef<int64_t>(out).drop_back(2), outDims);
    dims.push_back(transposed ? colLoop : rowLoop);
    dims.push_back(transposed ? rowLoop : colLoop);
    return dims;
  };
  n.map(operandDims(op.getLhs(), op.getTransposeLhs(), m, k));
  n.map(operandDims(op.getRhs(), op.getTransposeRhs(), k, cols));
  outDims.push_back(m);
  outDims.push_back(cols);
  n.map(outDims);
  return n;
}

/// Layer / RMS normalisation: the rows split, the normalised dimensions
/// do not. In the backward, the rows are summed into the scale (and bias)
/// gradients.
LoopNest normalization(Operation *op, int64_t axis, bool backward) {
  LoopNest n;
  int64_t rank = rankOf(op->getOperand(0));
  SmallVector<int64_t> dims, normalised;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      dims.push_back(backward ? n.reduction(ReductionKind::Sum) : n.parallel());
    else
      normalised.push_back(dims.emplace_back(n.fixedReduction()));
  }
  for (Value v : op->getOperands())
    n.map(rankOf(v) == rank ? ArrayRef<int64_t>(dims) : normalised);
  for (Value v : op->getResults())
    n.map(rankOf(v) == rank ? ArrayRef<int64_t>(dims) : normalised);
  return n;
}

/// Batch normalisation of `[N, C, spatial...]`: samples and channels split
/// and each rank normalises with its own block's statistics (PyTorch DDP
/// without SyncBatchNorm: `loomc --local-batchnorm`; by default
/// loom-sync-batch-norm writes the op out first, so the statistics are the
/// global batch's); the spatial dimensions do not split.
LoopNest batchNorm(Operation *op, bool backward) {
  LoopNest n;
  int64_t rank = rankOf(op->getOperand(0));
  SmallVector<int64_t> dims;
  dims.push_back(backward ? n.reduction(ReductionKind::Sum) : n.parallel());
  int64_t channels = dims.emplace_back(n.parallel());
  for (int64_t d = 2; d < rank; ++d)
    dims.push_back(n.fixedReduction());
  for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
    n.map(rankOf(v) == rank ? ArrayRef<int64_t>(dims)
                            : ArrayRef<int64_t>{channels});
  return n;
}

/// NCHW convolutions: the batch splits; with one group the output channels
/// split and the input channels contract; windows do not split.
LoopNest conv(Operation *op, int64_t groups, bool gradInput, bool gradFilter) {
  LoopNest n;
  bool oneGroup = groups == 1;
  int64_t batch = gradFilter ? n.reduction(ReductionKind::Sum) : n.parallel();
  int64_t inC = !oneGroup ? n.fixed()
                : gradInput || gradFilter ? n.parallel()
                                          : n.reduction(ReductionKind::Sum);
  int64_t outC = !oneGroup   ? n.fixed()
                 : gradInput ? n.reduction(ReductionKind::Sum)
                             : n.parallel();
  int64_t filterC = oneGroup ? inC : n.fixed();
  auto image = [&](int64_t c) {
    return SmallVector<int64_t>{batch, c, n.fixed(), n.fixed()};
  };
  SmallVector<int64_t> input = image(inC), output = image(outC);
  SmallVector<int64_t> filter{outC, filterC, n.fixed(), n.fixed()};
  if (gradInput) { // grad, filter, like -> result
    n.map(output);
    n.map(filter);
    n.map(input);
    n.map(input);
  } else if (gradFilter) { // grad, input, like -> result
    n.map(output);
    n.map(input);
    n.map(filter);
    n.map(filter);
  } else { // input, filter -> result
    n.map(input);
    n.map(filter);
    n.map(output);
  }
  return n;
}

/// `[N, C, H, W]` pooling: batch and channels split, windows do not.
LoopNest pool(Operation *op) {
  LoopNest n;
  int64_t batch = n.parallel(), channels = n.parallel();
  SmallVector<int64_t> input{batch, channels, n.fixed(), n.fixed()};
  SmallVector<int64_t> output{batch, channels, n.fixed(), n.fixed()};
  if (op->getNumOperands() == 2) { // max_pool2d_grad: grad, input -> result
    n.map(output);
    n.map(input);
    n.map(input);
  } else {
    n.map(input);
    n.map(output);
  }
  return n;
}

/// Attention over `[..., S, D]`: batch and heads split, and so do the
/// queries of a non-causal forward; keys and head dimensions do not.
LoopNest attention(Operation *op, bool causal, bool backward) {
  LoopNest n;
  Value q = op->getOperand(backward ? 1 : 0);
  int64_t lead = rankOf(q) - 2;
  SmallVector<int64_t> dims = parallelLoops(n, lead);
  int64_t sq = causal || backward ? n.fixed() : n.parallel();
  int64_t sk = n.fixedReduction(), d = n.fixedReduction();
  int64_t dv = backward ? n.fixed() : n.parallel();
  auto with = [&](int64_t s, int64_t h) {
    SmallVector<int64_t> t = dims;
    t.push_back(s);
    t.push_back(h);
    return t;
  };
  if (backward) // grad, q, k, v -> dq, dk, dv
    for (auto [s, h] : {std::pair{sq, dv}, {sq, d}, {sk, d}, {sk, dv},
                        {sq, d}, {sk, d}, {sk, dv}})
      n.map(with(s, h));
  else // q, k, v -> out
    for (auto [s, h] : {std::pair{sq, d}, {sk, d}, {sk, dv}, {sq, dv}})
      n.map(with(s, h));
  return n;
}

/// Losses: the rows (every element for mse) are summed; cross-entropy's
/// classes do not split.
LoopNest loss(Operation *op, bool perClass, bool backward) {
  LoopNest n;
  Value x = op->getOperand(0);
  int64_t rank = rankOf(x);
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (perClass && d == rank - 1)
      dims.push_back(n.fixedReduction());
    else
      dims.push_back(backward ? n.parallel() : n.reduction(ReductionKind::Sum));
  }
  n.map(dims);
  n.map(perClass ? ArrayRef<int64_t>(dims).drop_back() : ArrayRef<int64_t>(dims));
  n.map(backward ? ArrayRef<int64_t>(dims) : ArrayRef<int64_t>{});
  return n;
}

} // namespace

void LoopNest::mapFixed(int64_t rank) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(fixed());
  map(dims);
}

SmallVector<utils::IteratorType> LoopNest::iteratorTypes() const {
  return llvm::map_to_vector(loops, [](const Loop &l) { return l.type; });
}

SmallVector<ReductionKind> LoopNest::reductionKinds() const {
  SmallVector<ReductionKind> kinds;
  for (const Loop &l : loops)
    if (l.type == utils::IteratorType::reduction)
      kinds.push_back(l.kind);
  return kinds;
}

SmallVector<AffineMap> LoopNest::affineMaps(MLIRContext *ctx) const {
  return llvm::map_to_vector(maps, [&](const SmallVector<int64_t> &dims) {
    SmallVector<AffineExpr> exprs;
    for (int64_t d : dims)
      exprs.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(loops.size(), 0, exprs, ctx);
  });
}

LoopNest mlir::loom::sharding::loopNestOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, LoopNest>(op)
      .Case<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, EqualOp, LessOp,
            LessEqualOp, SelectOp,
            ExpandOp, BroadcastLikeOp>(
          [](Operation *op) { return broadcasting(op); })
      .Case([](SumToOp op) { return sumTo(op); })
      .Case([](ReduceSumOp op) { return reduce(op, ReductionKind::Sum); })
      .Case([](ReduceMeanOp op) { return reduce(op, ReductionKind::Average); })
      .Case([](ReduceMaxOp op) { return reduce(op, ReductionKind::Max); })
      .Case([](SoftmaxOp op) { return alongAxis(op, op.getAxis()); })
      .Case([](SoftmaxGradOp op) { return alongAxis(op, op.getAxis()); })
      .Case([](TransposeOp op) { return transpose(op); })
      .Case([](ReshapeOp op) { return reshape(op); })
      .Case([](SliceOp op) { return sharedExcept(op, op.getAxes()); })
      .Case([](SliceGradOp op) { return sharedExcept(op, op.getAxes(), {1, 2}); })
      .Case([](ConcatOp op) {
        int64_t axis = op.getAxis();
        return sharedExcept(op, ArrayRef<int64_t>(axis));
      })
      .Case([](GatherOp op) {
        return gather(op.getData(), op.getIndices(), op.getAxis(), false);
      })
      .Case([](GatherGradOp op) {
        return gather(op.getLike(), op.getIndices(), op.getAxis(), true);
      })
      .Case([](ScatterNdOp op) {
        return scatterNd(op.getData(), op.getIndices(), false);
      })
      .Case([](GatherNdOp op) {
        return scatterNd(op.getData(), op.getIndices(), true);
      })
      .Case([](GatherElementsOp op) {
        return gatherElements(op.getData(), op.getAxis(), false);
      })
      .Case([](GatherElementsGradOp op) {
        return gatherElements(op.getLike(), op.getAxis(), true);
      })
      .Case([](MatmulOp op) { return matmul(op); })
      .Case([](LinearOp op) { return linear(op); })
      .Case([](BatchMatmulOp op) { return batchMatmul(op); })
      .Case<LayerNormOp, RmsNormOp>([](auto op) {
        return normalization(op, op.getAxis(), false);
      })
      .Case<LayerNormGradOp, RmsNormGradOp>([](auto op) {
        return normalization(op, op.getAxis(), true);
      })
      .Case([](BatchNormOp op) { return batchNorm(op, false); })
      .Case([](BatchNormGradOp op) { return batchNorm(op, true); })
      .Case([](Conv2dOp op) { return conv(op, op.getGroups(), false, false); })
      .Case([](Conv2dGradInputOp op) {
        return conv(op, op.getGroups(), true, false);
      })
      .Case([](Conv2dGradFilterOp op) {
        return conv(op, op.getGroups(), false, true);
      })
      .Case<MaxPool2dOp, MaxPool2dGradOp>([](Operation *op) { return pool(op); })
      .Case([](AttentionOp op) {
        return attention(op, op.getCausal(), false);
      })
      .Case([](AttentionGradOp op) {
        return attention(op, op.getCausal(), true);
      })
      .Case([](CrossEntropyOp op) { return loss(op, true, false); })
      .Case([](CrossEntropyGradOp op) { return loss(op, true, true); })
      .Case([](MseOp op) { return loss(op, false, false); })
      .Case([](MseGradOp op) { return loss(op, false, true); })
      // Every operand and result shaped alike.
      .Case<ConstantOp, ReluOp, TanhOp, SigmoidOp, ScaleOp, ReluGradOp,
            TanhGradOp, SigmoidGradOp, ExpOp, LogOp, SqrtOp, RsqrtOp, NegOp,
            ReciprocalOp, ErfOp, SinOp, CosOp, RoundF16Op, TruncOp, GeluOp, GeluGradOp, ConvertOp, SgdOp,
            AdamwOp>([](Operation *op) { return elementwise(op); })
      .Default([](Operation *op) -> LoopNest {
        llvm_unreachable("a loom op without a loop nest has no sharding model");
      });
}
