//===- CpuKernels.h - Verify and bind functions of the CPU kernels -*- C++ -*-===//
//
// One pair per op family; `KernelRegistry.cpp` maps op names to them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_CPU_CPUKERNELS_H
#define LOOM_RUNTIME_KERNELS_CPU_CPUKERNELS_H

#include "runtime/kernels/Kernel.h"

namespace loom::runtime::cpu {

#define LOOM_DECLARE_KERNEL(prefix)                                            \
  Status verify##prefix(const OpView &op);                                     \
  StatusOr<KernelFn> bind##prefix(const OpView &op, BindContext &ctx);

LOOM_DECLARE_KERNEL(Matmul)
LOOM_DECLARE_KERNEL(Binary)     // add, sub, mul, div, pow, max, min
LOOM_DECLARE_KERNEL(Unary)      // relu, tanh, sigmoid, exp, log, sqrt, rsqrt,
                                // neg, reciprocal, erf
LOOM_DECLARE_KERNEL(UnaryGrad)  // relu_grad, tanh_grad, sigmoid_grad
LOOM_DECLARE_KERNEL(Scale)
LOOM_DECLARE_KERNEL(Copy)
LOOM_DECLARE_KERNEL(SumTo)
/// What a loss's mean divides by: its `count` attribute (the whole batch's
/// rows or elements, on a rank that holds a block of them) or else `held`,
/// the rows or elements the instruction holds.
StatusOr<int64_t> meanCount(const OpView &op, int64_t held);

LOOM_DECLARE_KERNEL(CrossEntropy)
LOOM_DECLARE_KERNEL(CrossEntropyGrad)
LOOM_DECLARE_KERNEL(Mse)
LOOM_DECLARE_KERNEL(MseGrad)
LOOM_DECLARE_KERNEL(AllReduce)
LOOM_DECLARE_KERNEL(AllReduceStart)
LOOM_DECLARE_KERNEL(Send)
LOOM_DECLARE_KERNEL(Recv)
LOOM_DECLARE_KERNEL(AllReduceWait)
LOOM_DECLARE_KERNEL(AllSlice)   // this rank's block, no communication
// AllGather.cpp, ReduceScatter.cpp, AllToAll.cpp (plans in Collective.h)
LOOM_DECLARE_KERNEL(AllGather)
LOOM_DECLARE_KERNEL(ReduceScatter)
LOOM_DECLARE_KERNEL(AllToAll)
// BucketCollective.cpp: reduce_scatter_start / all_gather_start, their waits
LOOM_DECLARE_KERNEL(BucketStart)
LOOM_DECLARE_KERNEL(BucketWait)

/// The copy an `all_slice` is on this rank: `rows` blocks of `blockBytes`,
/// `rowBytes` apart in the source (AllSlice.cpp; the CUDA backend does it
/// as one cudaMemcpy2DAsync).
struct BlockCopy {
  const uint8_t *src = nullptr;
  uint8_t *dst = nullptr;
  int64_t rows = 0, blockBytes = 0, rowBytes = 0;
};
StatusOr<BlockCopy> allSliceCopy(const OpView &op, BindContext &ctx);
LOOM_DECLARE_KERNEL(Sgd)
LOOM_DECLARE_KERNEL(AdamW)

// BatchMatmul.cpp
LOOM_DECLARE_KERNEL(BatchMatmul)
LOOM_DECLARE_KERNEL(Linear)
// Elementwise.cpp
LOOM_DECLARE_KERNEL(Select)
LOOM_DECLARE_KERNEL(Convert)
// Reduce.cpp
LOOM_DECLARE_KERNEL(Reduce)     // reduce_sum, reduce_mean, reduce_max
// Shape.cpp
LOOM_DECLARE_KERNEL(Transpose)
LOOM_DECLARE_KERNEL(Expand)     // expand, broadcast_like
LOOM_DECLARE_KERNEL(Slice)      // slice, slice_grad
LOOM_DECLARE_KERNEL(Concat)
// Gather.cpp
LOOM_DECLARE_KERNEL(Gather)
LOOM_DECLARE_KERNEL(GatherGrad)
LOOM_DECLARE_KERNEL(GatherElements)
LOOM_DECLARE_KERNEL(GatherElementsGrad)
// ScatterNd.cpp
LOOM_DECLARE_KERNEL(ScatterNd)
LOOM_DECLARE_KERNEL(GatherNd)
// Activation.cpp
LOOM_DECLARE_KERNEL(Softmax)
LOOM_DECLARE_KERNEL(SoftmaxGrad)
LOOM_DECLARE_KERNEL(Gelu)
LOOM_DECLARE_KERNEL(GeluGrad)
// Normalization.cpp
LOOM_DECLARE_KERNEL(LayerNorm)     // layer_norm, rms_norm
LOOM_DECLARE_KERNEL(LayerNormGrad) // layer_norm_grad, rms_norm_grad
LOOM_DECLARE_KERNEL(BatchNorm)
LOOM_DECLARE_KERNEL(BatchNormGrad)
// Conv.cpp: one verify for the three ops
LOOM_DECLARE_KERNEL(Conv2d)
StatusOr<KernelFn> bindConv2dGradInput(const OpView &op, BindContext &ctx);
StatusOr<KernelFn> bindConv2dGradFilter(const OpView &op, BindContext &ctx);
// Pooling.cpp: one verify for both ops
LOOM_DECLARE_KERNEL(MaxPool2d)
StatusOr<KernelFn> bindMaxPool2dGrad(const OpView &op, BindContext &ctx);
// Attention.cpp: one verify for both ops
LOOM_DECLARE_KERNEL(Attention)
StatusOr<KernelFn> bindAttentionGrad(const OpView &op, BindContext &ctx);

#undef LOOM_DECLARE_KERNEL

/// Minimum element count before an element-wise loop uses OpenMP threads.
constexpr int64_t kParallelThreshold = 1 << 15;

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_CPUKERNELS_H
