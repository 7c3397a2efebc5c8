//===- Loss.cu - CUDA cross-entropy and mse losses ----------------*- CUDA
//-*-===//
//
// cross_entropy, its gradient and mse. A cross-entropy row (a vocabulary of
// logits, 50257 for GPT-2) is one block: a single pass keeps each thread's
// running maximum and rescaled sum of exponentials (`MaxSum`) over 16-byte
// packs (the unaligned head and tail of a row scalar), then a fixed tree
// combines them. The gradient reads the row a second time (it was just read
// by the same block; the grid keeps the rows in flight within L2) and
// writes it. The kernels are templated on the storage type (the logits of
// the loss any storage; the gradient with the logits' storage and
// alignment, else the per-element `FloatIn` kernel). The mean over rows is
// one block summing in double in a fixed tree: deterministic.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/RowVec.cuh"

#include <cmath>

namespace loom::runtime::cuda {

namespace {

/// One block per row: `MaxSum` over the row in one pass.
template <typename T>
__global__ void crossEntropyRowsVecKernel(const T *__restrict__ logits,
                                          const int64_t *__restrict__ target,
                                          float *__restrict__ rowLoss,
                                          int64_t rows, int64_t classes,
                                          int check, DataCheckRecord *rec) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = logits + r * classes;
    MaxSum a;
    forRow(row, classes, [&](int64_t, const auto &v) { addMaxSum(a, v); });
    a = blockMaxSum(a);
    if (threadIdx.x == 0) {
      int64_t t = target[r];
      if (t < 0 || t >= classes) {
        reportCheck(rec, check, r, t, classes);
        rowLoss[r] = 0;
      } else {
        rowLoss[r] = a.m + logf(a.s) - toFloat(row[t]);
      }
    }
  }
}

/// `grad = (softmax(row) - onehot(target)) / rows`; `grad` has the logits'
/// storage and the same offset from a 16-byte boundary.
template <typename T>
__global__ void
crossEntropyGradVecKernel(const T *logits, const int64_t *__restrict__ target,
                          T *grad, int64_t rows, int64_t classes,
                          float invRows, int check, DataCheckRecord *rec) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = logits + r * classes;
    T *out = grad + r * classes;
    MaxSum a;
    forRow(row, classes, [&](int64_t, const auto &v) { addMaxSum(a, v); });
    a = blockMaxSum(a);
    int64_t t = target[r];
    if (!(t >= 0 && t < classes) && threadIdx.x == 0)
      reportCheck(rec, check, r, t, classes);
    float mx = a.m, s = a.s, k = invRows / s;
    forRow(row, classes, [&](int64_t c, const auto &v) {
      constexpr int n = sizeof(v) / sizeof(float);
      float g[n];
#pragma unroll
      for (int j = 0; j < n; ++j) {
        float p = expf(v[j] - mx);
        g[j] = c + j == t ? (p / s - 1.0f) * invRows : p * k;
      }
      if constexpr (n == 1)
        out[c] = fromFloat<T>(g[0]);
      else
        storePack<T, n>(out + c, g);
    });
  }
}

/// `out[0] = sum(values[0, n)) * scale`, in one block, accumulated in double.
template <typename T>
__global__ void finishSumKernel(const T *__restrict__ values, int64_t n,
                                double scale, float *__restrict__ out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += static_cast<double>(values[i]);
  s = blockSum(s);
  if (threadIdx.x == 0)
    out[0] = static_cast<float>(s * scale);
}

/// Any storage for logits and gradient (the fallback of the fast path).
__global__ void crossEntropyGradKernel(FloatIn logits,
                                       const int64_t *__restrict__ target,
                                       FloatOut grad, int64_t rows,
                                       int64_t classes, float invRows,
                                       int check, DataCheckRecord *rec) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t row = r * classes;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      mx = fmaxf(mx, load(logits, row + c));
    mx = blockMax(mx);
    float s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += expf(load(logits, row + c) - mx);
    s = blockSum(s);
    int64_t t = target[r];
    bool valid = t >= 0 && t < classes;
    if (!valid && threadIdx.x == 0)
      reportCheck(rec, check, r, t, classes);
    float k = invRows / s;
    // g = (softmax - onehot) / rows
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      float p = expf(load(logits, row + c) - mx);
      store(grad, row + c, c == t ? (p / s - 1.0f) * invRows : p * k);
    }
  }
}

__global__ void msePartialKernel(const float *__restrict__ pred,
                                 const float *__restrict__ target, int64_t n,
                                 double *__restrict__ partials) {
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    double d = static_cast<double>(pred[i]) - target[i];
    s += d * d;
  }
  s = blockSum(s);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = s;
}

} // namespace

#ifndef LOOM_CUDA_HOST_EMULATION // (test/unit/cuda/CudaHostEmulation.h)

Status launchCrossEntropy(FloatIn logits, const int64_t *target, float *loss,
                          int64_t rows, int64_t classes, int64_t count,
                          float *rowLoss, int check, DataCheckRecord *record,
                          cudaStream_t stream) {
  if (rows == 0)
    return cudaCheck(cudaMemsetAsync(loss, 0, sizeof(float), stream),
                     "cudaMemsetAsync");
  if (logits.e == Elem::BF16)
    crossEntropyRowsVecKernel<<<
        capBlocks(rows), rowBlockThreads<__nv_bfloat16>(classes), 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(logits.p), target, rowLoss, rows,
        classes, check, record);
  else
    crossEntropyRowsVecKernel<<<capBlocks(rows),
                                rowBlockThreads<float>(classes), 0, stream>>>(
        static_cast<const float *>(logits.p), target, rowLoss, rows, classes,
        check, record);
  LOOM_RETURN_IF_ERROR(launchCheck("cross_entropy kernel"));
  finishSumKernel<float>
      <<<1, kThreads, 0, stream>>>(rowLoss, rows, 1.0 / count, loss);
  return launchCheck("cross_entropy mean kernel");
}

Status launchCrossEntropyGrad(FloatIn logits, const int64_t *target,
                              FloatOut grad, int64_t rows, int64_t classes,
                              int64_t count, int check,
                              DataCheckRecord *record, cudaStream_t stream) {
  if (rows == 0)
    return Status::ok();
  float invCount = 1.0f / static_cast<float>(count);
  // The packs of `grad` line up with those of `logits` when both have one
  // storage and the same offset from a 16-byte boundary.
  bool vec = grad.e == logits.e && sameAlignment(grad.p, logits.p);
  if (vec && logits.e == Elem::BF16)
    crossEntropyGradVecKernel<<<rereadBlocks(rows, 2 * classes),
                                rowBlockThreads<__nv_bfloat16>(classes), 0,
                                stream>>>(
        static_cast<const __nv_bfloat16 *>(logits.p), target,
        static_cast<__nv_bfloat16 *>(grad.p), rows, classes, invCount, check,
        record);
  else if (vec)
    crossEntropyGradVecKernel<<<rereadBlocks(rows, 4 * classes),
                                rowBlockThreads<float>(classes), 0, stream>>>(
        static_cast<const float *>(logits.p), target,
        static_cast<float *>(grad.p), rows, classes, invCount, check, record);
  else
    crossEntropyGradKernel<<<capBlocks(rows), kThreads, 0, stream>>>(
        logits, target, grad, rows, classes, invCount, check, record);
  return launchCheck("cross_entropy_grad kernel");
}

int64_t msePartials(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return b < 1 ? 1 : (b > 1024 ? 1024 : b);
}

Status launchMse(const float *pred, const float *target, float *loss, int64_t n,
                 int64_t count, double *partials, cudaStream_t stream) {
  if (n == 0)
    return cudaCheck(cudaMemsetAsync(loss, 0, sizeof(float), stream),
                     "cudaMemsetAsync");
  int64_t blocks = msePartials(n);
  msePartialKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      pred, target, n, partials);
  LOOM_RETURN_IF_ERROR(launchCheck("mse kernel"));
  finishSumKernel<double>
      <<<1, kThreads, 0, stream>>>(partials, blocks, 1.0 / count, loss);
  return launchCheck("mse mean kernel");
}

#endif // LOOM_CUDA_HOST_EMULATION

} // namespace loom::runtime::cuda
