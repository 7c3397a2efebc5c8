//===- Gemm.h - Prepared cuBLASLt GEMMs on row-major matrices -----*- C++
//-*-===//
//
// Internal to `LoomRuntimeCuda`: the GEMM core of Matmul.cpp, also used by
// the GEMM path of attention (AttentionKernels.cpp). A GEMM is prepared
// once at bind (descriptors, layouts, cuBLASLt's candidate algorithms; large
// ones are timed then, `tuneGemm`) and run per step.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_GEMM_H
#define LOOM_RUNTIME_CUDA_GEMM_H

#include "runtime/cuda/CudaLaunch.h"

#include <memory>
#include <vector>

namespace loom::runtime::cuda {

/// How many of cuBLASLt's heuristic algorithms a GEMM keeps to be timed.
constexpr int kGemmTuneCandidates = 8;
/// Default of `LOOM_CUDA_GEMM_TUNE_MIN_FLOPS`: the smallest GEMM (2 m n k
/// per batch entry, all entries) whose algorithm is timed at bind.
constexpr double kDefaultGemmTuneMinFlops = 1e9;

/// A prepared cuBLASLt GEMM: descriptors live as long as the call.
struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo;
  /// The heuristic's algorithms, best guess first (`algo` starts as it).
  std::vector<cublasLtMatmulAlgo_t> candidates;

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

/// Times each of `g`'s candidates on these buffers (one warm-up run, the
/// best of two timed ones, on the device's stream; synchronises it) and
/// keeps the fastest in `g.algo`; on any failure the heuristic's first.
/// Writes `c` (garbage, accumulated when `accumulate`): the caller makes
/// sure nothing lives there yet.
void tuneGemm(CudaDevice &dev, LtGemm &g, const void *a, const void *b, void *c,
              bool accumulate);

/// Enqueues `c = alpha op(a) op(b) (+ c when accumulating)`.
Status runGemm(CudaDevice &dev, const LtGemm &g, const void *a, const void *b,
               void *c, bool accumulate, float alpha = 1.0f);

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_CUDA_GEMM_H
