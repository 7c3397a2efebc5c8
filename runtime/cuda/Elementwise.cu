//===- Elementwise.cu - Element-wise CUDA kernels ------------------*- CUDA
//-*-===//
//
// Binary ops with NumPy broadcasting, unary ops and their gradients, scale,
// mse_grad, and the SGD / AdamW updates, with the same float arithmetic as
// the CPU kernels (runtime/kernels/cpu/), so results agree to rounding of
// libm vs CUDA math. Float operands are f32 or bf16 (`FloatIn` /
// `FloatOut`, widened on load, rounded to nearest even on store); mse,
// mse_grad and sgd are f32 only.
//
// Two forms of each op compute the same thing per element. The pack
// kernels (`...PackKernel`), templated on one storage type of all operands,
// give each thread 8 elements through 16-byte vector accesses (bf16 moves
// at the memory's speed only so) and finish a tail of `n % 8` elements one
// by one; the binary one also takes a row broadcast (`[rows, cols] op
// [cols]`, either side, `cols % 8 == 0`) or a scalar operand, and the bias
// fill before a GEMM (`fillRowsPackKernel`) any two storages. The generic
// kernels, grid-stride loops over 64-bit indices with the storage read per
// operand at run time, take the rest: mixed storages, 16-byte misaligned
// pointers, other broadcasts (index math per element).
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
  else if constexpr (Op == BinaryOp::Equal)
    return x == y ? 1.0f : 0.0f;
  else if constexpr (Op == BinaryOp::Less)
    return x < y ? 1.0f : 0.0f;
  else if constexpr (Op == BinaryOp::LessEqual)
    return x <= y ? 1.0f : 0.0f;
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

/// How an operand of the binary pack kernel reaches output element `i`.
enum class Arg { Full, Row, Scalar };

/// The 8 values of the operand for output elements `[i, i + 8)`; a `Row`
/// operand has `cols % 8 == 0`, so a pack never crosses a row.
template <Arg K, typename T>
__device__ __forceinline__ void loadArg(const T *p, int64_t i, int64_t cols,
                                        float (&v)[kPack]) {
  if constexpr (K == Arg::Full) {
    loadPack(p + i, v);
  } else if constexpr (K == Arg::Row) {
    loadPack(p + i % cols, v);
  } else {
    float x = toFloat(p[0]);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      v[k] = x;
  }
}

template <Arg K, typename T>
__device__ __forceinline__ float loadArg1(const T *p, int64_t i, int64_t cols) {
  if constexpr (K == Arg::Full)
    return toFloat(p[i]);
  else if constexpr (K == Arg::Row)
    return toFloat(p[i % cols]);
  else
    return toFloat(p[0]);
}

/// `c = a op b` over `n` elements, all of storage `T`, 16-byte aligned;
/// `cols` is the row length of a `Row` operand.
template <BinaryOp Op, typename T, Arg KA, Arg KB>
__global__ void binaryPackKernel(const T *a, const T *b, T *c, int64_t n,
                                 int64_t cols) {
  int64_t packs = n / kPack;
  LOOM_GRID_STRIDE(p, packs) {
    int64_t i = p * kPack;
    float x[kPack], y[kPack];
    loadArg<KA>(a, i, cols, x);
    loadArg<KB>(b, i, cols, y);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      x[k] = binary<Op>(x[k], y[k]);
    storePack(c + i, x);
  }
  LOOM_PACK_TAIL(i, packs * kPack, n) {
    c[i] = fromFloat<T>(
        binary<Op>(loadArg1<KA>(a, i, cols), loadArg1<KB>(b, i, cols)));
  }
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kGeluCubic = 0.044715f;

template <UnaryOp Op> __device__ __forceinline__ float unary(float v) {
  if constexpr (Op == UnaryOp::Relu)
    return !(v <= 0.0f) ? v : 0.0f; // NaN stays NaN, as in torch.relu
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
  else if constexpr (Op == UnaryOp::Sin)
    return sinf(v);
  else if constexpr (Op == UnaryOp::Cos)
    return cosf(v);
  else if constexpr (Op == UnaryOp::Trunc)
    return truncf(v);
  else if constexpr (Op == UnaryOp::RoundF16)
    return __half2float(__float2half_rn(v));
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

template <UnaryOp Op, typename T>
__global__ void unaryPackKernel(const T *x, T *y, int64_t n) {
  int64_t packs = n / kPack;
  LOOM_GRID_STRIDE(p, packs) {
    float v[kPack];
    loadPack(x + p * kPack, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      v[k] = unary<Op>(v[k]);
    storePack(y + p * kPack, v);
  }
  LOOM_PACK_TAIL(i, packs * kPack, n) {
    y[i] = fromFloat<T>(unary<Op>(toFloat(x[i])));
  }
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

template <UnaryGradOp Op, typename T>
__global__ void unaryGradPackKernel(const T *dy, const T *v, T *dx, int64_t n) {
  int64_t packs = n / kPack;
  LOOM_GRID_STRIDE(p, packs) {
    float g[kPack], w[kPack];
    loadPack(dy + p * kPack, g);
    loadPack(v + p * kPack, w);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      g[k] = unaryGrad<Op>(g[k], w[k]);
    storePack(dx + p * kPack, g);
  }
  LOOM_PACK_TAIL(i, packs * kPack, n) {
    dx[i] = fromFloat<T>(unaryGrad<Op>(toFloat(dy[i]), toFloat(v[i])));
  }
}

__global__ void fillRowsKernel(FloatOut c, FloatIn row, int64_t n,
                               int64_t cols) {
  LOOM_GRID_STRIDE(i, n) { store(c, i, load(row, i % cols)); }
}

/// `c` rows of `cols % 8 == 0` elements become `row` (both 16-byte
/// aligned), a pack per thread.
template <typename R, typename C>
__global__ void fillRowsPackKernel(C *c, const R *row, int64_t n,
                                   int64_t cols) {
  LOOM_GRID_STRIDE(p, n / kPack) {
    float v[kPack];
    loadPack(row + (p * kPack) % cols, v);
    storePack(c + p * kPack, v);
  }
}

// In place allowed: each element is read before it is written.
__global__ void scaleKernel(FloatIn x, FloatOut y, int64_t n, float f) {
  LOOM_GRID_STRIDE(i, n) { store(y, i, load(x, i) * f); }
}

template <typename T>
__global__ void scalePackKernel(const T *x, T *y, int64_t n, float f) {
  int64_t packs = n / kPack;
  LOOM_GRID_STRIDE(p, packs) {
    float v[kPack];
    loadPack(x + p * kPack, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      v[k] = v[k] * f;
    storePack(y + p * kPack, v);
  }
  LOOM_PACK_TAIL(i, packs * kPack, n) {
    y[i] = fromFloat<T>(toFloat(x[i]) * f);
  }
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

/// The pack kernel form of a binary op, if one fits: both operands' `Arg`
/// and the row length of a `Row` one.
struct BinaryPack {
  bool ok = false;
  Arg a = Arg::Full, b = Arg::Full;
  int64_t cols = 1;
};

/// Row length when the operand with strides `st` over `ix.dims` is one
/// contiguous row of the innermost dims repeated over the outer ones (0
/// otherwise). Size-1 dims do not count.
inline int64_t rowLength(const BroadcastIndex &ix, const int64_t *st) {
  int64_t dense = 1;
  int d = ix.rank - 1;
  for (; d >= 0; --d) {
    if (ix.dims[d] == 1)
      continue;
    if (st[d] != dense)
      break;
    dense *= ix.dims[d];
  }
  for (; d >= 0; --d)
    if (ix.dims[d] != 1 && st[d] != 0)
      return 0;
  return dense;
}

inline BinaryPack planBinaryPack(BroadcastMode mode, FloatIn a, FloatIn b,
                                 FloatOut c, int64_t n,
                                 const BroadcastIndex &index) {
  BinaryPack p;
  if (a.e != c.e || b.e != c.e || !alignedTo(a.p, 16) || !alignedTo(b.p, 16) ||
      !alignedTo(c.p, 16))
    return p;
  p.ok = true;
  if (mode == BroadcastMode::ScalarB) {
    p.b = Arg::Scalar;
  } else if (mode == BroadcastMode::ScalarA) {
    p.a = Arg::Scalar;
  } else if (mode == BroadcastMode::General) {
    int64_t ra = rowLength(index, index.strideA),
            rb = rowLength(index, index.strideB);
    if (ra == n && rb > 0 && rb % kPack == 0) {
      p.b = Arg::Row;
      p.cols = rb;
    } else if (rb == n && ra > 0 && ra % kPack == 0) {
      p.a = Arg::Row;
      p.cols = ra;
    } else {
      p.ok = false;
    }
  }
  return p;
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

namespace {

template <BinaryOp Op, typename T>
void launchBinaryPack(const BinaryPack &p, FloatIn a, FloatIn b, FloatOut c,
                      int64_t n, cudaStream_t stream) {
  const T *pa = static_cast<const T *>(a.p), *pb = static_cast<const T *>(b.p);
  T *pc = static_cast<T *>(c.p);
  unsigned g = packBlocks(n);
#define LOOM_BINARY_PACK(ka, kb)                                               \
  binaryPackKernel<Op, T, Arg::ka, Arg::kb>                                    \
      <<<g, kThreads, 0, stream>>>(pa, pb, pc, n, p.cols)
  if (p.b == Arg::Row)
    LOOM_BINARY_PACK(Full, Row);
  else if (p.a == Arg::Row)
    LOOM_BINARY_PACK(Row, Full);
  else if (p.b == Arg::Scalar)
    LOOM_BINARY_PACK(Full, Scalar);
  else if (p.a == Arg::Scalar)
    LOOM_BINARY_PACK(Scalar, Full);
  else
    LOOM_BINARY_PACK(Full, Full);
#undef LOOM_BINARY_PACK
}

template <BinaryOp Op>
void launchBinaryOp(BroadcastMode mode, FloatIn a, FloatIn b, FloatOut c,
                    int64_t n, const BroadcastIndex &index,
                    cudaStream_t stream) {
  BinaryPack p = planBinaryPack(mode, a, b, c, n, index);
  if (!p.ok)
    binaryKernel<Op>
        <<<blocksFor(n), kThreads, 0, stream>>>(mode, a, b, c, n, index);
  else if (c.e == Elem::BF16)
    launchBinaryPack<Op, __nv_bfloat16>(p, a, b, c, n, stream);
  else
    launchBinaryPack<Op, float>(p, a, b, c, n, stream);
}

template <UnaryOp Op>
void launchUnaryOp(FloatIn x, FloatOut y, int64_t n, cudaStream_t stream) {
  bool pack = x.e == y.e && alignedTo(x.p, 16) && alignedTo(y.p, 16);
  if (!pack)
    unaryKernel<Op><<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
  else if (y.e == Elem::BF16)
    unaryPackKernel<Op><<<packBlocks(n), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(x.p),
        static_cast<__nv_bfloat16 *>(y.p), n);
  else
    unaryPackKernel<Op><<<packBlocks(n), kThreads, 0, stream>>>(
        static_cast<const float *>(x.p), static_cast<float *>(y.p), n);
}

template <UnaryGradOp Op>
void launchUnaryGradOp(FloatIn dy, FloatIn v, FloatOut dx, int64_t n,
                       cudaStream_t stream) {
  bool pack = dy.e == dx.e && v.e == dx.e && alignedTo(dy.p, 16) &&
              alignedTo(v.p, 16) && alignedTo(dx.p, 16);
  if (!pack)
    unaryGradKernel<Op><<<blocksFor(n), kThreads, 0, stream>>>(dy, v, dx, n);
  else if (dx.e == Elem::BF16)
    unaryGradPackKernel<Op><<<packBlocks(n), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(dy.p),
        static_cast<const __nv_bfloat16 *>(v.p),
        static_cast<__nv_bfloat16 *>(dx.p), n);
  else
    unaryGradPackKernel<Op><<<packBlocks(n), kThreads, 0, stream>>>(
        static_cast<const float *>(dy.p), static_cast<const float *>(v.p),
        static_cast<float *>(dx.p), n);
}

} // namespace

Status launchBinary(BinaryOp op, BroadcastMode mode, FloatIn a, FloatIn b,
                    FloatOut c, int64_t n, const BroadcastIndex &index,
                    cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
#define LOOM_BINARY_CASE(name)                                                 \
  case BinaryOp::name:                                                         \
    launchBinaryOp<BinaryOp::name>(mode, a, b, c, n, index, stream);           \
    break;
  switch (op) {
    LOOM_BINARY_CASE(Add)
    LOOM_BINARY_CASE(Sub)
    LOOM_BINARY_CASE(Mul)
    LOOM_BINARY_CASE(Div)
    LOOM_BINARY_CASE(Pow)
    LOOM_BINARY_CASE(Max)
    LOOM_BINARY_CASE(Min)
    LOOM_BINARY_CASE(Equal)
    LOOM_BINARY_CASE(Less)
    LOOM_BINARY_CASE(LessEqual)
  }
#undef LOOM_BINARY_CASE
  return launchCheck("binary kernel");
}

Status launchUnary(UnaryOp op, FloatIn x, FloatOut y, int64_t n,
                   cudaStream_t stream) {
  if (n == 0)
    return Status::ok();
#define LOOM_UNARY_CASE(name)                                                  \
  case UnaryOp::name:                                                          \
    launchUnaryOp<UnaryOp::name>(x, y, n, stream);                             \
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
    LOOM_UNARY_CASE(Sin)
    LOOM_UNARY_CASE(Cos)
    LOOM_UNARY_CASE(RoundF16)
    LOOM_UNARY_CASE(Trunc)
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
#define LOOM_GRAD_CASE(name)                                                   \
  case UnaryGradOp::name:                                                      \
    launchUnaryGradOp<UnaryGradOp::name>(dy, xy, dx, n, stream);               \
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
  bool pack = x.e == y.e && alignedTo(x.p, 16) && alignedTo(y.p, 16);
  if (!pack)
    scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n, factor);
  else if (y.e == Elem::BF16)
    scalePackKernel<<<packBlocks(n), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(x.p),
        static_cast<__nv_bfloat16 *>(y.p), n, factor);
  else
    scalePackKernel<<<packBlocks(n), kThreads, 0, stream>>>(
        static_cast<const float *>(x.p), static_cast<float *>(y.p), n, factor);
  return launchCheck("scale kernel");
}

Status launchFillRows(FloatOut c, FloatIn row, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  int64_t n = rows * cols;
  if (n == 0)
    return Status::ok();
  if (cols % kPack != 0 || !alignedTo(c.p, 16) || !alignedTo(row.p, 16)) {
    fillRowsKernel<<<blocksFor(n), kThreads, 0, stream>>>(c, row, n, cols);
    return launchCheck("bias fill kernel");
  }
  unsigned g = blocksFor(n / kPack);
  auto *rowF = static_cast<const float *>(row.p);
  auto *rowH = static_cast<const __nv_bfloat16 *>(row.p);
  auto *cF = static_cast<float *>(c.p);
  auto *cH = static_cast<__nv_bfloat16 *>(c.p);
  if (row.e == Elem::F32 && c.e == Elem::F32)
    fillRowsPackKernel<<<g, kThreads, 0, stream>>>(cF, rowF, n, cols);
  else if (row.e == Elem::F32)
    fillRowsPackKernel<<<g, kThreads, 0, stream>>>(cH, rowF, n, cols);
  else if (c.e == Elem::F32)
    fillRowsPackKernel<<<g, kThreads, 0, stream>>>(cF, rowH, n, cols);
  else
    fillRowsPackKernel<<<g, kThreads, 0, stream>>>(cH, rowH, n, cols);
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
