//===- BatchMatmul.cpp - batch_matmul and linear through sgemm --*- C++ -*-===//
//
// `batch_matmul` runs one GEMM per (broadcast) batch entry: small GEMMs run
// on OpenMP threads over the batch, big ones one after the other, each
// split over the threads by `sgemm`. `linear` is one GEMM over all rows with the bias
// broadcast into the output first (beta = 1).
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/Broadcast.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cstring>

namespace loom::runtime::cpu {

namespace {

struct BatchGemm {
  bool ta, tb;
  int64_t m, n, k;
  int64_t lda, ldb;
  std::vector<int64_t> aBatch, bBatch, outBatch;
};

StatusOr<BatchGemm> describeBatch(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(bool ta, flagAttr(op, "transpose_lhs"));
  LOOM_ASSIGN_OR_RETURN(bool tb, flagAttr(op, "transpose_rhs"));
  std::vector<int64_t> as = op.inShape(0), bs = op.inShape(1);
  if (as.size() < 2 || bs.size() < 2)
    return makeError("operands must have rank >= 2, got %s and %s",
                     shapeToString(as).c_str(), shapeToString(bs).c_str());
  BatchGemm g;
  g.ta = ta;
  g.tb = tb;
  int64_t ar = as[as.size() - 2], ac = as.back();
  int64_t br = bs[bs.size() - 2], bc = bs.back();
  g.m = ta ? ac : ar;
  g.k = ta ? ar : ac;
  int64_t kb = tb ? bc : br;
  g.n = tb ? br : bc;
  g.lda = ac;
  g.ldb = bc;
  if (g.k != kb)
    return makeError("contraction sizes differ: op(lhs) is %lldx%lld, "
                     "op(rhs) is %lldx%lld",
                     (long long)g.m, (long long)g.k, (long long)kb,
                     (long long)g.n);
  g.aBatch.assign(as.begin(), as.end() - 2);
  g.bBatch.assign(bs.begin(), bs.end() - 2);
  size_t rank = std::max(g.aBatch.size(), g.bBatch.size());
  g.outBatch.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da =
        i + g.aBatch.size() >= rank ? g.aBatch[i + g.aBatch.size() - rank] : 1;
    int64_t db =
        i + g.bBatch.size() >= rank ? g.bBatch[i + g.bBatch.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return makeError("batch dimensions %s and %s do not broadcast",
                       shapeToString(g.aBatch).c_str(),
                       shapeToString(g.bBatch).c_str());
    g.outBatch[i] = da == 1 ? db : da;
  }
  return g;
}

/// Matrix offsets (in matrices) of every output batch entry in an operand
/// with batch shape `from`.
std::vector<int64_t> batchOffsets(const std::vector<int64_t> &from,
                                  const std::vector<int64_t> &to) {
  int64_t count = numElements(to);
  std::vector<int64_t> offsets(count, 0);
  if (to.empty())
    return offsets;
  std::vector<int64_t> strides = broadcastStrides(from, to);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i, off = 0;
    for (int d = static_cast<int>(to.size()) - 1; d >= 0; --d) {
      off += (rem % to[d]) * strides[d];
      rem /= to[d];
    }
    offsets[i] = off;
  }
  return offsets;
}

} // namespace

Status verifyBatchMatmul(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  LOOM_ASSIGN_OR_RETURN(BatchGemm g, describeBatch(op));
  std::vector<int64_t> want = g.outBatch;
  want.push_back(g.m);
  want.push_back(g.n);
  return expectOutShape(op, 0, want, "output");
}

StatusOr<KernelFn> bindBatchMatmul(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(BatchGemm g, describeBatch(op));
  const float *a = ctx.f32(op.inputs[0]), *b = ctx.f32(op.inputs[1]);
  float *c = ctx.f32(op.outputs[0]);
  int64_t batches = numElements(g.outBatch);
  if (batches == 0 || g.m == 0 || g.n == 0)
    return noopKernel();
  int64_t aMat = g.m * g.k, bMat = g.k * g.n, cMat = g.m * g.n;
  // A shared right-hand side and a full left-hand side: one tall GEMM.
  if (numElements(g.bBatch) == 1 && numElements(g.aBatch) == batches && !g.ta)
    return KernelFn([=](const StepContext &) {
      sgemm(false, g.tb, batches * g.m, g.n, g.k, 1.0f, a, g.lda, b, g.ldb,
            0.0f, c, g.n);
      return Status::ok();
    });
  // Kernel workspace, on the ledger.
  std::vector<int64_t> aOffsets = batchOffsets(g.aBatch, g.outBatch),
                       bOffsets = batchOffsets(g.bBatch, g.outBatch);
  CountedVector<int64_t> aOff(aOffsets.begin(), aOffsets.end()),
      bOff(bOffsets.begin(), bOffsets.end());
  int slots = maxThreads();
  bool parallel =
      !bigGemm(g.m, g.n, g.k) &&
      batches * g.m * g.n * std::max<int64_t>(g.k, 1) >= kParallelThreshold;
  return KernelFn([=](const StepContext &) {
    forEachSlot(batches, slots, parallel, [&](int64_t i, int) {
      sgemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a + aOff[i] * aMat, g.lda,
            b + bOff[i] * bMat, g.ldb, 0.0f, c + i * cMat, g.n);
    });
    return Status::ok();
  });
}

namespace {

struct LinearShape {
  bool tw;
  int64_t rows, k, n;
};

StatusOr<LinearShape> describeLinear(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(bool tw, flagAttr(op, "transpose_weight"));
  std::vector<int64_t> xs = op.inShape(0), ws = op.inShape(1);
  if (xs.empty() || ws.size() != 2)
    return makeError("needs an input of rank >= 1 and a 2-D weight, got %s "
                     "and %s",
                     shapeToString(xs).c_str(), shapeToString(ws).c_str());
  LinearShape l{tw, 0, tw ? ws[1] : ws[0], tw ? ws[0] : ws[1]};
  if (xs.back() != l.k)
    return makeError("input features %lld differ from the weight's %lld "
                     "(weight %s%s)",
                     (long long)xs.back(), (long long)l.k,
                     shapeToString(ws).c_str(), tw ? ", transposed" : "");
  l.rows = numElements(xs) / std::max<int64_t>(l.k, 1);
  if (l.k == 0)
    l.rows = product(xs, 0, xs.size() - 1);
  return l;
}

} // namespace

Status verifyLinear(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  LOOM_ASSIGN_OR_RETURN(LinearShape l, describeLinear(op));
  if (op.inputs.size() == 3)
    LOOM_RETURN_IF_ERROR(expectInShape(op, 2, {l.n}, "bias"));
  std::vector<int64_t> want = op.inShape(0);
  want.back() = l.n;
  return expectOutShape(op, 0, want, "output");
}

StatusOr<KernelFn> bindLinear(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(LinearShape l, describeLinear(op));
  const float *x = ctx.f32(op.inputs[0]), *w = ctx.f32(op.inputs[1]);
  const float *bias = op.inputs.size() == 3 ? ctx.f32(op.inputs[2]) : nullptr;
  float *y = ctx.f32(op.outputs[0]);
  if (l.rows == 0 || l.n == 0)
    return noopKernel();
  return KernelFn([=](const StepContext &) {
    if (bias) {
#pragma omp parallel for schedule(static) if (l.rows * l.n >=                  \
                                              kParallelThreshold)
      for (int64_t r = 0; r < l.rows; ++r)
        std::memcpy(y + r * l.n, bias, l.n * sizeof(float));
    }
    sgemm(false, l.tw, l.rows, l.n, l.k, 1.0f, x, l.k, w, l.tw ? l.k : l.n,
          bias ? 1.0f : 0.0f, y, l.n);
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
