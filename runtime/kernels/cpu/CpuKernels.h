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
LOOM_DECLARE_KERNEL(Binary)     // add, sub, mul, div
LOOM_DECLARE_KERNEL(Unary)      // relu, tanh, sigmoid
LOOM_DECLARE_KERNEL(UnaryGrad)  // relu_grad, tanh_grad, sigmoid_grad
LOOM_DECLARE_KERNEL(Scale)
LOOM_DECLARE_KERNEL(Copy)
LOOM_DECLARE_KERNEL(SumTo)
LOOM_DECLARE_KERNEL(CrossEntropy)
LOOM_DECLARE_KERNEL(CrossEntropyGrad)
LOOM_DECLARE_KERNEL(Mse)
LOOM_DECLARE_KERNEL(MseGrad)
LOOM_DECLARE_KERNEL(AllReduce)
LOOM_DECLARE_KERNEL(Sgd)
LOOM_DECLARE_KERNEL(AdamW)

#undef LOOM_DECLARE_KERNEL

/// Minimum element count before an element-wise loop uses OpenMP threads.
constexpr int64_t kParallelThreshold = 1 << 15;

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_CPUKERNELS_H
