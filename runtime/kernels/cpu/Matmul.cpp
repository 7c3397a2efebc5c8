//===- Matmul.cpp - matmul through cblas_sgemm -------------------*- C++ -*-===//

#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/HostTensor.h"

#include <cblas.h>
#include <cstring>

namespace loom::runtime::cpu {

namespace {

/// An operand viewed as a row-major matrix: leading dims collapse into rows.
struct Matrix {
  int64_t rows, cols;
};

Matrix asMatrix(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return {1, 1};
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i)
    rows *= shape[i];
  return {rows, shape.back()};
}

struct Gemm {
  bool ta, tb;
  int64_t m, n, k;
  Matrix a, b;
};

StatusOr<Gemm> describe(const OpView &op) {
  LOOM_ASSIGN_OR_RETURN(double ta, op.numAttr("transpose_a", 0.0));
  LOOM_ASSIGN_OR_RETURN(double tb, op.numAttr("transpose_b", 0.0));
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return makeError("transpose_a and transpose_b must be 0 or 1");
  Gemm g{ta == 1, tb == 1, 0, 0, 0, asMatrix(op.inShape(0)),
         asMatrix(op.inShape(1))};
  g.m = g.ta ? g.a.cols : g.a.rows;
  int64_t ka = g.ta ? g.a.rows : g.a.cols;
  int64_t kb = g.tb ? g.b.cols : g.b.rows;
  g.n = g.tb ? g.b.rows : g.b.cols;
  if (ka != kb)
    return makeError("inner dimensions differ: op(a) is %lldx%lld, op(b) is "
                     "%lldx%lld",
                     (long long)g.m, (long long)ka, (long long)kb,
                     (long long)g.n);
  g.k = ka;
  return g;
}

} // namespace

Status verifyMatmul(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  LOOM_ASSIGN_OR_RETURN(Gemm g, describe(op));
  if (op.outNumel(0) != g.m * g.n)
    return makeError("output %s has %lld elements, expected %lldx%lld",
                     shapeToString(op.outShape(0)).c_str(),
                     (long long)op.outNumel(0), (long long)g.m,
                     (long long)g.n);
  return Status::ok();
}

StatusOr<KernelFn> bindMatmul(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(Gemm g, describe(op));
  const float *a = ctx.f32(op.inputs[0]);
  const float *b = ctx.f32(op.inputs[1]);
  float *c = ctx.f32(op.outputs[0]);
  if (g.m == 0 || g.n == 0)
    return KernelFn([](const StepContext &) { return Status::ok(); });
  if (g.k == 0) {
    size_t bytes = g.m * g.n * sizeof(float);
    return KernelFn([c, bytes](const StepContext &) {
      std::memset(c, 0, bytes);
      return Status::ok();
    });
  }
  return KernelFn([g, a, b, c](const StepContext &) {
    sgemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a, g.a.cols, b, g.b.cols, 0.0f, c,
          g.n);
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
