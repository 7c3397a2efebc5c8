//===- Elementwise.cu - Element-wise CUDA kernels ------------------*- CUDA
//-*-===//
//
// Binary ops with NumPy broadcasting, unary ops and their gradients, scale,
// mse_grad, and the SGD / AdamW updates. All are grid-stride loops over
// 64-bit indices with the same float arithmetic as the CPU kernels
// (runtime/kernels/cpu/), so results agree to rounding of libm vs CUDA math.
// Float operands are f32 or bf16 (`FloatIn` / `FloatOut`, widened on load,
// rounded to nearest even on store); mse, mse_grad and sgd are f32 only.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaElem.cuh"

namespace loom::runtime::cuda {

namespace {

template <BinaryOp Op>
__device__ __forceinline__ float binary(float x, float y) {
  if constexpr (Op == BinaryOp::Add)
    return x + y;
  else if constexpr (Op == BinaryOp::Sub)
    return x - y;
  else if constexpr (Op == BinaryOp::Mul)
    return x * y;
  else if constexpr (Op == BinaryOp::Div)
    return x / y;
  else if constexpr (Op == BinaryOp::Pow)
    return powf(x, y);
  else if constexpr (Op == BinaryOp::Max) // NaN propagates (torch.maximum)
    return (x > y || isnan(x)) ? x : y;
  else
    return (x < y || isnan(x)) ? x : y;
}

template <BinaryOp Op>
__global__ void binaryKernel(BroadcastMode mode, FloatIn a, FloatIn b,
                             FloatOut c, int64_t n, BroadcastIndex index) {
  LOOM_GRID_STRIDE(i, n) {
    int64_t ia = i, ib = i;
    if (mode == BroadcastMode::ScalarB) {
      ib = 0;
    } else if (mode == BroadcastMode::ScalarA) {
      ia = 0;
    } else if (mode == BroadcastMode::General) {
      ia = 0;
      ib = 0;
      int64_t rem = i;
      for (int d = index.rank - 1; d >= 0; --d) {
        int64_t idx = rem % index.dims[d];
        rem /= index.dims[d];
        ia += idx * index.strideA[d];
        ib += idx * index.strideB[d];
      }
    }
    store(c, i, binary<Op>(load(a, ia), load(b, ib)));
  }
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kGeluCubic = 0.044715f;

template <UnaryOp Op> __device__ __forceinline__ float unary(float v) {
  if constexpr (Op == UnaryOp::Relu)
    return v > 0.0f ? v : 0.0f;
  else if constexpr (Op == UnaryOp::Tanh)
    return tanhf(v);
  else if constexpr (Op == UnaryOp::Sigmoid)
    return 1.0f / (1.0f + expf(-v));
  else if constexpr (Op == UnaryOp::Exp)
    return expf(v);
  else if constexpr (Op == UnaryOp::Log)
    return logf(v);
  else if constexpr (Op == UnaryOp::Sqrt)
    return sqrtf(v);
  else if constexpr (Op == UnaryOp::Rsqrt)
    return 1.0f / sqrtf(v);
  else if constexpr (Op == UnaryOp::Neg)
    return -v;
  else if constexpr (Op == UnaryOp::Reciprocal)
    return 1.0f / v;
  else if constexpr (Op == UnaryOp::Erf)
    return erff(v);
  else if constexpr (Op == UnaryOp::Gelu)
    return 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  else { // GeluTanh: 0.5 v (1 + tanh(u)) = v sigmoid(2u)
    float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    return v / (1.0f + expf(-2.0f * u));
  }
}

template <UnaryOp Op>
__global__ void unaryKernel(FloatIn x, FloatOut y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) { store(y, i, unary<Op>(load(x, i))); }
}

template <UnaryGradOp Op>
__device__ __forceinline__ float unaryGrad(float dy, float v) {
  if constexpr (Op == UnaryGradOp::Relu)
    return v > 0.0f ? dy : 0.0f;
  else if constexpr (Op == UnaryGradOp::Tanh) // v = y
    return dy * (1.0f - v * v);
  else if constexpr (Op == UnaryGradOp::Sigmoid) // v = y
    return dy * v * (1.0f - v);
  else if constexpr (Op == UnaryGradOp::Gelu) {
    float cdf = 0.5f * (1.0f + erff(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
    return dy * (cdf + v * pdf);
  } else { // GeluTanh, as runtime/kernels/cpu/Activation.cpp
    float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    float m = -2.0f * u;
    float e = expf(m > 88.0f ? 88.0f : m);
    float sg = 1.0f / (1.0f + e);
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    return dy * (sg + 2.0f * v * sg * (e * sg) * du);
  }
}

template <UnaryGradOp Op>
__global__ void unaryGradKernel(FloatIn dy, FloatIn v, FloatOut dx, int64_t n) {
  LOOM_GRID_STRIDE(i, n) {
    store(dx, i, unaryGrad<Op>(load(dy, i), load(v, i)));
  }
}

__global__ void fillRowsKernel(FloatOut c, FloatIn row, int64_t n,
                               int64_t cols) {
  LOOM_GRID_STRIDE(i, n) { store(c, i, load(row, i % cols)); }
}

// In place allowed: each element is read before it is written.
__global__ void scaleKernel(FloatIn x, FloatOut y, int64_t n, float f) {
  LOOM_GRID_STRIDE(i, n) { store(y, i, load(x, i) * f); }
}

__global__ void mseGradKernel(const float *__restrict__ pred,
                              const float *__restrict__ target,
                              float *__restrict__ grad, int64_t n, float f) {
  LOOM_GRID_STRIDE(i, n) { grad[i] = f * (pred[i] - target[i]); }
}

// p and buf are updated in place; g is distinct (verified at load time).
__global__ void sgdKernel(float *p, const float *__restrict__ g, float *buf,
                          int64_t n, SgdArgs a) {
  LOOM_GRID_STRIDE(i, n) {
    float d = g[i];
    if (a.weightDecay != 0)
      d = d + a.weightDecay * p[i];
    if (buf) {
      buf[i] = a.first ? d : buf[i] * a.momentum + a.keep * d;
      d = a.nesterov ? d + a.momentum * buf[i] : buf[i];
    }
    p[i] = p[i] - a.lr * d;
  }
}

__global__ void adamwKernel(float *__restrict__ p, FloatIn g,
                            float *__restrict__ m, float *__restrict__ v,
                            int64_t n, AdamWArgs a) {
  LOOM_GRID_STRIDE(i, n) {
    float pi = p[i] * a.decay;
    float gi = load(g, i);
    float mi = m[i] + a.w1 * (gi - m[i]); // lerp(m, g, 1 - beta1)
    float vi = v[i] * a.b2 + a.w2 * gi * gi;
    float denom = sqrtf(vi) / a.bc2Sqrt + a.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - a.stepSize * (mi / denom);
  }
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchBinary(BinaryOp op, BroadcastMode mode, FloatIn a, FloatIn b,
                    FloatOut c, int64_t n, const BroadcastIndex &index,
                    cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  unsigned g = blocksFor(n);
  switch (op) {
  case BinaryOp::Add:
    binaryKernel<BinaryOp::Add>
        <<<g, kThreads, 0, stream>>>(mode, a, b, c, n, index);
    break;
  case BinaryOp::Sub:
    binaryKernel<BinaryOp::Sub>
        <<<g, kThreads, 0, stream>>>(mode, a, b, c, n, index);
    break;
  case BinaryOp::Mul:
    binaryKernel<BinaryOp::Mul>
        <<<g, kThreads, 0, stream>>>(mode, a, b, c, n, index);
    break;
  case BinaryOp::Div:
    binaryKernel<BinaryOp::Div>
        <<<g, kThreads, 0, stream>>>(mode, a, b, c, n, index);
    break;
  case BinaryOp::Pow:
    binaryKernel<BinaryOp::Pow>
        <<<g, kThreads, 0, stream>>>(mode, a, b, c, n, index);
    break;
  case BinaryOp::Max:
    binaryKernel<BinaryOp::Max>
        <<<g, kThreads, 0, stream>>>(mode, a, b, c, n, index);
    break;
  case BinaryOp::Min:
    binaryKernel<BinaryOp::Min>
        <<<g, kThreads, 0, stream>>>(mode, a, b, c, n, index);
    break;
  }
  return launchCheck("binary kernel");
}

Status launchUnary(UnaryOp op, FloatIn x, FloatOut y, int64_t n,
                   cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  unsigned g = blocksFor(n);
#define LOOM_UNARY_CASE(name)                                                  \
  case UnaryOp::name:                                                          \
    unaryKernel<UnaryOp::name><<<g, kThreads, 0, stream>>>(x, y, n);           \
    break;
  switch (op) {
    LOOM_UNARY_CASE(Relu)
    LOOM_UNARY_CASE(Tanh)
    LOOM_UNARY_CASE(Sigmoid)
    LOOM_UNARY_CASE(Exp)
    LOOM_UNARY_CASE(Log)
    LOOM_UNARY_CASE(Sqrt)
    LOOM_UNARY_CASE(Rsqrt)
    LOOM_UNARY_CASE(Neg)
    LOOM_UNARY_CASE(Reciprocal)
    LOOM_UNARY_CASE(Erf)
    LOOM_UNARY_CASE(Gelu)
    LOOM_UNARY_CASE(GeluTanh)
  }
#undef LOOM_UNARY_CASE
  return launchCheck("unary kernel");
}

Status launchUnaryGrad(UnaryGradOp op, FloatIn dy, FloatIn xy, FloatOut dx,
                       int64_t n, cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  unsigned g = blocksFor(n);
#define LOOM_GRAD_CASE(name)                                                   \
  case UnaryGradOp::name:                                                      \
    unaryGradKernel<UnaryGradOp::name>                                         \
        <<<g, kThreads, 0, stream>>>(dy, xy, dx, n);                           \
    break;
  switch (op) {
    LOOM_GRAD_CASE(Relu)
    LOOM_GRAD_CASE(Tanh)
    LOOM_GRAD_CASE(Sigmoid)
    LOOM_GRAD_CASE(Gelu)
    LOOM_GRAD_CASE(GeluTanh)
  }
#undef LOOM_GRAD_CASE
  return launchCheck("unary gradient kernel");
}

Status launchScale(FloatIn x, FloatOut y, int64_t n, float factor,
                   cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n, factor);
  return launchCheck("scale kernel");
}

Status launchFillRows(FloatOut c, FloatIn row, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  int64_t n = rows * cols;
  if (n == 0)
    return Status::ok();
  fillRowsKernel<<<blocksFor(n), kThreads, 0, stream>>>(c, row, n, cols);
  return launchCheck("bias fill kernel");
}

Status launchMseGrad(const float *pred, const float *target, float *grad,
                     int64_t n, float factor, cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  mseGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(pred, target, grad, n,
                                                       factor);
  return launchCheck("mse_grad kernel");
}

Status launchSgd(float *p, const float *g, float *buf, int64_t n,
                 const SgdArgs &args, cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, g, buf, n, args);
  return launchCheck("sgd kernel");
}

Status launchAdamW(float *p, FloatIn g, float *m, float *v, int64_t n,
                   const AdamWArgs &args, cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
  adamwKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, g, m, v, n, args);
  return launchCheck("adamw kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
