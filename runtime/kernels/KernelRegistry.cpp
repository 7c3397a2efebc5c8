//===- KernelRegistry.cpp - Op name to kernel lookup -------------*- C++ -*-===//

#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/cpu/CpuKernels.h"

namespace loom::runtime {

namespace {

using namespace cpu;

// name, inputs min/max, outputs min/max, verify, bind
const KernelDef kKernels[] = {
    {"matmul", 2, 2, 1, 1, verifyMatmul, bindMatmul},
    {"add", 2, 2, 1, 1, verifyBinary, bindBinary},
    {"sub", 2, 2, 1, 1, verifyBinary, bindBinary},
    {"mul", 2, 2, 1, 1, verifyBinary, bindBinary},
    {"div", 2, 2, 1, 1, verifyBinary, bindBinary},
    {"relu", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"tanh", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"sigmoid", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"relu_grad", 2, 2, 1, 1, verifyUnaryGrad, bindUnaryGrad},
    {"tanh_grad", 2, 2, 1, 1, verifyUnaryGrad, bindUnaryGrad},
    {"sigmoid_grad", 2, 2, 1, 1, verifyUnaryGrad, bindUnaryGrad},
    {"scale", 1, 1, 1, 1, verifyScale, bindScale},
    {"copy", 1, 1, 1, 1, verifyCopy, bindCopy},
    {"sum_to", 1, 1, 1, 1, verifySumTo, bindSumTo},
    {"cross_entropy", 2, 2, 1, 1, verifyCrossEntropy, bindCrossEntropy},
    {"cross_entropy_grad", 2, 2, 1, 1, verifyCrossEntropyGrad,
     bindCrossEntropyGrad},
    {"mse", 2, 2, 1, 1, verifyMse, bindMse},
    {"mse_grad", 2, 2, 1, 1, verifyMseGrad, bindMseGrad},
    {"all_reduce", 1, 1, 1, 1, verifyAllReduce, bindAllReduce},
    {"sgd", 2, 3, 1, 2, verifySgd, bindSgd},
    {"adamw", 4, 4, 3, 3, verifyAdamW, bindAdamW},
    {"batch_matmul", 2, 2, 1, 1, verifyBatchMatmul, bindBatchMatmul},
    {"linear", 2, 3, 1, 1, verifyLinear, bindLinear},
    {"pow", 2, 2, 1, 1, verifyBinary, bindBinary},
    {"max", 2, 2, 1, 1, verifyBinary, bindBinary},
    {"min", 2, 2, 1, 1, verifyBinary, bindBinary},
    {"select", 3, 3, 1, 1, verifySelect, bindSelect},
    {"exp", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"log", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"sqrt", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"rsqrt", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"neg", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"reciprocal", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"erf", 1, 1, 1, 1, verifyUnary, bindUnary},
    {"reduce_sum", 1, 1, 1, 1, verifyReduce, bindReduce},
    {"reduce_mean", 1, 1, 1, 1, verifyReduce, bindReduce},
    {"reduce_max", 1, 1, 1, 1, verifyReduce, bindReduce},
    {"transpose", 1, 1, 1, 1, verifyTranspose, bindTranspose},
    {"expand", 1, 1, 1, 1, verifyExpand, bindExpand},
    {"broadcast_like", 1, 1, 1, 1, verifyExpand, bindExpand},
    {"slice", 1, 1, 1, 1, verifySlice, bindSlice},
    {"slice_grad", 1, 1, 1, 1, verifySlice, bindSlice},
    {"concat", 1, 1 << 20, 1, 1, verifyConcat, bindConcat},
    {"gather", 2, 2, 1, 1, verifyGather, bindGather},
    {"gather_grad", 2, 2, 1, 1, verifyGatherGrad, bindGatherGrad},
    {"convert", 1, 1, 1, 1, verifyConvert, bindConvert},
    {"softmax", 1, 1, 1, 1, verifySoftmax, bindSoftmax},
    {"softmax_grad", 2, 2, 1, 1, verifySoftmaxGrad, bindSoftmaxGrad},
    {"gelu", 1, 1, 1, 1, verifyGelu, bindGelu},
    {"gelu_grad", 2, 2, 1, 1, verifyGeluGrad, bindGeluGrad},
    {"layer_norm", 2, 3, 1, 1, verifyLayerNorm, bindLayerNorm},
    {"layer_norm_grad", 3, 3, 3, 3, verifyLayerNormGrad, bindLayerNormGrad},
    {"rms_norm", 2, 2, 1, 1, verifyLayerNorm, bindLayerNorm},
    {"rms_norm_grad", 3, 3, 2, 2, verifyLayerNormGrad, bindLayerNormGrad},
    {"batch_norm", 3, 3, 1, 1, verifyBatchNorm, bindBatchNorm},
    {"batch_norm_grad", 3, 3, 3, 3, verifyBatchNormGrad, bindBatchNormGrad},
    {"conv2d", 2, 2, 1, 1, verifyConv2d, bindConv2d},
    {"conv2d_grad_input", 2, 2, 1, 1, verifyConv2d, bindConv2dGradInput},
    {"conv2d_grad_filter", 2, 2, 1, 1, verifyConv2d, bindConv2dGradFilter},
    {"max_pool2d", 1, 1, 1, 1, verifyMaxPool2d, bindMaxPool2d},
    {"max_pool2d_grad", 2, 2, 1, 1, verifyMaxPool2d, bindMaxPool2dGrad},
    {"attention", 3, 3, 1, 1, verifyAttention, bindAttention},
    {"attention_grad", 4, 4, 3, 3, verifyAttention, bindAttentionGrad},
};

} // namespace

const KernelDef *findKernel(std::string_view name) {
  for (const KernelDef &k : kKernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

std::string knownOpNames() {
  std::string s;
  for (const KernelDef &k : kKernels) {
    if (!s.empty())
      s += ", ";
    s += k.name;
  }
  return s;
}

} // namespace loom::runtime
