//===- KernelRegistry.cpp - Op name to CPU kernel lookup --------*- C++ -*-===//

#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/cpu/CpuKernels.h"

namespace loom::runtime {

namespace {

using namespace cpu;

// name, verify, bind; the operand counts are the op table's
// (runtime/OpTable.cpp), which lists the same ops.
const KernelDef kKernels[] = {
    {"matmul", verifyMatmul, bindMatmul},
    {"add", verifyBinary, bindBinary},
    {"sub", verifyBinary, bindBinary},
    {"mul", verifyBinary, bindBinary},
    {"div", verifyBinary, bindBinary},
    {"relu", verifyUnary, bindUnary},
    {"tanh", verifyUnary, bindUnary},
    {"sigmoid", verifyUnary, bindUnary},
    {"relu_grad", verifyUnaryGrad, bindUnaryGrad},
    {"tanh_grad", verifyUnaryGrad, bindUnaryGrad},
    {"sigmoid_grad", verifyUnaryGrad, bindUnaryGrad},
    {"scale", verifyScale, bindScale},
    {"copy", verifyCopy, bindCopy},
    {"sum_to", verifySumTo, bindSumTo},
    {"cross_entropy", verifyCrossEntropy, bindCrossEntropy},
    {"cross_entropy_grad", verifyCrossEntropyGrad, bindCrossEntropyGrad},
    {"mse", verifyMse, bindMse},
    {"mse_grad", verifyMseGrad, bindMseGrad},
    {"all_reduce", verifyAllReduce, bindAllReduce},
    {"all_reduce_start", verifyAllReduceStart, bindAllReduceStart},
    {"send", verifySend, bindSend},
    {"recv", verifyRecv, bindRecv},
    {"all_reduce_wait", verifyAllReduceWait, bindAllReduceWait},
    {"reduce_scatter_start", verifyBucketStart, bindBucketStart},
    {"reduce_scatter_wait", verifyBucketWait, bindBucketWait},
    {"all_gather_start", verifyBucketStart, bindBucketStart},
    {"all_gather_wait", verifyBucketWait, bindBucketWait},
    {"all_slice", verifyAllSlice, bindAllSlice},
    {"all_gather", verifyAllGather, bindAllGather},
    {"reduce_scatter", verifyReduceScatter, bindReduceScatter},
    {"all_to_all", verifyAllToAll, bindAllToAll},
    {"sgd", verifySgd, bindSgd},
    {"adamw", verifyAdamW, bindAdamW},
    {"batch_matmul", verifyBatchMatmul, bindBatchMatmul},
    {"linear", verifyLinear, bindLinear},
    {"pow", verifyBinary, bindBinary},
    {"max", verifyBinary, bindBinary},
    {"min", verifyBinary, bindBinary},
    {"equal", verifyBinary, bindBinary},
    {"less", verifyBinary, bindBinary},
    {"less_equal", verifyBinary, bindBinary},
    {"select", verifySelect, bindSelect},
    {"exp", verifyUnary, bindUnary},
    {"log", verifyUnary, bindUnary},
    {"sqrt", verifyUnary, bindUnary},
    {"rsqrt", verifyUnary, bindUnary},
    {"neg", verifyUnary, bindUnary},
    {"reciprocal", verifyUnary, bindUnary},
    {"erf", verifyUnary, bindUnary},
    {"sin", verifyUnary, bindUnary},
    {"cos", verifyUnary, bindUnary},
    {"round_f16", verifyUnary, bindUnary},
    {"trunc", verifyUnary, bindUnary},
    {"reduce_sum", verifyReduce, bindReduce},
    {"reduce_mean", verifyReduce, bindReduce},
    {"reduce_max", verifyReduce, bindReduce},
    {"transpose", verifyTranspose, bindTranspose},
    {"expand", verifyExpand, bindExpand},
    {"broadcast_like", verifyExpand, bindExpand},
    {"slice", verifySlice, bindSlice},
    {"slice_grad", verifySlice, bindSlice},
    {"concat", verifyConcat, bindConcat},
    {"gather", verifyGather, bindGather},
    {"gather_grad", verifyGatherGrad, bindGatherGrad},
    {"gather_elements", verifyGatherElements, bindGatherElements},
    {"gather_elements_grad", verifyGatherElementsGrad,
     bindGatherElementsGrad},
    {"scatter_nd", verifyScatterNd, bindScatterNd},
    {"gather_nd", verifyGatherNd, bindGatherNd},
    {"convert", verifyConvert, bindConvert},
    {"softmax", verifySoftmax, bindSoftmax},
    {"softmax_grad", verifySoftmaxGrad, bindSoftmaxGrad},
    {"gelu", verifyGelu, bindGelu},
    {"gelu_grad", verifyGeluGrad, bindGeluGrad},
    {"layer_norm", verifyLayerNorm, bindLayerNorm},
    {"layer_norm_grad", verifyLayerNormGrad, bindLayerNormGrad},
    {"rms_norm", verifyLayerNorm, bindLayerNorm},
    {"rms_norm_grad", verifyLayerNormGrad, bindLayerNormGrad},
    {"batch_norm", verifyBatchNorm, bindBatchNorm},
    {"batch_norm_grad", verifyBatchNormGrad, bindBatchNormGrad},
    {"conv2d", verifyConv2d, bindConv2d},
    {"conv2d_grad_input", verifyConv2d, bindConv2dGradInput},
    {"conv2d_grad_filter", verifyConv2d, bindConv2dGradFilter},
    {"max_pool2d", verifyMaxPool2d, bindMaxPool2d},
    {"max_pool2d_grad", verifyMaxPool2d, bindMaxPool2dGrad},
    {"attention", verifyAttention, bindAttention},
    {"attention_grad", verifyAttention, bindAttentionGrad},
};

} // namespace

const KernelDef *findKernel(std::string_view name) {
  for (const KernelDef &k : kKernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

std::vector<std::string_view> cpuKernelNames() {
  std::vector<std::string_view> names;
  for (const KernelDef &k : kKernels)
    names.push_back(k.name);
  return names;
}

} // namespace loom::runtime
