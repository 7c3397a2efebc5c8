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
