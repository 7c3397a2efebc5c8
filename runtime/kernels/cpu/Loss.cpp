//===- Loss.cpp - cross_entropy and mse with their gradients -----*- C++ -*-===//
//
// Losses accumulate in double and use the log-sum-exp trick, so they stay
// finite for large logits. Cross-entropy's exponentials are float
// (`fastExp`, vectorised), as PyTorch's log_softmax computes them.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/support/HostTensor.h"
#include "runtime/support/MemoryLedger.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

namespace loom::runtime::cpu {

namespace {

Status verifyCrossEntropyOperands(const OpView &op) {
  const plan::Buffer *logits = op.inputs[0], *target = op.inputs[1];
  if (logits->dtype() != plan::F32)
    return makeError("logits are %s, expected f32", dtypeName(logits->dtype()));
  if (target->dtype() != plan::I64)
    return makeError("target is %s, expected i64 class ids",
                     dtypeName(target->dtype()));
  if (op.outputs[0]->dtype() != plan::F32)
    return makeError("output is %s, expected f32",
                     dtypeName(op.outputs[0]->dtype()));
  std::vector<int64_t> ls = op.inShape(0);
  if (ls.empty() || ls.back() < 1)
    return makeError("logits shape %s has no class dimension",
                     shapeToString(ls).c_str());
  int64_t rows = numElements(ls) / ls.back();
  if (op.inNumel(1) != rows)
    return makeError("target %s has %lld elements, expected one per logits "
                     "row (%lld)",
                     shapeToString(op.inShape(1)).c_str(),
                     (long long)op.inNumel(1), (long long)rows);
  LOOM_RETURN_IF_ERROR(meanCount(op, rows).status());
  return op.expectNotInPlace();
}

/// Maximum of a logits row.
LOOM_SIMD_CLONES
float rowMax(const float *row, int64_t n) {
  float mx = row[0];
#pragma omp simd reduction(max : mx)
  for (int64_t c = 0; c < n; ++c)
    mx = row[c] > mx ? row[c] : mx;
  return mx;
}

/// sum_c exp(row[c] - mx), accumulated in double in a fixed lane order;
/// with `e`, also stores the exponentials there.
LOOM_SIMD_CLONES
double sumExp(const float *row, int64_t n, float mx, float *e) {
  if (!e) {
    // Exponentials in pieces on the stack, so they vectorise at full width.
    constexpr int64_t kPiece = 256;
    float buf[kPiece];
    Lanes8<double> sum;
    for (int64_t c0 = 0; c0 < n; c0 += kPiece) {
      int64_t len = std::min(kPiece, n - c0);
#pragma omp simd
      for (int64_t c = 0; c < len; ++c)
        buf[c] = fastExp(row[c0 + c] - mx);
      sum.add(len, [&](int64_t c) { return double(buf[c]); });
    }
    return sum.total();
  }
#pragma omp simd
  for (int64_t c = 0; c < n; ++c)
    e[c] = fastExp(row[c] - mx);
  return sumLanes8<double>(n, [&](int64_t c) { return double(e[c]); });
}

Status classOutOfRange(int64_t row, int64_t cls, int64_t classes) {
  return makeError("target class id %lld in row %lld is outside [0, %lld)",
                   (long long)cls, (long long)row, (long long)classes);
}

} // namespace

StatusOr<int64_t> meanCount(const OpView &op, int64_t held) {
  LOOM_ASSIGN_OR_RETURN(double count,
                        op.numAttr("count", static_cast<double>(held)));
  if (count < static_cast<double>(held) || count != std::floor(count))
    return makeError("count %g is not a whole number of at least the %lld "
                     "rows (elements) the instruction holds",
                     count, (long long)held);
  return static_cast<int64_t>(count);
}

Status verifyCrossEntropy(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifyCrossEntropyOperands(op));
  if (op.outNumel(0) != 1)
    return makeError("loss output %s must be a scalar",
                     shapeToString(op.outShape(0)).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindCrossEntropy(const OpView &op, BindContext &ctx) {
  const float *logits = ctx.f32(op.inputs[0]);
  const int64_t *target = ctx.i64(op.inputs[1]);
  float *loss = ctx.f32(op.outputs[0]);
  int64_t classes = op.inShape(0).back();
  int64_t rows = op.inNumel(0) / classes;
  LOOM_ASSIGN_OR_RETURN(int64_t count, meanCount(op, rows));
  // Each row's loss (kernel workspace), summed in row order afterwards: the
  // same bits for any thread count.
  auto rowLoss = std::make_shared<CountedVector<double>>(rows);
  return KernelFn([=](const StepContext &) {
    for (int64_t r = 0; r < rows; ++r)
      if (target[r] < 0 || target[r] >= classes)
        return classOutOfRange(r, target[r], classes);
    double *lr = rowLoss->data();
#pragma omp parallel for schedule(static) if (rows * classes >= kParallelThreshold)
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = logits + r * classes;
      float mx = rowMax(row, classes);
      double sum = sumExp(row, classes, mx, nullptr);
      lr[r] = mx + std::log(sum) - row[target[r]];
    }
    double total = 0;
    for (int64_t r = 0; r < rows; ++r)
      total += lr[r];
    loss[0] = count ? static_cast<float>(total / count) : 0.0f;
    return Status::ok();
  });
}

Status verifyCrossEntropyGrad(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifyCrossEntropyOperands(op));
  if (op.outShape(0) != op.inShape(0))
    return makeError("output shape %s differs from the logits shape %s",
                     shapeToString(op.outShape(0)).c_str(),
                     shapeToString(op.inShape(0)).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindCrossEntropyGrad(const OpView &op, BindContext &ctx) {
  const float *logits = ctx.f32(op.inputs[0]);
  const int64_t *target = ctx.i64(op.inputs[1]);
  float *grad = ctx.f32(op.outputs[0]);
  int64_t classes = op.inShape(0).back();
  int64_t rows = op.inNumel(0) / classes;
  LOOM_ASSIGN_OR_RETURN(int64_t count, meanCount(op, rows));
  return KernelFn([=](const StepContext &) {
    for (int64_t r = 0; r < rows; ++r)
      if (target[r] < 0 || target[r] >= classes)
        return classOutOfRange(r, target[r], classes);
    double invRows = 1.0 / static_cast<double>(count);
#pragma omp parallel for schedule(static) if (rows * classes >= kParallelThreshold)
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = logits + r * classes;
      float *g = grad + r * classes;
      float mx = rowMax(row, classes);
      double sum = sumExp(row, classes, mx, g);
      // g = (softmax - onehot) / count.
      int64_t t = target[r];
      double pt = g[t] / sum;
      float k = static_cast<float>(invRows / sum);
#pragma omp simd
      for (int64_t c = 0; c < classes; ++c)
        g[c] *= k;
      g[t] = static_cast<float>((pt - 1.0) * invRows);
    }
    return Status::ok();
  });
}

namespace {

Status verifyMseOperands(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  if (op.inNumel(0) != op.inNumel(1))
    return makeError("prediction %s and target %s differ in element count",
                     shapeToString(op.inShape(0)).c_str(),
                     shapeToString(op.inShape(1)).c_str());
  return meanCount(op, op.inNumel(0)).status();
}

} // namespace

Status verifyMse(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifyMseOperands(op));
  if (op.outNumel(0) != 1)
    return makeError("loss output %s must be a scalar",
                     shapeToString(op.outShape(0)).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindMse(const OpView &op, BindContext &ctx) {
  const float *pred = ctx.f32(op.inputs[0]), *target = ctx.f32(op.inputs[1]);
  float *loss = ctx.f32(op.outputs[0]);
  int64_t n = op.inNumel(0);
  LOOM_ASSIGN_OR_RETURN(int64_t count, meanCount(op, n));
  return KernelFn([=](const StepContext &) {
    double sum = 0;
#pragma omp parallel for reduction(+ : sum) if (n >= kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      double d = static_cast<double>(pred[i]) - target[i];
      sum += d * d;
    }
    loss[0] = count ? static_cast<float>(sum / count) : 0.0f;
    return Status::ok();
  });
}

Status verifyMseGrad(const OpView &op) {
  LOOM_RETURN_IF_ERROR(verifyMseOperands(op));
  if (op.outShape(0) != op.inShape(0))
    return makeError("output shape %s differs from the prediction shape %s",
                     shapeToString(op.outShape(0)).c_str(),
                     shapeToString(op.inShape(0)).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindMseGrad(const OpView &op, BindContext &ctx) {
  const float *pred = ctx.f32(op.inputs[0]), *target = ctx.f32(op.inputs[1]);
  float *grad = ctx.f32(op.outputs[0]);
  int64_t n = op.inNumel(0);
  LOOM_ASSIGN_OR_RETURN(int64_t count, meanCount(op, n));
  float factor = count ? 2.0f / static_cast<float>(count) : 0.0f;
  return KernelFn([=](const StepContext &) {
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t i = 0; i < n; ++i)
      grad[i] = factor * (pred[i] - target[i]);
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
