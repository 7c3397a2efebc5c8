//===- CudaBind.h - Helpers of the CUDA bind functions ------------*- C++
//-*-===//
//
// Internal to `LoomRuntimeCuda`. Operands come out of the arena as typed
// `FloatIn` / `FloatOut` after their dtype is checked: a dtype a kernel does
// not take fails at bind (executor creation) with a message naming the
// buffer, never silently at run time.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CUDABIND_H
#define LOOM_RUNTIME_CUDA_CUDABIND_H

#include "runtime/cuda/CudaLaunch.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <string>
#include <vector>

namespace loom::runtime::cuda {

/// Input `i` as an f32 or bf16 operand.
StatusOr<FloatIn> floatIn(const OpView &op, BindContext &ctx, size_t i);
/// Output `i` as an f32 or bf16 operand.
StatusOr<FloatOut> floatOut(const OpView &op, BindContext &ctx, size_t i);
/// Checks that input (`output` false) or output `i` has `dtype`.
Status expectDType(const OpView &op, bool output, size_t i, plan::DType dtype);
/// Checks that every operand is f32 (kernels without a bf16 variant).
Status expectAllF32(const OpView &op);

/// The `SumToIndex` of reducing `xs` over the dims marked in `reduced`.
StatusOr<SumToIndex> reductionIndex(const std::vector<int64_t> &xs,
                                    const std::vector<bool> &reduced);

/// The first-pass workspace of `launchReduce` (empty when it needs none).
StatusOr<DeviceBuffer> reduceWorkspace(BindContext &ctx, int64_t ny,
                                       const SumToIndex &index);

/// A call that does nothing (empty outputs).
using cpu::noopKernel;
/// "instruction 'op' at 'loc'", the context of a device-side data check.
std::string checkContext(const OpView &op);
/// The error for a shape with more than `kMaxDims` dims.
Status tooManyDims(const std::vector<int64_t> &shape);

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_CUDABIND_H
