//===- CudaRegistry.cpp - Op name to CUDA kernel lookup ---------*- C++ -*-===//
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

// name, verify (CPU), bind (CUDA); the operand counts are the op table's
// (runtime/OpTable.cpp).
const KernelDef kCudaKernels[] = {
    {"matmul", cpu::verifyMatmul, bindMatmul},
    {"linear", cpu::verifyLinear, bindLinear},
    {"add", cpu::verifyBinary, bindBinary},
    {"sub", cpu::verifyBinary, bindBinary},
    {"mul", cpu::verifyBinary, bindBinary},
    {"div", cpu::verifyBinary, bindBinary},
    {"pow", cpu::verifyBinary, bindBinary},
    {"max", cpu::verifyBinary, bindBinary},
    {"min", cpu::verifyBinary, bindBinary},
    {"equal", cpu::verifyBinary, bindBinary},
    {"less", cpu::verifyBinary, bindBinary},
    {"less_equal", cpu::verifyBinary, bindBinary},
    {"relu", cpu::verifyUnary, bindUnary},
    {"tanh", cpu::verifyUnary, bindUnary},
    {"sigmoid", cpu::verifyUnary, bindUnary},
    {"exp", cpu::verifyUnary, bindUnary},
    {"log", cpu::verifyUnary, bindUnary},
    {"sqrt", cpu::verifyUnary, bindUnary},
    {"rsqrt", cpu::verifyUnary, bindUnary},
    {"neg", cpu::verifyUnary, bindUnary},
    {"reciprocal", cpu::verifyUnary, bindUnary},
    {"erf", cpu::verifyUnary, bindUnary},
    {"sin", cpu::verifyUnary, bindUnary},
    {"cos", cpu::verifyUnary, bindUnary},
    {"round_f16", cpu::verifyUnary, bindUnary},
    {"trunc", cpu::verifyUnary, bindUnary},
    {"relu_grad", cpu::verifyUnaryGrad, bindUnaryGrad},
    {"tanh_grad", cpu::verifyUnaryGrad, bindUnaryGrad},
    {"sigmoid_grad", cpu::verifyUnaryGrad, bindUnaryGrad},
    {"scale", cpu::verifyScale, bindScale},
    {"copy", cpu::verifyCopy, bindCopy},
    {"sum_to", cpu::verifySumTo, bindSumTo},
    {"cross_entropy", cpu::verifyCrossEntropy, bindCrossEntropy},
    {"cross_entropy_grad", cpu::verifyCrossEntropyGrad, bindCrossEntropyGrad},
    {"mse", cpu::verifyMse, bindMse},
    {"mse_grad", cpu::verifyMseGrad, bindMseGrad},
    {"all_reduce", cpu::verifyAllReduce, bindAllReduce},
    // The communicator starts and waits on device memory itself (NCCL on
    // its stream, or host staging).
    {"all_reduce_start", cpu::verifyAllReduceStart, cpu::bindAllReduceStart},
    {"send", cpu::verifySend, cpu::bindSend},
    {"recv", cpu::verifyRecv, cpu::bindRecv},
    {"all_reduce_wait", cpu::verifyAllReduceWait, cpu::bindAllReduceWait},
    {"reduce_scatter_start", cpu::verifyBucketStart, bindBucketStart},
    {"reduce_scatter_wait", cpu::verifyBucketWait, bindBucketWait},
    {"all_gather_start", cpu::verifyBucketStart, bindBucketStart},
    {"all_gather_wait", cpu::verifyBucketWait, bindBucketWait},
    {"all_slice", cpu::verifyAllSlice, bindAllSlice},
    {"all_gather", cpu::verifyAllGather, bindAllGather},
    {"reduce_scatter", cpu::verifyReduceScatter, bindReduceScatter},
    {"all_to_all", cpu::verifyAllToAll, bindAllToAll},
    {"sgd", cpu::verifySgd, bindSgd},
    {"adamw", cpu::verifyAdamW, bindAdamW},
    {"softmax", cpu::verifySoftmax, bindSoftmax},
    {"softmax_grad", cpu::verifySoftmaxGrad, bindSoftmaxGrad},
    {"gelu", cpu::verifyGelu, bindGelu},
    {"gelu_grad", cpu::verifyGeluGrad, bindGeluGrad},
    {"layer_norm", cpu::verifyLayerNorm, bindLayerNorm},
    {"layer_norm_grad", cpu::verifyLayerNormGrad, bindLayerNormGrad},
    {"rms_norm", cpu::verifyLayerNorm, bindLayerNorm},
    {"rms_norm_grad", cpu::verifyLayerNormGrad, bindLayerNormGrad},
    {"batch_matmul", cpu::verifyBatchMatmul, bindBatchMatmul},
    {"transpose", cpu::verifyTranspose, bindTranspose},
    {"expand", cpu::verifyExpand, bindExpand},
    {"broadcast_like", cpu::verifyExpand, bindExpand},
    {"slice", cpu::verifySlice, bindSlice},
    {"slice_grad", cpu::verifySlice, bindSlice},
    {"concat", cpu::verifyConcat, bindConcat},
    {"gather", cpu::verifyGather, bindGather},
    {"gather_grad", cpu::verifyGatherGrad, bindGatherGrad},
    {"gather_elements", cpu::verifyGatherElements, bindGatherElements},
    {"gather_elements_grad", cpu::verifyGatherElementsGrad,
     bindGatherElementsGrad},
    {"scatter_nd", cpu::verifyScatterNd, bindScatterNd},
    {"gather_nd", cpu::verifyGatherNd, bindGatherNd},
    {"select", cpu::verifySelect, bindSelect},
    {"convert", cpu::verifyConvert, bindConvert},
    {"reduce_sum", cpu::verifyReduce, bindReduce},
    {"reduce_mean", cpu::verifyReduce, bindReduce},
    {"reduce_max", cpu::verifyReduce, bindReduce},
    {"attention", cpu::verifyAttention, bindAttention},
    {"attention_grad", cpu::verifyAttention, bindAttentionGrad},
};

} // namespace

const KernelDef *findCudaKernel(std::string_view name) {
  for (const KernelDef &k : kCudaKernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

} // namespace loom::runtime::cuda
