//===- Matmul.cpp - matmul through cuBLASLt ------------------------*- C++
//-*-===//
//
// The plan's matrices are row-major; cuBLASLt's are column-major. A row-major
// `C[m, n] = op(A) op(B)` is the column-major `C^T[n, m] = op(B)^T op(A)^T`,
// and a row-major matrix read column-major is its transpose. So cuBLASLt gets
// B as its first operand and A as its second, each with the plan's transpose
// flag, and no data moves. Compute is plain fp32 (`CUBLAS_COMPUTE_32F`, no
// TF32), matching the CPU backend; the algorithm is chosen once at bind.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/CudaLaunch.h"

#include "runtime/Plan.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/HostTensor.h"

namespace loom::runtime::cuda {

namespace {

/// A prepared cuBLASLt GEMM: descriptors live as long as the call.
struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo;

  ~LtGemm() {
    if (out)
      cublasLtMatrixLayoutDestroy(out);
    if (second)
      cublasLtMatrixLayoutDestroy(second);
    if (first)
      cublasLtMatrixLayoutDestroy(first);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

struct Shape2 {
  int64_t rows, cols;
};

Shape2 asMatrix(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return {1, 1};
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i)
    rows *= shape[i];
  return {rows, shape.back()};
}

/// A prepared `c[m, n] = op(a) op(b) (+ bias[n] on every row)` on row-major
/// matrices `a` and `b` (stored shapes). With a bias, `c` is first filled
/// with it and the GEMM accumulates (beta = 1), the CPU kernel's order of
/// additions; a cuBLASLt bias epilogue is the faster follow-up.
StatusOr<KernelFn> bindGemm(CudaDevice &dev, const float *pa, Shape2 a, bool ta,
                            const float *pb, Shape2 b, bool tb, float *pc,
                            const float *bias) {
  int64_t m = ta ? a.cols : a.rows;
  int64_t k = ta ? a.rows : a.cols;
  int64_t n = tb ? b.rows : b.cols;
  cudaStream_t s = dev.stream();
  if (m == 0 || n == 0)
    return KernelFn([](const StepContext &) { return Status::ok(); });
  if (k == 0 && bias)
    return makeError("a linear layer with no input features is not supported "
                     "on CUDA yet");
  if (k == 0)
    return KernelFn([=](const StepContext &) {
      return cudaCheck(cudaMemsetAsync(pc, 0, m * n * sizeof(float), s),
                       "cudaMemsetAsync (matmul with k = 0)");
    });

  auto g = std::make_shared<LtGemm>();
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate"));
  // cuBLASLt's first operand is the plan's B, its second the plan's A.
  cublasOperation_t opFirst = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                     &opFirst, sizeof(opFirst)),
      "cublasLtMatmulDescSetAttribute (TRANSA)"));
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                     &opSecond, sizeof(opSecond)),
      "cublasLtMatmulDescSetAttribute (TRANSB)"));
  // Stored (pre-op) column-major shapes: a row-major [r, c] matrix is a
  // column-major [c, r] one with leading dimension c.
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatrixLayoutCreate(&g->first, CUDA_R_32F, b.cols, b.rows, b.cols),
      "cublasLtMatrixLayoutCreate (B)"));
  LOOM_RETURN_IF_ERROR(
      cublasCheck(cublasLtMatrixLayoutCreate(&g->second, CUDA_R_32F, a.cols,
                                             a.rows, a.cols),
                  "cublasLtMatrixLayoutCreate (A)"));
  LOOM_RETURN_IF_ERROR(
      cublasCheck(cublasLtMatrixLayoutCreate(&g->out, CUDA_R_32F, n, m, n),
                  "cublasLtMatrixLayoutCreate (C)"));

  cublasLtMatmulPreference_t pref = nullptr;
  LOOM_RETURN_IF_ERROR(cublasCheck(cublasLtMatmulPreferenceCreate(&pref),
                                   "cublasLtMatmulPreferenceCreate"));
  size_t wsBytes = dev.gemmWorkspaceBytes();
  Status st = cublasCheck(cublasLtMatmulPreferenceSetAttribute(
                              pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                              &wsBytes, sizeof(wsBytes)),
                          "cublasLtMatmulPreferenceSetAttribute");
  // The heuristic assumes 256-byte aligned operands unless told otherwise;
  // the plan only promises 64 (docs/plan-format.md).
  auto alignment = [](const void *p) {
    uint32_t al = 256;
    while (al > 4 && reinterpret_cast<uintptr_t>(p) % al != 0)
      al /= 2;
    return al;
  };
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void *> aligns[] =
      {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, pb},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, pa},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, pc},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, pc}};
  for (const auto &[attr, ptr] : aligns) {
    uint32_t bytes = alignment(ptr);
    if (st.isOk())
      st = cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes,
                                                            sizeof(bytes)),
                       "cublasLtMatmulPreferenceSetAttribute (alignment)");
  }
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  if (st.isOk())
    st = cublasCheck(cublasLtMatmulAlgoGetHeuristic(dev.lt(), g->desc, g->first,
                                                    g->second, g->out, g->out,
                                                    pref, 1, &result, &found),
                     "cublasLtMatmulAlgoGetHeuristic");
  cublasLtMatmulPreferenceDestroy(pref);
  LOOM_RETURN_IF_ERROR(st);
  if (found == 0)
    return makeError("cuBLASLt has no fp32 algorithm for %lldx%lldx%lld "
                     "(m x n x k, transposed a=%d, b=%d%s)",
                     (long long)m, (long long)n, (long long)k, ta, tb,
                     bias ? ", bias" : "");
  g->algo = result.algo;

  cublasLtHandle_t lt = dev.lt();
  void *ws = dev.gemmWorkspace();
  return KernelFn([=](const StepContext &) {
    const float alpha = 1.0f, beta = bias ? 1.0f : 0.0f;
    if (bias)
      LOOM_RETURN_IF_ERROR(launchFillRows(pc, bias, m, n, s));
    return cublasCheck(cublasLtMatmul(lt, g->desc, &alpha, pb, g->first, pa,
                                      g->second, &beta, pc, g->out, pc, g->out,
                                      &g->algo, ws, wsBytes, s),
                       "cublasLtMatmul");
  });
}

} // namespace

StatusOr<KernelFn> bindMatmul(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(double ta, op.numAttr("transpose_a", 0.0));
  LOOM_ASSIGN_OR_RETURN(double tb, op.numAttr("transpose_b", 0.0));
  return bindGemm(cudaDevice(ctx), ctx.f32(op.inputs[0]),
                  asMatrix(op.inShape(0)), ta == 1, ctx.f32(op.inputs[1]),
                  asMatrix(op.inShape(1)), tb == 1, ctx.f32(op.outputs[0]),
                  nullptr);
}

StatusOr<KernelFn> bindLinear(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(bool tw, cpu::flagAttr(op, "transpose_weight"));
  std::vector<int64_t> xs = op.inShape(0), ws = op.inShape(1);
  // x [.., K] collapses to [rows, K]; with K = 0 the rows come from the
  // leading dims (as the CPU kernel).
  int64_t k = xs.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < xs.size(); ++i)
    rows *= xs[i];
  const float *bias = op.inputs.size() == 3 ? ctx.f32(op.inputs[2]) : nullptr;
  return bindGemm(cudaDevice(ctx), ctx.f32(op.inputs[0]), Shape2{rows, k},
                  false, ctx.f32(op.inputs[1]), Shape2{ws[0], ws[1]}, tw,
                  ctx.f32(op.outputs[0]), bias);
}

} // namespace loom::runtime::cuda
