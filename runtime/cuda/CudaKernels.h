//===- CudaKernels.h - Bind functions of the CUDA kernels ---------*- C++
//-*-===//
//
// One `bind` per op family, with the contract of runtime/kernels/Kernel.h:
// operands were verified at load time by the CPU `verify` of the same op, so
// a bind only resolves shapes and attributes, reserves workspace and returns
// a call that launches on the device's stream.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDAKERNELS_H
#define LOOM_RUNTIME_CUDA_CUDAKERNELS_H

#include "runtime/kernels/Kernel.h"

namespace loom::runtime::cuda {

#define LOOM_DECLARE_CUDA_BIND(prefix)                                         \
  StatusOr<KernelFn> bind##prefix(const OpView &op, BindContext &ctx);

LOOM_DECLARE_CUDA_BIND(Matmul)    // Matmul.cpp (cuBLASLt)
LOOM_DECLARE_CUDA_BIND(Linear)    // Matmul.cpp (cuBLASLt, bias epilogue)
LOOM_DECLARE_CUDA_BIND(Binary)    // add, sub, mul, div, pow, max, min
LOOM_DECLARE_CUDA_BIND(Unary)     // relu, tanh, sigmoid, exp, log, sqrt, ...
LOOM_DECLARE_CUDA_BIND(UnaryGrad) // relu_grad, tanh_grad, sigmoid_grad
LOOM_DECLARE_CUDA_BIND(Scale)
LOOM_DECLARE_CUDA_BIND(Copy)
LOOM_DECLARE_CUDA_BIND(SumTo)
LOOM_DECLARE_CUDA_BIND(CrossEntropy)
LOOM_DECLARE_CUDA_BIND(CrossEntropyGrad)
LOOM_DECLARE_CUDA_BIND(Mse)
LOOM_DECLARE_CUDA_BIND(MseGrad)
LOOM_DECLARE_CUDA_BIND(AllReduce)
LOOM_DECLARE_CUDA_BIND(AllSlice)
// CollectiveKernels.cpp (NCCL)
LOOM_DECLARE_CUDA_BIND(AllGather)
LOOM_DECLARE_CUDA_BIND(ReduceScatter)
LOOM_DECLARE_CUDA_BIND(AllToAll)
LOOM_DECLARE_CUDA_BIND(BucketStart)
LOOM_DECLARE_CUDA_BIND(BucketWait)
LOOM_DECLARE_CUDA_BIND(Sgd)
LOOM_DECLARE_CUDA_BIND(AdamW)
LOOM_DECLARE_CUDA_BIND(Softmax)
LOOM_DECLARE_CUDA_BIND(SoftmaxGrad)
LOOM_DECLARE_CUDA_BIND(Gelu)
LOOM_DECLARE_CUDA_BIND(GeluGrad)
LOOM_DECLARE_CUDA_BIND(LayerNorm)     // layer_norm, rms_norm
LOOM_DECLARE_CUDA_BIND(LayerNormGrad) // layer_norm_grad, rms_norm_grad
LOOM_DECLARE_CUDA_BIND(BatchMatmul)   // Matmul.cpp (cuBLASLt, batched)
// LayoutKernels.cpp
LOOM_DECLARE_CUDA_BIND(Transpose)
LOOM_DECLARE_CUDA_BIND(Expand) // expand, broadcast_like
LOOM_DECLARE_CUDA_BIND(Slice)  // slice, slice_grad
LOOM_DECLARE_CUDA_BIND(Concat)
LOOM_DECLARE_CUDA_BIND(Gather)
LOOM_DECLARE_CUDA_BIND(GatherGrad)
LOOM_DECLARE_CUDA_BIND(GatherElements)
LOOM_DECLARE_CUDA_BIND(GatherElementsGrad)
LOOM_DECLARE_CUDA_BIND(ScatterNd)
LOOM_DECLARE_CUDA_BIND(GatherNd)
LOOM_DECLARE_CUDA_BIND(Select)
LOOM_DECLARE_CUDA_BIND(Convert)
LOOM_DECLARE_CUDA_BIND(Reduce) // reduce_sum, reduce_mean, reduce_max
LOOM_DECLARE_CUDA_BIND(Attention)
LOOM_DECLARE_CUDA_BIND(AttentionGrad)

#undef LOOM_DECLARE_CUDA_BIND

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_CUDAKERNELS_H
