//===- CudaRegistry.cpp - Op name to CUDA kernel lookup ----------*- C++
//-*-===//
//
// Each entry pairs the CPU backend's `verify` (plans are validated once, by
// the same rules, whichever device runs them) with a CUDA `bind`, which
// checks the dtypes it takes (f32, bf16 where docs/cuda.md says so). An op
// missing here fails at executor creation with "has no kernel on cuda:N".
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/cpu/CpuKernels.h"

namespace loom::runtime::cuda {

namespace {

// name, inputs min/max, outputs min/max, verify (CPU), bind (CUDA)
const KernelDef kCudaKernels[] = {
    {"matmul", 2, 2, 1, 1, cpu::verifyMatmul, bindMatmul},
    {"linear", 2, 3, 1, 1, cpu::verifyLinear, bindLinear},
    {"add", 2, 2, 1, 1, cpu::verifyBinary, bindBinary},
    {"sub", 2, 2, 1, 1, cpu::verifyBinary, bindBinary},
    {"mul", 2, 2, 1, 1, cpu::verifyBinary, bindBinary},
    {"div", 2, 2, 1, 1, cpu::verifyBinary, bindBinary},
    {"pow", 2, 2, 1, 1, cpu::verifyBinary, bindBinary},
    {"max", 2, 2, 1, 1, cpu::verifyBinary, bindBinary},
    {"min", 2, 2, 1, 1, cpu::verifyBinary, bindBinary},
    {"relu", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"tanh", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"sigmoid", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"exp", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"log", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"sqrt", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"rsqrt", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"neg", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"reciprocal", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"erf", 1, 1, 1, 1, cpu::verifyUnary, bindUnary},
    {"relu_grad", 2, 2, 1, 1, cpu::verifyUnaryGrad, bindUnaryGrad},
    {"tanh_grad", 2, 2, 1, 1, cpu::verifyUnaryGrad, bindUnaryGrad},
    {"sigmoid_grad", 2, 2, 1, 1, cpu::verifyUnaryGrad, bindUnaryGrad},
    {"scale", 1, 1, 1, 1, cpu::verifyScale, bindScale},
    {"copy", 1, 1, 1, 1, cpu::verifyCopy, bindCopy},
    {"sum_to", 1, 1, 1, 1, cpu::verifySumTo, bindSumTo},
    {"cross_entropy", 2, 2, 1, 1, cpu::verifyCrossEntropy, bindCrossEntropy},
    {"cross_entropy_grad", 2, 2, 1, 1, cpu::verifyCrossEntropyGrad,
     bindCrossEntropyGrad},
    {"mse", 2, 2, 1, 1, cpu::verifyMse, bindMse},
    {"mse_grad", 2, 2, 1, 1, cpu::verifyMseGrad, bindMseGrad},
    {"all_reduce", 1, 1, 1, 1, cpu::verifyAllReduce, bindAllReduce},
    {"sgd", 2, 3, 1, 2, cpu::verifySgd, bindSgd},
    {"adamw", 4, 4, 3, 3, cpu::verifyAdamW, bindAdamW},
    {"softmax", 1, 1, 1, 1, cpu::verifySoftmax, bindSoftmax},
    {"softmax_grad", 2, 2, 1, 1, cpu::verifySoftmaxGrad, bindSoftmaxGrad},
    {"gelu", 1, 1, 1, 1, cpu::verifyGelu, bindGelu},
    {"gelu_grad", 2, 2, 1, 1, cpu::verifyGeluGrad, bindGeluGrad},
    {"layer_norm", 2, 3, 1, 1, cpu::verifyLayerNorm, bindLayerNorm},
    {"layer_norm_grad", 3, 3, 3, 3, cpu::verifyLayerNormGrad,
     bindLayerNormGrad},
    {"rms_norm", 2, 2, 1, 1, cpu::verifyLayerNorm, bindLayerNorm},
    {"rms_norm_grad", 3, 3, 2, 2, cpu::verifyLayerNormGrad, bindLayerNormGrad},
    {"batch_matmul", 2, 2, 1, 1, cpu::verifyBatchMatmul, bindBatchMatmul},
    {"transpose", 1, 1, 1, 1, cpu::verifyTranspose, bindTranspose},
    {"expand", 1, 1, 1, 1, cpu::verifyExpand, bindExpand},
    {"broadcast_like", 1, 1, 1, 1, cpu::verifyExpand, bindExpand},
    {"slice", 1, 1, 1, 1, cpu::verifySlice, bindSlice},
    {"slice_grad", 1, 1, 1, 1, cpu::verifySlice, bindSlice},
    {"concat", 1, 1 << 20, 1, 1, cpu::verifyConcat, bindConcat},
    {"gather", 2, 2, 1, 1, cpu::verifyGather, bindGather},
    {"gather_grad", 2, 2, 1, 1, cpu::verifyGatherGrad, bindGatherGrad},
    {"select", 3, 3, 1, 1, cpu::verifySelect, bindSelect},
    {"convert", 1, 1, 1, 1, cpu::verifyConvert, bindConvert},
    {"reduce_sum", 1, 1, 1, 1, cpu::verifyReduce, bindReduce},
    {"reduce_mean", 1, 1, 1, 1, cpu::verifyReduce, bindReduce},
    {"reduce_max", 1, 1, 1, 1, cpu::verifyReduce, bindReduce},
    {"attention", 3, 3, 1, 1, cpu::verifyAttention, bindAttention},
    {"attention_grad", 4, 4, 3, 3, cpu::verifyAttention, bindAttentionGrad},
};

} // namespace

const KernelDef *findCudaKernel(std::string_view name) {
  for (const KernelDef &k : kCudaKernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

} // namespace loom::runtime::cuda
