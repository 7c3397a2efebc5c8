//===- Gemm.h - Prepared cuBLASLt GEMMs on row-major matrices -----*- C++
//-*-===//
//
// Internal to `LoomRuntimeCuda`: the GEMM core of Matmul.cpp, also used by
// the GEMM path of attention (AttentionKernels.cpp). A GEMM is prepared
// once at bind (descriptors, layouts, algorithm) and run per step.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_GEMM_H
#define LOOM_RUNTIME_CUDA_GEMM_H

#include "runtime/cuda/CudaLaunch.h"

#include <memory>

namespace loom::runtime::cuda {

/// A prepared cuBLASLt GEMM: descriptors live as long as the call.
struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo;

  ~LtGemm();
};

/// A row-major `[rows, cols]` matrix.
struct Shape2 {
  int64_t rows, cols;
};

/// One GEMM shape: `c[m, n] = op(a) op(b)` on row-major stored matrices,
/// repeated over `batch` entries whose matrices lie `strideA` / `strideB` /
/// `strideC` elements apart (`batch` 1: one GEMM). A matrix's rows lie
/// `ldA` / `ldB` / `ldC` elements apart (0: its columns, dense); padded
/// copies have a larger one.
struct GemmShape {
  Shape2 a, b;
  bool ta, tb;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  int64_t ldA = 0, ldB = 0, ldC = 0;
};

/// Prepares `c = op(a) op(b)` (`accumulate`: `c +=`, for the message only;
/// the caller passes it again to `runGemm`). `a` and `b` share one storage
/// (fp32, or bf16 into an fp32 or bf16 `c`); compute is fp32 either way.
/// The pointers are read for their alignment only.
StatusOr<std::shared_ptr<LtGemm>>
prepareGemm(CudaDevice &dev, FloatIn pa, FloatIn pb, FloatOut pc,
            const GemmShape &sh, bool accumulate, const char *what);

/// Enqueues `c = alpha op(a) op(b) (+ c when accumulating)`.
Status runGemm(CudaDevice &dev, const LtGemm &g, const void *a, const void *b,
               void *c, bool accumulate, float alpha = 1.0f);

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_GEMM_H
