//===- SumTo.cpp - sum_to, the inverse of broadcasting -----------*- C++ -*-===//

#include "runtime/kernels/cpu/Broadcast.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <cstring>

namespace loom::runtime::cpu {

namespace {

LOOM_SIMD_CLONES
void addRow(const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] += x[i];
}

} // namespace

Status verifySumTo(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  if (!broadcastsTo(op.outShape(0), op.inShape(0)))
    return makeError("output shape %s does not broadcast to the input shape "
                     "%s",
                     shapeToString(op.outShape(0)).c_str(),
                     shapeToString(op.inShape(0)).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindSumTo(const OpView &op, BindContext &ctx) {
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  std::vector<int64_t> xs = op.inShape(0), ys = op.outShape(0);
  int64_t nx = numElements(xs), ny = numElements(ys);
  if (nx == ny)
    return KernelFn([=](const StepContext &) {
      std::memmove(y, x, nx * sizeof(float));
      return Status::ok();
    });
  if (nx == 0)
    return KernelFn([=](const StepContext &) {
      std::memset(y, 0, ny * sizeof(float));
      return Status::ok();
    });
  std::vector<int64_t> sy = broadcastStrides(ys, xs);
  int64_t inner = xs.back(), outer = nx / inner;
  if (ny == 1)
    return KernelFn([=](const StepContext &) {
      double sum = 0;
#pragma omp parallel for reduction(+ : sum) if (nx >= kParallelThreshold)
      for (int64_t i = 0; i < nx; ++i)
        sum += x[i];
      y[0] = static_cast<float>(sum);
      return Status::ok();
    });
  if (sy.back() != 0)
    // The last dim is kept (so output rows are `inner` apart): threads take
    // column ranges and add every input row into them in row order, the
    // serial order, so the bits do not depend on the thread count.
    return KernelFn([=](const StepContext &) {
      // (Column ranges under 256 floats are not worth a thread.)
      forRanges(inner, std::max<int64_t>(kParallelThreshold / outer + 1, 512),
                [&](int64_t c0, int64_t c1) {
                  for (int64_t r = 0; r < ny / inner; ++r)
                    std::memset(y + r * inner + c0, 0,
                                (c1 - c0) * sizeof(float));
                  for (int64_t o = 0; o < outer; ++o)
                    addRow(x + o * inner + c0,
                           y + rowOffset(o, xs, sy) + c0, c1 - c0);
                });
      return Status::ok();
    });
  return KernelFn([=](const StepContext &) {
    std::memset(y, 0, ny * sizeof(float));
    int64_t iy = sy.back();
    for (int64_t o = 0; o < outer; ++o) {
      const float *px = x + o * inner;
      float *py = y + rowOffset(o, xs, sy);
      if (iy == 0) {
        float s = 0;
        for (int64_t i = 0; i < inner; ++i)
          s += px[i];
        py[0] += s;
      } else {
        for (int64_t i = 0; i < inner; ++i)
          py[i] += px[i];
      }
    }
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
