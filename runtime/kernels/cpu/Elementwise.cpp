//===- Elementwise.cpp - Element-wise ops with broadcasting ------*- C++ -*-===//
//
// add/sub/mul/div/pow/max/min and select (NumPy broadcasting to the output's
// shape), relu/tanh/sigmoid and their gradients, exp/log/sqrt/rsqrt/neg/
// reciprocal/erf, scale, copy and convert.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/kernels/cpu/Bf16.h"
#include "runtime/kernels/cpu/Broadcast.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/HostTensor.h"

#include <cmath>
#include <cstring>

namespace loom::runtime::cpu {

namespace {

/// Applies `f` to every element: `y[i] = f(i)`.
template <typename F> void forEach(int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    f(i);
}

template <typename F>
KernelFn makeBinary(const float *a, const float *b, float *c,
                    const std::vector<int64_t> &aShape,
                    const std::vector<int64_t> &bShape,
                    const std::vector<int64_t> &cShape, F f) {
  int64_t n = numElements(cShape);
  int64_t na = numElements(aShape), nb = numElements(bShape);
  if (n == 0)
    return [](const StepContext &) { return Status::ok(); };
  if (na == n && nb == n)
    return [=](const StepContext &) {
      forEach(n, [&](int64_t i) { c[i] = f(a[i], b[i]); });
      return Status::ok();
    };
  if (na == n && nb == 1)
    return [=](const StepContext &) {
      float s = b[0];
      forEach(n, [&](int64_t i) { c[i] = f(a[i], s); });
      return Status::ok();
    };
  if (na == 1 && nb == n)
    return [=](const StepContext &) {
      float s = a[0];
      forEach(n, [&](int64_t i) { c[i] = f(s, b[i]); });
      return Status::ok();
    };
  std::vector<int64_t> sa = broadcastStrides(aShape, cShape);
  std::vector<int64_t> sb = broadcastStrides(bShape, cShape);
  int64_t inner = cShape.back();
  int64_t outer = n / inner;
  return [=](const StepContext &) {
    int64_t ia = sa.back(), ib = sb.back();
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t o = 0; o < outer; ++o) {
      const float *pa = a + rowOffset(o, cShape, sa);
      const float *pb = b + rowOffset(o, cShape, sb);
      float *pc = c + o * inner;
      for (int64_t i = 0; i < inner; ++i)
        pc[i] = f(pa[i * ia], pb[i * ib]);
    }
    return Status::ok();
  };
}

template <typename F>
KernelFn mapUnary(const float *x, float *y, int64_t n, F f) {
  return [=](const StepContext &) {
    forEach(n, [&](int64_t i) { y[i] = f(x[i]); });
    return Status::ok();
  };
}

Status expectSameShape(const OpView &op) {
  std::vector<int64_t> out = op.outShape(0);
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inShape(i) != out)
      return makeError("input %zu has shape %s, expected the output's %s", i,
                       shapeToString(op.inShape(i)).c_str(),
                       shapeToString(out).c_str());
  return Status::ok();
}

} // namespace

Status verifyBinary(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  std::vector<int64_t> out = op.outShape(0);
  for (size_t i = 0; i < 2; ++i)
    if (!broadcastsTo(op.inShape(i), out))
      return makeError("input %zu of shape %s does not broadcast to the "
                       "output shape %s",
                       i, shapeToString(op.inShape(i)).c_str(),
                       shapeToString(out).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindBinary(const OpView &op, BindContext &ctx) {
  const float *a = ctx.f32(op.inputs[0]), *b = ctx.f32(op.inputs[1]);
  float *c = ctx.f32(op.outputs[0]);
  auto as = op.inShape(0), bs = op.inShape(1), cs = op.outShape(0);
  const std::string &name = op.inst.op();
  if (name == "add")
    return makeBinary(a, b, c, as, bs, cs,
                      [](float x, float y) { return x + y; });
  if (name == "sub")
    return makeBinary(a, b, c, as, bs, cs,
                      [](float x, float y) { return x - y; });
  if (name == "mul")
    return makeBinary(a, b, c, as, bs, cs,
                      [](float x, float y) { return x * y; });
  if (name == "div")
    return makeBinary(a, b, c, as, bs, cs,
                      [](float x, float y) { return x / y; });
  if (name == "pow")
    return makeBinary(a, b, c, as, bs, cs,
                      [](float x, float y) { return std::pow(x, y); });
  if (name == "equal")
    return makeBinary(a, b, c, as, bs, cs,
                      [](float x, float y) { return x == y ? 1.0f : 0.0f; });
  if (name == "less")
    return makeBinary(a, b, c, as, bs, cs,
                      [](float x, float y) { return x < y ? 1.0f : 0.0f; });
  if (name == "less_equal")
    return makeBinary(a, b, c, as, bs, cs,
                      [](float x, float y) { return x <= y ? 1.0f : 0.0f; });
  // NaN propagates, as in torch.maximum / torch.minimum.
  if (name == "max")
    return makeBinary(a, b, c, as, bs, cs, [](float x, float y) {
      return (x > y || std::isnan(x)) ? x : y;
    });
  return makeBinary(a, b, c, as, bs, cs, [](float x, float y) {
    return (x < y || std::isnan(x)) ? x : y;
  });
}

Status verifySelect(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  std::vector<int64_t> out = op.outShape(0);
  for (size_t i = 0; i < 3; ++i)
    if (!broadcastsTo(op.inShape(i), out))
      return makeError("input %zu of shape %s does not broadcast to the "
                       "output shape %s",
                       i, shapeToString(op.inShape(i)).c_str(),
                       shapeToString(out).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindSelect(const OpView &op, BindContext &ctx) {
  const float *cond = ctx.f32(op.inputs[0]), *a = ctx.f32(op.inputs[1]),
              *b = ctx.f32(op.inputs[2]);
  float *y = ctx.f32(op.outputs[0]);
  std::vector<int64_t> ys = op.outShape(0);
  int64_t n = numElements(ys);
  if (n == 0)
    return noopKernel();
  if (ys.empty())
    ys = {1};
  auto strides = [&](size_t i) {
    std::vector<int64_t> s = op.inShape(i);
    return broadcastStrides(s.empty() ? std::vector<int64_t>{1} : s, ys);
  };
  std::vector<int64_t> sc = strides(0), sa = strides(1), sb = strides(2);
  int64_t inner = ys.back(), outer = n / inner;
  return KernelFn([=](const StepContext &) {
    int64_t ic = sc.back(), ia = sa.back(), ib = sb.back();
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
    for (int64_t o = 0; o < outer; ++o) {
      const float *pc = cond + rowOffset(o, ys, sc);
      const float *pa = a + rowOffset(o, ys, sa);
      const float *pb = b + rowOffset(o, ys, sb);
      float *py = y + o * inner;
      for (int64_t i = 0; i < inner; ++i)
        py[i] = pc[i * ic] != 0.0f ? pa[i * ia] : pb[i * ib];
    }
    return Status::ok();
  });
}

Status verifyUnary(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  return expectSameShape(op);
}

StatusOr<KernelFn> bindUnary(const OpView &op, BindContext &ctx) {
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  const std::string &name = op.inst.op();
  if (name == "relu")
    return KernelFn([=](const StepContext &) {
      // `!(x <= 0)` keeps NaN, as torch.relu does: a NaN must reach the
      // loss, which loom-run checks, not vanish into a zero.
      forEach(n, [&](int64_t i) { y[i] = !(x[i] <= 0.0f) ? x[i] : 0.0f; });
      return Status::ok();
    });
  if (name == "tanh")
    return KernelFn([=](const StepContext &) {
      forEach(n, [&](int64_t i) { y[i] = std::tanh(x[i]); });
      return Status::ok();
    });
  if (name == "sigmoid")
    return KernelFn([=](const StepContext &) {
      forRanges(n, kParallelThreshold, [&](int64_t lo, int64_t hi) {
        sigmoidArray(x + lo, y + lo, hi - lo);
      });
      return Status::ok();
    });
  if (name == "exp")
    return KernelFn([=](const StepContext &) {
      forRanges(n, kParallelThreshold, [&](int64_t lo, int64_t hi) {
        expArray(x + lo, y + lo, hi - lo);
      });
      return Status::ok();
    });
  if (name == "log")
    return mapUnary(x, y, n, [](float v) { return std::log(v); });
  if (name == "sqrt")
    return mapUnary(x, y, n, [](float v) { return std::sqrt(v); });
  if (name == "rsqrt")
    return mapUnary(x, y, n, [](float v) { return 1.0f / std::sqrt(v); });
  if (name == "neg")
    return mapUnary(x, y, n, [](float v) { return -v; });
  if (name == "reciprocal")
    return mapUnary(x, y, n, [](float v) { return 1.0f / v; });
  if (name == "sin")
    return mapUnary(x, y, n, [](float v) { return std::sin(v); });
  if (name == "cos")
    return mapUnary(x, y, n, [](float v) { return std::cos(v); });
  if (name == "trunc")
    return mapUnary(x, y, n, [](float v) { return std::trunc(v); });
  if (name == "round_f16")
    return mapUnary(x, y, n,
                    [](float v) { return halfToFloat(floatToHalf(v)); });
  return mapUnary(x, y, n, [](float v) { return std::erf(v); });
}

Status verifyConvert(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  plan::DType from = op.inputs[0]->dtype(), to = op.outputs[0]->dtype();
  if (from != plan::I64 && from != plan::F32 && from != plan::BF16)
    return makeError("input is %s, expected i64, f32 or bf16", dtypeName(from));
  if (to == plan::I64 && from != plan::F32)
    return makeError("output is i64 from %s, expected f32", dtypeName(from));
  if (to != plan::F32 && to != plan::BF16 && to != plan::I64)
    return makeError("output is %s, expected f32, bf16 or i64",
                     dtypeName(to));
  if (from == to)
    return makeError("input and output are both %s", dtypeName(from));
  return expectOutShape(op, 0, op.inShape(0), "output");
}

StatusOr<KernelFn> bindConvert(const OpView &op, BindContext &ctx) {
  plan::DType from = op.inputs[0]->dtype(), to = op.outputs[0]->dtype();
  int64_t n = op.outNumel(0);
  if (from == plan::F32 && to == plan::BF16) {
    const float *x = ctx.f32(op.inputs[0]);
    uint16_t *y = ctx.bf16(op.outputs[0]);
    return KernelFn([=](const StepContext &) {
      narrowToBf16(x, y, n);
      return Status::ok();
    });
  }
  if (from == plan::F32 && to == plan::I64) {
    // Integers held in f32 (the importer's position ids): nearest.
    const float *x = ctx.f32(op.inputs[0]);
    int64_t *y = ctx.i64(op.outputs[0]);
    return KernelFn([=](const StepContext &) {
      forEach(n, [&](int64_t i) { y[i] = std::llrint(x[i]); });
      return Status::ok();
    });
  }
  if (from == plan::BF16 && to == plan::F32) {
    const uint16_t *x = ctx.bf16(op.inputs[0]);
    float *y = ctx.f32(op.outputs[0]);
    return KernelFn([=](const StepContext &) {
      widenBf16(x, y, n);
      return Status::ok();
    });
  }
  const int64_t *x = ctx.i64(op.inputs[0]);
  if (to == plan::BF16) {
    // Through f32, like PyTorch's integer-to-bf16 conversion.
    uint16_t *y = ctx.bf16(op.outputs[0]);
    return KernelFn([=](const StepContext &) {
      forEach(n,
              [&](int64_t i) { y[i] = floatToBf16(static_cast<float>(x[i])); });
      return Status::ok();
    });
  }
  float *y = ctx.f32(op.outputs[0]);
  return KernelFn([=](const StepContext &) {
    forEach(n, [&](int64_t i) { y[i] = static_cast<float>(x[i]); });
    return Status::ok();
  });
}

Status verifyUnaryGrad(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  return expectSameShape(op);
}

StatusOr<KernelFn> bindUnaryGrad(const OpView &op, BindContext &ctx) {
  const float *dy = ctx.f32(op.inputs[0]), *v = ctx.f32(op.inputs[1]);
  float *dx = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  const std::string &name = op.inst.op();
  if (name == "relu_grad")
    return KernelFn([=](const StepContext &) {
      forEach(n, [&](int64_t i) { dx[i] = v[i] > 0.0f ? dy[i] : 0.0f; });
      return Status::ok();
    });
  if (name == "tanh_grad")
    return KernelFn([=](const StepContext &) {
      forEach(n, [&](int64_t i) { dx[i] = dy[i] * (1.0f - v[i] * v[i]); });
      return Status::ok();
    });
  return KernelFn([=](const StepContext &) {
    forEach(n, [&](int64_t i) { dx[i] = dy[i] * v[i] * (1.0f - v[i]); });
    return Status::ok();
  });
}

Status verifyScale(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectAllDType(plan::F32));
  LOOM_RETURN_IF_ERROR(op.numAttr("factor").status());
  return expectSameShape(op);
}

StatusOr<KernelFn> bindScale(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(double factorD, op.numAttr("factor"));
  float factor = static_cast<float>(factorD);
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  return KernelFn([=](const StepContext &) {
    forEach(n, [&](int64_t i) { y[i] = x[i] * factor; });
    return Status::ok();
  });
}

Status verifyCopy(const OpView &op) {
  LOOM_RETURN_IF_ERROR(op.expectNotInPlace());
  if (op.inputs[0]->dtype() != op.outputs[0]->dtype())
    return makeError("input is %s but output is %s",
                     dtypeName(op.inputs[0]->dtype()),
                     dtypeName(op.outputs[0]->dtype()));
  if (op.inNumel(0) != op.outNumel(0))
    return makeError("input %s and output %s differ in element count",
                     shapeToString(op.inShape(0)).c_str(),
                     shapeToString(op.outShape(0)).c_str());
  return Status::ok();
}

StatusOr<KernelFn> bindCopy(const OpView &op, BindContext &ctx) {
  const uint8_t *x = ctx.bytes(op.inputs[0]);
  uint8_t *y = ctx.bytes(op.outputs[0]);
  size_t bytes = op.outputs[0]->size_bytes();
  return KernelFn([=](const StepContext &) {
    std::memmove(y, x, bytes);
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
