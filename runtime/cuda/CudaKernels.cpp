//===- CudaKernels.cpp - Bind functions of the CUDA kernels ------*- C++
//-*-===//
//
// Shapes and attributes are read here exactly as the CPU kernels read them
// (the same helpers from runtime/kernels/cpu/KernelUtil.h); the launchers
// in the `.cu` files do the work. Float operands come out as `FloatIn` /
// `FloatOut` (f32 or bf16 storage, runtime/cuda/CudaBind.h); ops without a
// bf16 variant check for f32 and fail at bind otherwise.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/CudaBind.h"

#include "runtime/Plan.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cuda/CudaLaunch.h"
#include "runtime/kernels/cpu/Broadcast.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/kernels/cpu/StridedView.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <cmath>

namespace loom::runtime::cuda {

Status expectDType(const OpView &op, bool output, size_t i, plan::DType dtype) {
  const plan::Buffer *b = output ? op.outputs[i] : op.inputs[i];
  if (b->dtype() == dtype)
    return Status::ok();
  return makeError("%s %zu (buffer %d '%s') is %s; the CUDA kernel of '%s' "
                   "takes %s there",
                   output ? "output" : "input", i, b->id(), b->name().c_str(),
                   dtypeName(b->dtype()), op.inst.op().c_str(),
                   dtypeName(dtype));
}

namespace {

StatusOr<Elem> floatElem(const OpView &op, bool output, size_t i) {
  const plan::Buffer *b = output ? op.outputs[i] : op.inputs[i];
  if (b->dtype() == plan::F32)
    return Elem::F32;
  if (b->dtype() == plan::BF16)
    return Elem::BF16;
  return makeError("%s %zu (buffer %d '%s') is %s; the CUDA kernel of '%s' "
                   "takes f32 or bf16 there",
                   output ? "output" : "input", i, b->id(), b->name().c_str(),
                   dtypeName(b->dtype()), op.inst.op().c_str());
}

} // namespace

StatusOr<FloatIn> floatIn(const OpView &op, BindContext &ctx, size_t i) {
  LOOM_ASSIGN_OR_RETURN(Elem e, floatElem(op, false, i));
  return FloatIn{ctx.arena() + op.inputs[i]->offset(), e};
}

StatusOr<FloatOut> floatOut(const OpView &op, BindContext &ctx, size_t i) {
  LOOM_ASSIGN_OR_RETURN(Elem e, floatElem(op, true, i));
  return FloatOut{ctx.arena() + op.outputs[i]->offset(), e};
}

Status expectAllF32(const OpView &op) {
  for (size_t i = 0; i < op.inputs.size(); ++i)
    LOOM_RETURN_IF_ERROR(expectDType(op, false, i, plan::F32));
  for (size_t i = 0; i < op.outputs.size(); ++i)
    LOOM_RETURN_IF_ERROR(expectDType(op, true, i, plan::F32));
  return Status::ok();
}

std::string checkContext(const OpView &op) {
  return "instruction '" + op.inst.op() + "'" +
         (op.inst.loc().empty() ? "" : " at '" + op.inst.loc() + "'");
}

Status tooManyDims(const std::vector<int64_t> &shape) {
  return makeError("the CUDA backend handles at most %d dims here, got %s",
                   kMaxDims, shapeToString(shape).c_str());
}

// --- element-wise ------------------------------------------------------------

StatusOr<KernelFn> bindBinary(const OpView &op, BindContext &ctx) {
  static const std::pair<const char *, BinaryOp> kOps[] = {
      {"add", BinaryOp::Add}, {"sub", BinaryOp::Sub}, {"mul", BinaryOp::Mul},
      {"div", BinaryOp::Div}, {"pow", BinaryOp::Pow}, {"max", BinaryOp::Max},
      {"min", BinaryOp::Min}, {"equal", BinaryOp::Equal},
      {"less", BinaryOp::Less}, {"less_equal", BinaryOp::LessEqual}};
  BinaryOp kind = BinaryOp::Add;
  bool found = false;
  for (const auto &[name, k] : kOps)
    if (op.inst.op() == name) {
      kind = k;
      found = true;
    }
  if (!found)
    return makeError("no CUDA kernel for '%s'", op.inst.op().c_str());
  LOOM_ASSIGN_OR_RETURN(FloatIn a, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn b, floatIn(op, ctx, 1));
  LOOM_ASSIGN_OR_RETURN(FloatOut c, floatOut(op, ctx, 0));
  std::vector<int64_t> as = op.inShape(0), bs = op.inShape(1),
                       cs = op.outShape(0);
  int64_t n = numElements(cs), na = numElements(as), nb = numElements(bs);
  if (n == 0)
    return noopKernel();
  BroadcastIndex index;
  BroadcastMode mode;
  if (na == n && nb == n) {
    mode = BroadcastMode::Same;
  } else if (na == n && nb == 1) {
    mode = BroadcastMode::ScalarB;
  } else if (na == 1 && nb == n) {
    mode = BroadcastMode::ScalarA;
  } else {
    mode = BroadcastMode::General;
    if (cs.size() > static_cast<size_t>(kMaxDims))
      return tooManyDims(cs);
    std::vector<int64_t> sa = cpu::broadcastStrides(as, cs);
    std::vector<int64_t> sb = cpu::broadcastStrides(bs, cs);
    index.rank = static_cast<int>(cs.size());
    for (size_t d = 0; d < cs.size(); ++d) {
      index.dims[d] = cs[d];
      index.strideA[d] = sa[d];
      index.strideB[d] = sb[d];
    }
  }
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    return launchBinary(kind, mode, a, b, c, n, index, s);
  });
}

StatusOr<KernelFn> bindUnary(const OpView &op, BindContext &ctx) {
  static const std::pair<const char *, UnaryOp> kOps[] = {
      {"relu", UnaryOp::Relu},
      {"tanh", UnaryOp::Tanh},
      {"sigmoid", UnaryOp::Sigmoid},
      {"exp", UnaryOp::Exp},
      {"log", UnaryOp::Log},
      {"sqrt", UnaryOp::Sqrt},
      {"rsqrt", UnaryOp::Rsqrt},
      {"neg", UnaryOp::Neg},
      {"reciprocal", UnaryOp::Reciprocal},
      {"erf", UnaryOp::Erf},
      {"sin", UnaryOp::Sin},
      {"cos", UnaryOp::Cos},
      {"round_f16", UnaryOp::RoundF16},
      {"trunc", UnaryOp::Trunc}};
  for (const auto &[name, kind] : kOps)
    if (op.inst.op() == name) {
      LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
      LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
      int64_t n = op.outNumel(0);
      cudaStream_t s = cudaDevice(ctx).stream();
      UnaryOp k = kind;
      return KernelFn(
          [=](const StepContext &) { return launchUnary(k, x, y, n, s); });
    }
  return makeError("no CUDA kernel for '%s'", op.inst.op().c_str());
}

StatusOr<KernelFn> bindUnaryGrad(const OpView &op, BindContext &ctx) {
  static const std::pair<const char *, UnaryGradOp> kOps[] = {
      {"relu_grad", UnaryGradOp::Relu},
      {"tanh_grad", UnaryGradOp::Tanh},
      {"sigmoid_grad", UnaryGradOp::Sigmoid}};
  for (const auto &[name, kind] : kOps)
    if (op.inst.op() == name) {
      LOOM_ASSIGN_OR_RETURN(FloatIn dy, floatIn(op, ctx, 0));
      LOOM_ASSIGN_OR_RETURN(FloatIn v, floatIn(op, ctx, 1));
      LOOM_ASSIGN_OR_RETURN(FloatOut dx, floatOut(op, ctx, 0));
      int64_t n = op.outNumel(0);
      cudaStream_t s = cudaDevice(ctx).stream();
      UnaryGradOp k = kind;
      return KernelFn([=](const StepContext &) {
        return launchUnaryGrad(k, dy, v, dx, n, s);
      });
    }
  return makeError("no CUDA kernel for '%s'", op.inst.op().c_str());
}

StatusOr<KernelFn> bindGelu(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(bool tanhForm, flagAttr(op, "approximate"));
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  int64_t n = op.outNumel(0);
  cudaStream_t s = cudaDevice(ctx).stream();
  UnaryOp k = tanhForm ? UnaryOp::GeluTanh : UnaryOp::Gelu;
  return KernelFn(
      [=](const StepContext &) { return launchUnary(k, x, y, n, s); });
}

StatusOr<KernelFn> bindGeluGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(bool tanhForm, flagAttr(op, "approximate"));
  LOOM_ASSIGN_OR_RETURN(FloatIn dy, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 1));
  LOOM_ASSIGN_OR_RETURN(FloatOut dx, floatOut(op, ctx, 0));
  int64_t n = op.outNumel(0);
  cudaStream_t s = cudaDevice(ctx).stream();
  UnaryGradOp k = tanhForm ? UnaryGradOp::GeluTanh : UnaryGradOp::Gelu;
  return KernelFn(
      [=](const StepContext &) { return launchUnaryGrad(k, dy, x, dx, n, s); });
}

StatusOr<KernelFn> bindScale(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(double factor, op.numAttr("factor"));
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  int64_t n = op.outNumel(0);
  float f = static_cast<float>(factor);
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn(
      [=](const StepContext &) { return launchScale(x, y, n, f, s); });
}

StatusOr<KernelFn> bindCopy(const OpView &op, BindContext &ctx) {
  LOOM_RETURN_IF_ERROR(expectDType(op, true, 0, op.inputs[0]->dtype()));
  const uint8_t *x = ctx.arena() + op.inputs[0]->offset();
  uint8_t *y = ctx.arena() + op.outputs[0]->offset();
  int64_t bytes =
      std::min(op.inputs[0]->size_bytes(), op.outputs[0]->size_bytes());
  if (bytes == 0 || x == y)
    return noopKernel();
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    return cudaCheck(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpyAsync (copy)");
  });
}

StatusOr<SumToIndex> reductionIndex(const std::vector<int64_t> &xs,
                                    const std::vector<bool> &reduced) {
  std::vector<int64_t> xStride = cpu::denseStrides(xs);
  SumToIndex index;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (xs[d] == 1)
      continue;
    bool kept = !reduced[d];
    if ((kept ? index.keptRank : index.redRank) == kMaxDims)
      return tooManyDims(xs);
    if (kept) {
      index.keptDims[index.keptRank] = xs[d];
      index.keptStrides[index.keptRank++] = xStride[d];
    } else {
      index.redDims[index.redRank] = xs[d];
      index.redStrides[index.redRank++] = xStride[d];
      index.reduced *= xs[d];
    }
  }
  return index;
}

StatusOr<DeviceBuffer> reduceWorkspace(BindContext &ctx, int64_t ny,
                                       const SumToIndex &index) {
  int64_t chunks = reduceChunks(ny, index);
  if (chunks == 0)
    return DeviceBuffer();
  return cudaDevice(ctx).allocateWorkspace(chunks * ny * sizeof(float));
}

StatusOr<KernelFn> bindSumTo(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  std::vector<int64_t> xs = op.inShape(0), ys = op.outShape(0);
  int64_t nx = numElements(xs), ny = numElements(ys);
  cudaStream_t s = cudaDevice(ctx).stream();
  if (ny == 0)
    return noopKernel();
  if (nx == ny) {
    if (x.e != y.e) // a conversion (16-byte packs where aligned)
      return KernelFn([=](const StepContext &) {
        return launchConvert(nullptr, x, y, nx, s);
      });
    return KernelFn([=](const StepContext &) {
      return x.p == y.p
                 ? Status::ok()
                 : cudaCheck(cudaMemcpyAsync(y.p, x.p, nx * elemBytes(x.e),
                                             cudaMemcpyDeviceToDevice, s),
                             "cudaMemcpyAsync (sum_to)");
    });
  }
  if (nx == 0)
    return KernelFn([=](const StepContext &) {
      return launchZero(y.p, ny * elemBytes(y.e), s);
    });
  // Split x's dims into kept (y's dim equals x's) and reduced (y's is 1 or
  // absent); size-1 dims of x contribute nothing. The kept dims, in order,
  // enumerate y's elements row-major: y's other dims are all 1.
  size_t shift = xs.size() - ys.size();
  std::vector<bool> reduced(xs.size());
  for (size_t d = 0; d < xs.size(); ++d)
    reduced[d] = !(d >= shift && ys[d - shift] == xs[d]);
  LOOM_ASSIGN_OR_RETURN(SumToIndex index, reductionIndex(xs, reduced));
  LOOM_ASSIGN_OR_RETURN(DeviceBuffer ws, reduceWorkspace(ctx, ny, index));
  return KernelFn([=](const StepContext &) {
    return launchReduce(ReduceKind::Sum, x, y, ny, index,
                        static_cast<float *>(ws.get()), s);
  });
}

// --- losses ------------------------------------------------------------------

StatusOr<KernelFn> bindCrossEntropy(const OpView &op, BindContext &ctx) {
  CudaDevice &dev = cudaDevice(ctx);
  LOOM_ASSIGN_OR_RETURN(FloatIn logits, floatIn(op, ctx, 0));
  LOOM_RETURN_IF_ERROR(expectDType(op, false, 1, plan::I64));
  LOOM_RETURN_IF_ERROR(expectDType(op, true, 0, plan::F32));
  const int64_t *target = ctx.i64(op.inputs[1]);
  float *loss = ctx.f32(op.outputs[0]);
  int64_t classes = op.inShape(0).back();
  int64_t rows = op.inNumel(0) / classes;
  LOOM_ASSIGN_OR_RETURN(int64_t count, cpu::meanCount(op, rows));
  LOOM_ASSIGN_OR_RETURN(DeviceBuffer ws,
                        dev.allocateWorkspace(rows * sizeof(float)));
  int check = dev.registerCheck(
      checkContext(op),
      "target class id %2$lld in row %1$lld is outside [0, %3$lld)");
  DataCheckRecord *record = dev.checkRecord();
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchCrossEntropy(logits, target, loss, rows, classes, count,
                              static_cast<float *>(ws.get()), check, record, s);
  });
}

StatusOr<KernelFn> bindCrossEntropyGrad(const OpView &op, BindContext &ctx) {
  CudaDevice &dev = cudaDevice(ctx);
  LOOM_ASSIGN_OR_RETURN(FloatIn logits, floatIn(op, ctx, 0));
  LOOM_RETURN_IF_ERROR(expectDType(op, false, 1, plan::I64));
  LOOM_ASSIGN_OR_RETURN(FloatOut grad, floatOut(op, ctx, 0));
  const int64_t *target = ctx.i64(op.inputs[1]);
  int64_t classes = op.inShape(0).back();
  int64_t rows = op.inNumel(0) / classes;
  LOOM_ASSIGN_OR_RETURN(int64_t count, cpu::meanCount(op, rows));
  int check = dev.registerCheck(
      checkContext(op),
      "target class id %2$lld in row %1$lld is outside [0, %3$lld)");
  DataCheckRecord *record = dev.checkRecord();
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchCrossEntropyGrad(logits, target, grad, rows, classes, count,
                                  check, record, s);
  });
}

StatusOr<KernelFn> bindMse(const OpView &op, BindContext &ctx) {
  LOOM_RETURN_IF_ERROR(expectAllF32(op));
  CudaDevice &dev = cudaDevice(ctx);
  const float *pred = ctx.f32(op.inputs[0]), *target = ctx.f32(op.inputs[1]);
  float *loss = ctx.f32(op.outputs[0]);
  int64_t n = op.inNumel(0);
  LOOM_ASSIGN_OR_RETURN(int64_t count, cpu::meanCount(op, n));
  LOOM_ASSIGN_OR_RETURN(DeviceBuffer ws,
                        dev.allocateWorkspace(msePartials(n) * sizeof(double)));
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchMse(pred, target, loss, n, count,
                     static_cast<double *>(ws.get()), s);
  });
}

StatusOr<KernelFn> bindMseGrad(const OpView &op, BindContext &ctx) {
  LOOM_RETURN_IF_ERROR(expectAllF32(op));
  const float *pred = ctx.f32(op.inputs[0]), *target = ctx.f32(op.inputs[1]);
  float *grad = ctx.f32(op.outputs[0]);
  int64_t n = op.inNumel(0);
  LOOM_ASSIGN_OR_RETURN(int64_t count, cpu::meanCount(op, n));
  float factor = count ? 2.0f / static_cast<float>(count) : 0.0f;
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    return launchMseGrad(pred, target, grad, n, factor, s);
  });
}

// --- communication -----------------------------------------------------------

StatusOr<KernelFn> bindAllReduce(const OpView &op, BindContext &ctx) {
  // The communicator sums fp32 (docs/cuda.md: gradients of parameters stay
  // fp32 under bf16 storage).
  LOOM_RETURN_IF_ERROR(expectAllF32(op));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes, op.intsAttr("axes"));
  std::sort(axes.begin(), axes.end());
  Communicator *comm = ctx.commForAxes(axes);
  if (!comm)
    return makeError("no communicator for the requested mesh axes");
  const float *x = ctx.f32(op.inputs[0]);
  float *y = ctx.f32(op.outputs[0]);
  int64_t n = op.outNumel(0);
  cudaStream_t s = cudaDevice(ctx).stream();
  // The communicator is NCCL on the same stream, or host staging whose copy
  // out is enqueued on it (or a one-rank world, where the sum is the
  // identity), so the reduction is ordered after the copy.
  return KernelFn([=](const StepContext &) {
    if (x != y && n > 0)
      LOOM_RETURN_IF_ERROR(cudaCheck(
          cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync (all_reduce)"));
    return comm->allReduceSum(y, n);
  });
}

StatusOr<KernelFn> bindAllSlice(const OpView &op, BindContext &ctx) {
  // This rank's block: strided rows of bytes, any element type.
  LOOM_ASSIGN_OR_RETURN(cpu::BlockCopy c, cpu::allSliceCopy(op, ctx));
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([c, s](const StepContext &) {
    if (c.rows == 0 || c.blockBytes == 0)
      return Status::ok();
    return cudaCheck(cudaMemcpy2DAsync(c.dst, c.blockBytes, c.src, c.rowBytes,
                                       c.blockBytes, c.rows,
                                       cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpy2DAsync (all_slice)");
  });
}

// --- optimizers --------------------------------------------------------------

StatusOr<KernelFn> bindSgd(const OpView &op, BindContext &ctx) {
  LOOM_RETURN_IF_ERROR(expectAllF32(op));
  LOOM_ASSIGN_OR_RETURN(double lr, op.numAttr("lr"));
  LOOM_ASSIGN_OR_RETURN(double momentum, op.numAttr("momentum", 0.0));
  LOOM_ASSIGN_OR_RETURN(double wd, op.numAttr("weight_decay", 0.0));
  LOOM_ASSIGN_OR_RETURN(double dampening, op.numAttr("dampening", 0.0));
  LOOM_ASSIGN_OR_RETURN(double nesterov, op.numAttr("nesterov", 0.0));
  float *p = ctx.f32(op.inputs[0]);
  const float *g = ctx.f32(op.inputs[1]);
  float *buf = op.inputs.size() == 3 ? ctx.f32(op.inputs[2]) : nullptr;
  int64_t n = op.inNumel(0);
  // The CPU kernel's float scalars: keep = float(1.0 - dampening).
  SgdArgs args{static_cast<float>(lr),
               static_cast<float>(wd),
               static_cast<float>(momentum),
               static_cast<float>(1.0 - dampening),
               nesterov != 0,
               false};
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &sc) {
    SgdArgs a = args;
    a.first = sc.step == 0;
    return launchSgd(p, g, buf, n, a, s);
  });
}

StatusOr<KernelFn> bindAdamW(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(double lr, op.numAttr("lr"));
  LOOM_ASSIGN_OR_RETURN(double beta1, op.numAttr("beta1", 0.9));
  LOOM_ASSIGN_OR_RETURN(double beta2, op.numAttr("beta2", 0.999));
  LOOM_ASSIGN_OR_RETURN(double eps, op.numAttr("eps", 1e-8));
  LOOM_ASSIGN_OR_RETURN(double wd, op.numAttr("weight_decay", 0.01));
  // Parameters and moments are fp32; the gradient may be bf16.
  for (size_t i : {0, 2, 3})
    LOOM_RETURN_IF_ERROR(expectDType(op, false, i, plan::F32));
  for (size_t i = 0; i < op.outputs.size(); ++i)
    LOOM_RETURN_IF_ERROR(expectDType(op, true, i, plan::F32));
  float *p = ctx.f32(op.inputs[0]);
  LOOM_ASSIGN_OR_RETURN(FloatIn g, floatIn(op, ctx, 1));
  float *m = ctx.f32(op.inputs[2]);
  float *v = ctx.f32(op.inputs[3]);
  int64_t n = op.inNumel(0);
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &sc) {
    // Host-side scalars exactly as runtime/kernels/cpu/Optimizer.cpp.
    double t = static_cast<double>(sc.step + 1);
    AdamWArgs a;
    a.decay = static_cast<float>(1.0 - lr * wd);
    a.w1 = static_cast<float>(1.0 - beta1);
    a.b2 = static_cast<float>(beta2);
    a.w2 = static_cast<float>(1.0 - beta2);
    double bc1 = 1.0 - std::pow(beta1, t);
    double bc2 = 1.0 - std::pow(beta2, t);
    a.stepSize = static_cast<float>(lr / bc1);
    a.bc2Sqrt = static_cast<float>(std::sqrt(bc2));
    a.eps = static_cast<float>(eps);
    return launchAdamW(p, g, m, v, n, a, s);
  });
}

// --- softmax and normalisation -----------------------------------------------

StatusOr<KernelFn> bindSoftmax(const OpView &op, BindContext &ctx) {
  std::vector<int64_t> xs = op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", xs.size()));
  int64_t outer = product(xs, 0, axis), dim = xs[axis],
          inner = product(xs, axis + 1, xs.size());
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    return launchSoftmax(x, y, outer, dim, inner, s);
  });
}

StatusOr<KernelFn> bindSoftmaxGrad(const OpView &op, BindContext &ctx) {
  std::vector<int64_t> xs = op.inShape(0);
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", xs.size()));
  int64_t outer = product(xs, 0, axis), dim = xs[axis],
          inner = product(xs, axis + 1, xs.size());
  LOOM_ASSIGN_OR_RETURN(FloatIn dy, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn y, floatIn(op, ctx, 1));
  LOOM_ASSIGN_OR_RETURN(FloatOut dx, floatOut(op, ctx, 0));
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    return launchSoftmaxGrad(dy, y, dx, outer, dim, inner, s);
  });
}

namespace {

struct NormView {
  int64_t rows, cols;
  float eps;
};

/// `[rows, cols]` over dims `[axis, rank)` of input `xIn`, as the CPU kernel.
StatusOr<NormView> normView(const OpView &op, size_t xIn) {
  std::vector<int64_t> xs = op.inShape(xIn);
  if (xs.empty())
    return makeError("input must have rank >= 1");
  LOOM_ASSIGN_OR_RETURN(int64_t axis, axisAttr(op, "axis", xs.size()));
  LOOM_ASSIGN_OR_RETURN(double eps, op.numAttr("epsilon"));
  return NormView{product(xs, 0, axis), product(xs, axis, xs.size()),
                  static_cast<float>(eps)};
}

} // namespace

StatusOr<KernelFn> bindLayerNorm(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(NormView v, normView(op, 0));
  bool rms = op.inst.op() == "rms_norm";
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn scale, floatIn(op, ctx, 1));
  FloatIn bias;
  if (op.inputs.size() == 3) {
    LOOM_ASSIGN_OR_RETURN(bias, floatIn(op, ctx, 2));
  }
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  cudaStream_t s = cudaDevice(ctx).stream();
  return KernelFn([=](const StepContext &) {
    return launchLayerNorm(x, scale, bias, y, v.rows, v.cols, v.eps, rms, s);
  });
}

StatusOr<KernelFn> bindLayerNormGrad(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(NormView v, normView(op, 1));
  bool rms = op.inst.op() == "rms_norm_grad";
  LOOM_ASSIGN_OR_RETURN(FloatIn dy, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 1));
  LOOM_ASSIGN_OR_RETURN(FloatIn scale, floatIn(op, ctx, 2));
  LOOM_ASSIGN_OR_RETURN(FloatOut dx, floatOut(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatOut dscale, floatOut(op, ctx, 1));
  FloatOut dbias;
  if (op.outputs.size() == 3) {
    LOOM_ASSIGN_OR_RETURN(dbias, floatOut(op, ctx, 2));
  }
  CudaDevice &dev = cudaDevice(ctx);
  LOOM_ASSIGN_OR_RETURN(DeviceBuffer ws,
                        dev.allocateWorkspace(2 * v.rows * sizeof(float)));
  int64_t chunks = layerNormGradChunks(v.rows, v.cols);
  LOOM_ASSIGN_OR_RETURN(
      DeviceBuffer partials,
      dev.allocateWorkspace(2 * chunks * v.cols * sizeof(double)));
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchLayerNormGrad(dy, x, scale, dx, dscale, dbias, v.rows, v.cols,
                               v.eps, rms, static_cast<float *>(ws.get()),
                               static_cast<double *>(partials.get()), s);
  });
}

} // namespace loom::runtime::cuda
