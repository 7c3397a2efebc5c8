//===- CudaLaunch.h - Host entry points of the CUDA kernels -------*- C++
//-*-===//
//
// The `.cu` files hold only kernels and these launchers; the `bind`
// functions (plain C++, CudaKernels.cpp) resolve shapes and attributes once
// and call a launcher per step. Launchers enqueue on `stream` and return the
// launch error (execution errors surface at the next synchronize).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDALAUNCH_H
#define LOOM_RUNTIME_CUDA_CUDALAUNCH_H

#include "runtime/cuda/CudaDevice.h"

#include <cstdint>

namespace loom::runtime::cuda {

/// Most dims a broadcast or reduction index handles (more fail at bind).
constexpr int kMaxDims = 8;

enum class BinaryOp { Add, Sub, Mul, Div, Pow, Max, Min };
enum class UnaryOp {
  Relu,
  Tanh,
  Sigmoid,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Neg,
  Reciprocal,
  Erf,
  Gelu,
  GeluTanh
};
/// `dx = dy * f'(.)`; the second operand is `x` for relu and gelu, the
/// forward output `y` for tanh and sigmoid (docs/plan-format.md).
enum class UnaryGradOp { Relu, Tanh, Sigmoid, Gelu, GeluTanh };

/// How `a` and `b` reach the output: `Same` (both have the output's
/// elements), `ScalarB`, `ScalarA`, or `General` (strided, below).
enum class BroadcastMode { Same, ScalarB, ScalarA, General };

/// Output dims and each operand's element stride per output dim (0 where
/// broadcast).
struct BroadcastIndex {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strideA[kMaxDims] = {};
  int64_t strideB[kMaxDims] = {};
};

/// `sum_to`: output element `j` (row-major over `kept` dims) sums the input
/// at `base(j) + offset(k)` for `k` in `[0, reduced)` (row-major over `red`
/// dims); strides are the input's.
struct SumToIndex {
  int keptRank = 0, redRank = 0;
  int64_t keptDims[kMaxDims] = {}, keptStrides[kMaxDims] = {};
  int64_t redDims[kMaxDims] = {}, redStrides[kMaxDims] = {};
  int64_t reduced = 1;
};

Status launchBinary(BinaryOp op, BroadcastMode mode, const float *a,
                    const float *b, float *c, int64_t n,
                    const BroadcastIndex &index, cudaStream_t stream);
Status launchUnary(UnaryOp op, const float *x, float *y, int64_t n,
                   cudaStream_t stream);
Status launchUnaryGrad(UnaryGradOp op, const float *dy, const float *xy,
                       float *dx, int64_t n, cudaStream_t stream);
/// Every one of the `rows` rows of `c` (`cols` wide) becomes `row`.
Status launchFillRows(float *c, const float *row, int64_t rows, int64_t cols,
                      cudaStream_t stream);
/// `y = x * factor` (in place allowed).
Status launchScale(const float *x, float *y, int64_t n, float factor,
                   cudaStream_t stream);
/// `y` has `ny` elements; `x` is read through `index`.
Status launchSumTo(const float *x, float *y, int64_t ny,
                   const SumToIndex &index, cudaStream_t stream);

/// Mean cross-entropy of `rows` rows of `classes` logits; `rowLoss` is
/// `rows` floats of workspace. A target outside `[0, classes)` is recorded
/// in `record` with id `check` (row, value, classes) and contributes 0.
Status launchCrossEntropy(const float *logits, const int64_t *target,
                          float *loss, int64_t rows, int64_t classes,
                          float *rowLoss, int check, DataCheckRecord *record,
                          cudaStream_t stream);
Status launchCrossEntropyGrad(const float *logits, const int64_t *target,
                              float *grad, int64_t rows, int64_t classes,
                              int check, DataCheckRecord *record,
                              cudaStream_t stream);
/// Number of partial sums `launchMse` needs as workspace (doubles).
int64_t msePartials(int64_t n);
Status launchMse(const float *pred, const float *target, float *loss, int64_t n,
                 double *partials, cudaStream_t stream);
/// `grad = factor * (pred - target)`.
Status launchMseGrad(const float *pred, const float *target, float *grad,
                     int64_t n, float factor, cudaStream_t stream);

struct SgdArgs {
  float lr, weightDecay, momentum, keep; // keep = 1 - dampening
  bool nesterov, first;
};
Status launchSgd(float *p, const float *g, float *buf, int64_t n,
                 const SgdArgs &args, cudaStream_t stream);
/// Scalars as the CPU kernel computes them for step t (host side).
struct AdamWArgs {
  float decay, w1, b2, w2, stepSize, bc2Sqrt, eps;
};
Status launchAdamW(float *p, const float *g, float *m, float *v, int64_t n,
                   const AdamWArgs &args, cudaStream_t stream);

/// Softmax of `x` viewed as `[outer, dim, inner]` along `dim`.
Status launchSoftmax(const float *x, float *y, int64_t outer, int64_t dim,
                     int64_t inner, cudaStream_t stream);
/// `dx = y * (dy - sum(dy * y))` along `dim`.
Status launchSoftmaxGrad(const float *dy, const float *y, float *dx,
                         int64_t outer, int64_t dim, int64_t inner,
                         cudaStream_t stream);
/// Layer norm (or RMS norm with `rms`) of `rows` contiguous rows of `cols`.
/// `bias` may be null.
Status launchLayerNorm(const float *x, const float *scale, const float *bias,
                       float *y, int64_t rows, int64_t cols, float eps,
                       bool rms, cudaStream_t stream);
/// `dx` per row; `dscale` (and `dbias` unless null) summed over rows.
/// `stats` is `2 * rows` floats of workspace (each row's mean and rstd).
Status launchLayerNormGrad(const float *dy, const float *x, const float *scale,
                           float *dx, float *dscale, float *dbias, int64_t rows,
                           int64_t cols, float eps, bool rms, float *stats,
                           cudaStream_t stream);

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_CUDALAUNCH_H
