//===- Matmul.cpp - matmul, linear, batch_matmul through cuBLASLt -*- C++
//-*-===//
//
// The plan's matrices are row-major; cuBLASLt's are column-major. A row-major
// `C[m, n] = op(A) op(B)` is the column-major `C^T[n, m] = op(B)^T op(A)^T`,
// and a row-major matrix read column-major is its transpose. So cuBLASLt gets
// B as its first operand and A as its second, each with the plan's transpose
// flag, and no data moves. Compute is plain fp32 (`CUBLAS_COMPUTE_32F`, no
// TF32), matching the CPU backend, for f32 operands and for bf16 ones
// (`CUDA_R_16BF` A and B, C bf16 or f32); the algorithm is chosen once at
// bind. `batch_matmul` is one GEMM, one strided-batched GEMM or, for
// batches that broadcast against each other, one GEMM per batch entry.
//
// A large GEMM with a row of A, B or C that is not a multiple of 16 bytes
// (GPT-2's vocabulary of 50257) runs on zero-padded copies whose misaligned
// dimensions are rounded up to 64 (`bindPaddedGemm`; docs/cuda.md, "Padded
// GEMMs").
//
// GEMMs of at least `LOOM_CUDA_GEMM_TUNE_MIN_FLOPS` (default 1e9) are tuned
// at bind: each of cuBLASLt's up to 8 heuristic candidates runs once to warm
// up and twice timed (cudaEvents on the device's stream), and the fastest is
// kept (any failure keeps the heuristic's first). The runs read the real
// inputs and write only the output (or the padded workspace). That is
// harmless: the Executor uploads the arena before it binds, so binding
// happens once, before any step; a GEMM never reads its output before it
// writes it (a bias is written into it at the start of each call); and
// tuning runs only when the output is a buffer of no persistent role
// (temporary, output or loss) without an initial value that overlaps no
// input. The arena cannot share such a buffer's bytes with a parameter,
// optimizer state, constant or initialised buffer, which must keep their
// values across steps; memory it shares with other temporaries holds
// nothing yet at bind. A padded output lives in the workspace, which holds
// nothing between calls, so that GEMM is tuned whatever its output.
// The choice follows measured times, so two runs may differ in summation
// order; a huge threshold keeps the heuristic's fixed choice.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBind.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/CudaLaunch.h"
#include "runtime/cuda/Gemm.h"

#include "runtime/Plan.h"
#include "runtime/Workspace.h"
#include "runtime/kernels/cpu/Broadcast.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace loom::runtime::cuda {

namespace {

Shape2 asMatrix(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return {1, 1};
  return {product(shape, 0, shape.size() - 1), shape.back()};
}

cudaDataType_t cudaType(Elem e) {
  return e == Elem::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// The largest power of two up to 256 dividing the address and the byte
/// stride between the batch's matrices (the heuristic otherwise assumes
/// 256-byte aligned operands; the plan only promises 64).
uint32_t alignmentOf(const void *p, int64_t strideBytes) {
  uint32_t al = 256;
  while (al > 2 &&
         (reinterpret_cast<uintptr_t>(p) % al != 0 || strideBytes % al != 0))
    al /= 2;
  return al;
}

Status setBatch(cublasLtMatrixLayout_t layout, int64_t batch, int64_t stride) {
  if (batch == 1)
    return Status::ok();
  int32_t count = static_cast<int32_t>(batch);
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
      "cublasLtMatrixLayoutSetAttribute (batch count)"));
  return cublasCheck(cublasLtMatrixLayoutSetAttribute(
                         layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                         &stride, sizeof(stride)),
                     "cublasLtMatrixLayoutSetAttribute (batch stride)");
}

} // namespace

LtGemm::~LtGemm() {
  if (out)
    cublasLtMatrixLayoutDestroy(out);
  if (second)
    cublasLtMatrixLayoutDestroy(second);
  if (first)
    cublasLtMatrixLayoutDestroy(first);
  if (desc)
    cublasLtMatmulDescDestroy(desc);
}

StatusOr<std::shared_ptr<LtGemm>>
prepareGemm(CudaDevice &dev, FloatIn pa, FloatIn pb, FloatOut pc,
            const GemmShape &sh, bool accumulate, const char *what) {
  int64_t m = sh.ta ? sh.a.cols : sh.a.rows;
  int64_t k = sh.ta ? sh.a.rows : sh.a.cols;
  int64_t n = sh.tb ? sh.b.rows : sh.b.cols;
  if (pa.e != pb.e)
    return makeError("%s of a %s and a %s operand is not supported on CUDA "
                     "(cuBLASLt needs one input type)",
                     what, pa.e == Elem::BF16 ? "bf16" : "f32",
                     pb.e == Elem::BF16 ? "bf16" : "f32");
  if (pa.e == Elem::F32 && pc.e == Elem::BF16)
    return makeError("%s of f32 operands into a bf16 output is not supported "
                     "on CUDA",
                     what);
  auto g = std::make_shared<LtGemm>();
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate"));
  // cuBLASLt's first operand is the plan's B, its second the plan's A.
  cublasOperation_t opFirst = sh.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = sh.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                     &opFirst, sizeof(opFirst)),
      "cublasLtMatmulDescSetAttribute (TRANSA)"));
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                     &opSecond, sizeof(opSecond)),
      "cublasLtMatmulDescSetAttribute (TRANSB)"));
  // Stored (pre-op) column-major shapes: a row-major [r, c] matrix is a
  // column-major [c, r] one with leading dimension c (or its padded row).
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatrixLayoutCreate(&g->first, cudaType(pb.e), sh.b.cols,
                                 sh.b.rows, sh.ldB ? sh.ldB : sh.b.cols),
      "cublasLtMatrixLayoutCreate (B)"));
  LOOM_RETURN_IF_ERROR(cublasCheck(
      cublasLtMatrixLayoutCreate(&g->second, cudaType(pa.e), sh.a.cols,
                                 sh.a.rows, sh.ldA ? sh.ldA : sh.a.cols),
      "cublasLtMatrixLayoutCreate (A)"));
  LOOM_RETURN_IF_ERROR(
      cublasCheck(cublasLtMatrixLayoutCreate(&g->out, cudaType(pc.e), n, m,
                                             sh.ldC ? sh.ldC : n),
                  "cublasLtMatrixLayoutCreate (C)"));
  LOOM_RETURN_IF_ERROR(setBatch(g->first, sh.batch, sh.strideB));
  LOOM_RETURN_IF_ERROR(setBatch(g->second, sh.batch, sh.strideA));
  LOOM_RETURN_IF_ERROR(setBatch(g->out, sh.batch, sh.strideC));

  cublasLtMatmulPreference_t pref = nullptr;
  LOOM_RETURN_IF_ERROR(cublasCheck(cublasLtMatmulPreferenceCreate(&pref),
                                   "cublasLtMatmulPreferenceCreate"));
  size_t wsBytes = dev.gemmWorkspaceBytes();
  Status st = cublasCheck(cublasLtMatmulPreferenceSetAttribute(
                              pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                              &wsBytes, sizeof(wsBytes)),
                          "cublasLtMatmulPreferenceSetAttribute");
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
       alignmentOf(pb.p, sh.strideB * elemBytes(pb.e))},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
       alignmentOf(pa.p, sh.strideA * elemBytes(pa.e))},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
       alignmentOf(pc.p, sh.strideC * elemBytes(pc.e))},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
       alignmentOf(pc.p, sh.strideC * elemBytes(pc.e))}};
  for (const auto &[attr, bytes] : aligns)
    if (st.isOk())
      st = cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes,
                                                            sizeof(bytes)),
                       "cublasLtMatmulPreferenceSetAttribute (alignment)");
  cublasLtMatmulHeuristicResult_t results[kGemmTuneCandidates] = {};
  int found = 0;
  if (st.isOk())
    st = cublasCheck(cublasLtMatmulAlgoGetHeuristic(
                         dev.lt(), g->desc, g->first, g->second, g->out, g->out,
                         pref, kGemmTuneCandidates, results, &found),
                     "cublasLtMatmulAlgoGetHeuristic");
  cublasLtMatmulPreferenceDestroy(pref);
  LOOM_RETURN_IF_ERROR(st);
  if (found == 0)
    return makeError("cuBLASLt has no %s algorithm for %s %lldx%lldx%lld "
                     "(m x n x k, batch %lld, transposed a=%d, b=%d%s)",
                     pa.e == Elem::BF16 ? "bf16" : "fp32", what, (long long)m,
                     (long long)n, (long long)k, (long long)sh.batch, sh.ta,
                     sh.tb, accumulate ? ", accumulating" : "");
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS)
      g->candidates.push_back(results[i].algo);
  if (g->candidates.empty())
    g->candidates.push_back(results[0].algo);
  g->algo = g->candidates.front();
  return g;
}

Status runGemm(CudaDevice &dev, const LtGemm &g, const void *a, const void *b,
               void *c, bool accumulate, float alpha) {
  const float beta = accumulate ? 1.0f : 0.0f;
  return cublasCheck(cublasLtMatmul(dev.lt(), g.desc, &alpha, b, g.first, a,
                                    g.second, &beta, c, g.out, c, g.out,
                                    &g.algo, dev.gemmWorkspace(),
                                    dev.gemmWorkspaceBytes(), dev.stream()),
                     "cublasLtMatmul");
}

void tuneGemm(CudaDevice &dev, LtGemm &g, const void *a, const void *b, void *c,
              bool accumulate) {
  g.algo = g.candidates.front();
  if (g.candidates.size() < 2)
    return;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess ||
      cudaEventCreate(&stop) != cudaSuccess) {
    if (start)
      cudaEventDestroy(start);
    (void)cudaGetLastError();
    return;
  }
  cudaStream_t s = dev.stream();
  float best = INFINITY;
  size_t bestIndex = 0;
  bool failed = false;
  for (size_t i = 0; i < g.candidates.size() && !failed; ++i) {
    g.algo = g.candidates[i];
    failed = !runGemm(dev, g, a, b, c, accumulate).isOk(); // warm-up
    for (int rep = 0; rep < 2 && !failed; ++rep) {
      float ms = 0;
      failed = cudaEventRecord(start, s) != cudaSuccess ||
               !runGemm(dev, g, a, b, c, accumulate).isOk() ||
               cudaEventRecord(stop, s) != cudaSuccess ||
               cudaEventSynchronize(stop) != cudaSuccess ||
               cudaEventElapsedTime(&ms, start, stop) != cudaSuccess;
      if (!failed && ms < best) {
        best = ms;
        bestIndex = i;
      }
    }
  }
  g.algo = failed ? g.candidates.front() : g.candidates[bestIndex];
  cudaStreamSynchronize(s);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  (void)cudaGetLastError();
}

namespace {

/// A FLOP threshold from the environment (read at bind): `name`, or `def`
/// when unset.
StatusOr<double> minFlopsSetting(const char *name, double def) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return def;
  errno = 0;
  char *end = nullptr;
  double f = std::strtod(v, &end);
  if (errno != 0 || *end != '\0' || !(f >= 0))
    return makeError("%s must be a non-negative number of FLOPs (e.g. 1e9), "
                     "got '%s'",
                     name, v);
  return f;
}

/// `LOOM_CUDA_GEMM_PAD_MIN_FLOPS`: the smallest misaligned GEMM that runs
/// on padded copies; 0 pads every one (tests).
StatusOr<double> padMinFlops() {
  return minFlopsSetting("LOOM_CUDA_GEMM_PAD_MIN_FLOPS",
                         kDefaultGemmPadMinFlops);
}

/// `LOOM_CUDA_GEMM_TUNE_MIN_FLOPS`: the smallest GEMM whose algorithm is
/// timed at bind; 0 tunes every one, a huge value none.
StatusOr<double> tuneMinFlops() {
  return minFlopsSetting("LOOM_CUDA_GEMM_TUNE_MIN_FLOPS",
                         kDefaultGemmTuneMinFlops);
}

/// Whether the bind may run the GEMM of `op` on its real output before the
/// first step (see the file header): the output is a temporary, graph
/// output or loss without an initial value and shares no byte with an
/// input (`ins`, the operands' pointers in input order).
bool outputIsScratchAtBind(const OpView &op, std::initializer_list<FloatIn> ins,
                           FloatOut out) {
  const plan::Buffer &o = *op.outputs[0];
  plan::Role r = o.role();
  if (r != plan::TEMPORARY && r != plan::OUTPUT && r != plan::LOSS &&
      r != plan::ROLE_UNSPECIFIED)
    return false;
  if (o.init_case() != plan::Buffer::INIT_NOT_SET)
    return false;
  auto lo = reinterpret_cast<uintptr_t>(out.p);
  uintptr_t hi = lo + op.outNumel(0) * elemBytes(out.e);
  size_t i = 0;
  for (const FloatIn &in : ins) {
    size_t index = i++;
    if (!in.p) // an absent bias
      continue;
    auto l = reinterpret_cast<uintptr_t>(in.p);
    uintptr_t h = l + op.inNumel(index) * elemBytes(in.e);
    if (l < hi && lo < h)
      return false;
  }
  return true;
}

/// How the padded path copies (`LOOM_CUDA_GEMM_PAD_COPY`, read at bind):
/// `kernel` (default, PaddedCopy.cu) or `memcpy2d` (`cudaMemcpy2DAsync`).
StatusOr<bool> padCopyByMemcpy2d() {
  const char *v = std::getenv("LOOM_CUDA_GEMM_PAD_COPY");
  std::string mode = v && *v ? v : "kernel";
  if (mode != "kernel" && mode != "memcpy2d")
    return makeError("LOOM_CUDA_GEMM_PAD_COPY must be kernel or memcpy2d, "
                     "got '%s'",
                     mode.c_str());
  return mode == "memcpy2d";
}

/// Writes the dense matrices `dm` at `dst` from the dense `sm` at `src`
/// (same count and element size): each element `sm` has, zero elsewhere.
/// Into the workspace that zero-fills the pad; back out it drops it.
Status copyPadded(void *dst, const GemmMatrix &dm, const void *src,
                  const GemmMatrix &sm, bool memcpy2d, cudaStream_t s) {
  int64_t eb = dm.elemBytes;
  if (!memcpy2d)
    return launchPaddedCopy(dst, dm.cols, dm.rows, src, sm.cols, sm.rows,
                            dm.count, eb, s);
  if (dm.rows > sm.rows || dm.cols > sm.cols)
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaMemsetAsync(dst, 0, dm.count * dm.rows * dm.cols * eb, s),
                  "cudaMemsetAsync (padded GEMM operand)"));
  int64_t rows = std::min(dm.rows, sm.rows), cols = std::min(dm.cols, sm.cols);
  // Matrices with the same row count are one strided copy, others one each.
  bool whole = dm.rows == sm.rows;
  for (int64_t e = 0; e < (whole ? 1 : dm.count); ++e)
    LOOM_RETURN_IF_ERROR(cudaCheck(
        cudaMemcpy2DAsync(
            static_cast<char *>(dst) + e * dm.rows * dm.cols * eb, dm.cols * eb,
            static_cast<const char *>(src) + e * sm.rows * sm.cols * eb,
            sm.cols * eb, cols * eb, whole ? dm.count * rows : rows,
            cudaMemcpyDeviceToDevice, s),
        "cudaMemcpy2DAsync (padded GEMM operand)"));
  return Status::ok();
}

/// The padded path of `c = op(a) op(b)` (+ bias): when a row of `a`, `b` or
/// `c` is not a multiple of 16 bytes, cuBLASLt only has slow kernels, and a
/// dimension such as 50257 fits none of its fast tiles (GPT-2's logits GEMMs
/// ran at 100-130 TFLOP/s, the model's others at 500-600). For a GEMM of at
/// least `padMinFlops()` each dimension that is the row length of a
/// misaligned matrix is rounded up to a multiple of 64 (`planGemmPad`), the
/// matrices whose shape changes so are copied into the device's
/// padded-GEMM workspace with the pad zeroed, cuBLASLt runs the padded
/// GEMM, and a padded output's real region is copied back. Zero pad columns
/// and rows of the operands make the extra k terms exact zeros; the extra
/// m and n outputs are dropped. Returns an empty function when the GEMM
/// keeps the unpadded path (aligned, too small, or the padded one cannot be
/// set up). `a`, `b`, `c` are the stored matrices (a shared batch operand
/// has `count` 1), `sh` the unpadded shape; `tune`: the real output may be
/// written at bind.
StatusOr<KernelFn> bindPaddedGemm(CudaDevice &dev, FloatIn pa, GemmMatrix a,
                                  FloatIn pb, GemmMatrix b, FloatOut pc,
                                  GemmMatrix c, GemmShape sh, FloatIn bias,
                                  bool tune, const char *what) {
  LOOM_ASSIGN_OR_RETURN(double minFlops, padMinFlops());
  LOOM_ASSIGN_OR_RETURN(bool memcpy2d, padCopyByMemcpy2d());
  LOOM_ASSIGN_OR_RETURN(double tuneFlops, tuneMinFlops());
  GemmPadPlan plan = planGemmPad(a, sh.ta, b, sh.tb, c, minFlops);
  int64_t bytes = plan.bytes;
  if (bytes == 0 || !dev.reserveGemmPadWorkspace(bytes).isOk())
    return KernelFn();
  // cudaMalloc's 256-byte alignment is kept when the workspace grows, so the
  // alignment cuBLASLt is told now holds for the buffer the call later finds.
  char *ws = static_cast<char *>(dev.gemmPadWorkspace());
  GemmShape psh = sh;
  psh.a = Shape2{plan.a.rows, plan.a.cols};
  psh.b = Shape2{plan.b.rows, plan.b.cols};
  psh.ldA = psh.ldB = psh.ldC = 0;
  FloatIn qa = pa, qb = pb;
  FloatOut qc = pc;
  if (plan.copyA) {
    psh.strideA = a.count > 1 ? plan.a.rows * plan.a.cols : 0;
    qa.p = ws + plan.offA;
  }
  if (plan.copyB) {
    psh.strideB = b.count > 1 ? plan.b.rows * plan.b.cols : 0;
    qb.p = ws + plan.offB;
  }
  if (plan.copyC) {
    psh.strideC = c.count > 1 ? plan.c.rows * plan.c.cols : 0;
    qc.p = ws + plan.offC;
  }
  StatusOr<std::shared_ptr<LtGemm>> prepared =
      prepareGemm(dev, qa, qb, qc, psh, bias.p, what);
  if (!prepared.isOk())
    return KernelFn();
  std::shared_ptr<LtGemm> g = std::move(prepared).value();
  double flops =
      2.0 * double(c.count) * double(plan.m) * double(plan.n) * double(plan.k);
  if (flops >= tuneFlops && (tune || plan.copyC))
    tuneGemm(dev, *g, qa.p, qb.p, qc.p, bias.p != nullptr);
  CudaDevice *d = &dev;
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) -> Status {
    char *w = static_cast<char *>(d->gemmPadWorkspace());
    if (d->gemmPadWorkspaceBytes() < bytes)
      return makeError("the padded GEMM workspace has %lld bytes, %s needs "
                       "%lld",
                       (long long)d->gemmPadWorkspaceBytes(), what,
                       (long long)bytes);
    const void *ua = pa.p, *ub = pb.p;
    void *uc = pc.p;
    if (plan.copyA) {
      ua = w + plan.offA;
      LOOM_RETURN_IF_ERROR(
          copyPadded(w + plan.offA, plan.a, pa.p, a, memcpy2d, s));
    }
    if (plan.copyB) {
      ub = w + plan.offB;
      LOOM_RETURN_IF_ERROR(
          copyPadded(w + plan.offB, plan.b, pb.p, b, memcpy2d, s));
    }
    if (bias.p)
      LOOM_RETURN_IF_ERROR(launchFillRows(pc, bias, c.rows, c.cols, s));
    if (plan.copyC) {
      uc = w + plan.offC;
      // Accumulating reads c: it moves into the padded copy first (without
      // a bias the GEMM writes every element of the copy).
      if (bias.p)
        LOOM_RETURN_IF_ERROR(
            copyPadded(w + plan.offC, plan.c, pc.p, c, memcpy2d, s));
    }
    LOOM_RETURN_IF_ERROR(runGemm(*d, *g, ua, ub, uc, bias.p != nullptr));
    if (!plan.copyC)
      return Status::ok();
    return copyPadded(pc.p, c, w + plan.offC, plan.c, memcpy2d, s);
  });
}

/// `c = op(a) op(b)` (+ bias) for one matrix; the shared path of `matmul`
/// and `linear`. With a bias, `c` is first filled with it and the GEMM
/// accumulates (beta = 1), the CPU kernel's order of additions; a cuBLASLt
/// bias epilogue is the faster follow-up. `tune`: the output may be written
/// at bind (`outputIsScratchAtBind`).
StatusOr<KernelFn> bindGemm(CudaDevice &dev, FloatIn pa, Shape2 a, bool ta,
                            FloatIn pb, Shape2 b, bool tb, FloatOut pc,
                            FloatIn bias, bool tune, const char *what) {
  int64_t m = ta ? a.cols : a.rows;
  int64_t k = ta ? a.rows : a.cols;
  int64_t n = tb ? b.rows : b.cols;
  cudaStream_t s = dev.stream();
  if (m == 0 || n == 0)
    return cpu::noopKernel();
  if (k == 0 && bias.p)
    return makeError("a linear layer with no input features is not supported "
                     "on CUDA yet");
  if (k == 0)
    return KernelFn([=](const StepContext &) {
      return launchZero(pc.p, m * n * elemBytes(pc.e), s);
    });
  GemmShape sh{a, b, ta, tb};
  LOOM_ASSIGN_OR_RETURN(
      KernelFn padded,
      bindPaddedGemm(dev, pa, GemmMatrix{1, a.rows, a.cols, elemBytes(pa.e)},
                     pb, GemmMatrix{1, b.rows, b.cols, elemBytes(pb.e)}, pc,
                     GemmMatrix{1, m, n, elemBytes(pc.e)}, sh, bias, tune,
                     what));
  if (padded)
    return padded;
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<LtGemm> g,
                        prepareGemm(dev, pa, pb, pc, sh, bias.p, what));
  LOOM_ASSIGN_OR_RETURN(double tuneFlops, tuneMinFlops());
  if (tune && 2.0 * double(m) * double(n) * double(k) >= tuneFlops)
    tuneGemm(dev, *g, pa.p, pb.p, pc.p, bias.p != nullptr);
  CudaDevice *d = &dev;
  return KernelFn([=](const StepContext &) {
    if (bias.p)
      LOOM_RETURN_IF_ERROR(launchFillRows(pc, bias, m, n, s));
    return runGemm(*d, *g, pa.p, pb.p, pc.p, bias.p != nullptr);
  });
}

} // namespace

StatusOr<KernelFn> bindMatmul(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(double ta, op.numAttr("transpose_a", 0.0));
  LOOM_ASSIGN_OR_RETURN(double tb, op.numAttr("transpose_b", 0.0));
  LOOM_ASSIGN_OR_RETURN(FloatIn a, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn b, floatIn(op, ctx, 1));
  LOOM_ASSIGN_OR_RETURN(FloatOut c, floatOut(op, ctx, 0));
  return bindGemm(cudaDevice(ctx), a, asMatrix(op.inShape(0)), ta == 1, b,
                  asMatrix(op.inShape(1)), tb == 1, c, FloatIn{},
                  outputIsScratchAtBind(op, {a, b}, c), "matmul");
}

StatusOr<KernelFn> bindLinear(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(bool tw, flagAttr(op, "transpose_weight"));
  std::vector<int64_t> xs = op.inShape(0), ws = op.inShape(1);
  // x [.., K] collapses to [rows, K]; with K = 0 the rows come from the
  // leading dims (as the CPU kernel).
  int64_t k = xs.back();
  int64_t rows = product(xs, 0, xs.size() - 1);
  LOOM_ASSIGN_OR_RETURN(FloatIn x, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn w, floatIn(op, ctx, 1));
  LOOM_ASSIGN_OR_RETURN(FloatOut y, floatOut(op, ctx, 0));
  FloatIn bias;
  if (op.inputs.size() == 3) {
    LOOM_ASSIGN_OR_RETURN(bias, floatIn(op, ctx, 2));
  }
  return bindGemm(cudaDevice(ctx), x, Shape2{rows, k}, false, w,
                  Shape2{ws[0], ws[1]}, tw, y, bias,
                  outputIsScratchAtBind(op, {x, w, bias}, y), "linear");
}

StatusOr<KernelFn> bindBatchMatmul(const OpView &op, BindContext &ctx) {
  LOOM_ASSIGN_OR_RETURN(bool ta, flagAttr(op, "transpose_lhs"));
  LOOM_ASSIGN_OR_RETURN(bool tb, flagAttr(op, "transpose_rhs"));
  LOOM_ASSIGN_OR_RETURN(FloatIn a, floatIn(op, ctx, 0));
  LOOM_ASSIGN_OR_RETURN(FloatIn b, floatIn(op, ctx, 1));
  LOOM_ASSIGN_OR_RETURN(FloatOut c, floatOut(op, ctx, 0));
  std::vector<int64_t> as = op.inShape(0), bs = op.inShape(1),
                       cs = op.outShape(0);
  Shape2 ma{as[as.size() - 2], as.back()}, mb{bs[bs.size() - 2], bs.back()};
  int64_t m = ta ? ma.cols : ma.rows, k = ta ? ma.rows : ma.cols;
  int64_t n = tb ? mb.rows : mb.cols;
  std::vector<int64_t> aBatch(as.begin(), as.end() - 2),
      bBatch(bs.begin(), bs.end() - 2), outBatch(cs.begin(), cs.end() - 2);
  int64_t batches = numElements(outBatch);
  int64_t aCount = numElements(aBatch), bCount = numElements(bBatch);
  CudaDevice &dev = cudaDevice(ctx);
  cudaStream_t s = dev.stream();
  bool tune = outputIsScratchAtBind(op, {a, b}, c);
  if (batches == 0 || m == 0 || n == 0)
    return noopKernel();
  if (k == 0)
    return KernelFn([=](const StepContext &) {
      return launchZero(c.p, batches * m * n * elemBytes(c.e), s);
    });
  // A shared right-hand side and a full left-hand side: one tall GEMM.
  if (bCount == 1 && aCount == batches && !ta)
    return bindGemm(dev, a, Shape2{batches * m, k}, false, b, mb, tb, c,
                    FloatIn{}, tune, "batch_matmul");
  int64_t aMat = m * k, bMat = k * n, cMat = m * n;
  // Both operands batched alike, or one of them shared: one strided batched
  // GEMM (a shared operand has stride 0). Should cuBLASLt refuse a stride
  // of 0, the per-entry loop below still does it.
  bool aAll = aCount == batches, bAll = bCount == batches;
  if ((aAll || aCount == 1) && (bAll || bCount == 1)) {
    GemmShape sh{ma,  mb, ta, tb, batches, aAll ? aMat : 0, bAll ? bMat : 0,
                 cMat};
    LOOM_ASSIGN_OR_RETURN(
        KernelFn padded,
        bindPaddedGemm(dev, a,
                       GemmMatrix{aCount, ma.rows, ma.cols, elemBytes(a.e)}, b,
                       GemmMatrix{bCount, mb.rows, mb.cols, elemBytes(b.e)}, c,
                       GemmMatrix{batches, m, n, elemBytes(c.e)}, sh, FloatIn{},
                       tune, "batch_matmul"));
    if (padded)
      return padded;
    StatusOr<std::shared_ptr<LtGemm>> g =
        prepareGemm(dev, a, b, c, sh, false, "batch_matmul");
    if (g.isOk()) {
      std::shared_ptr<LtGemm> gemm = std::move(g).value();
      LOOM_ASSIGN_OR_RETURN(double tuneFlops, tuneMinFlops());
      if (tune && 2.0 * double(batches) * double(m) * double(n) * double(k) >=
                      tuneFlops)
        tuneGemm(dev, *gemm, a.p, b.p, c.p, false);
      CudaDevice *d = &dev;
      return KernelFn([=](const StepContext &) {
        return runGemm(*d, *gemm, a.p, b.p, c.p, false);
      });
    }
    if (aAll && bAll)
      return g.status();
  }
  // Other broadcasts ([2, 1] x [1, 3] batches): one GEMM per batch entry.
  std::vector<int64_t> aOff(batches), bOff(batches);
  std::vector<int64_t> sa = cpu::broadcastStrides(aBatch, outBatch),
                       sb = cpu::broadcastStrides(bBatch, outBatch);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t rem = i;
    aOff[i] = bOff[i] = 0;
    for (int d = static_cast<int>(outBatch.size()) - 1; d >= 0; --d) {
      aOff[i] += (rem % outBatch[d]) * sa[d] * aMat;
      bOff[i] += (rem % outBatch[d]) * sb[d] * bMat;
      rem /= outBatch[d];
    }
  }
  // Alignment from the first matrices and the per-matrix strides.
  GemmShape sh{ma, mb, ta, tb, 1, aMat, bMat, cMat};
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<LtGemm> g,
                        prepareGemm(dev, a, b, c, sh, false, "batch_matmul"));
  CudaDevice *d = &dev;
  return KernelFn([=](const StepContext &) {
    const char *pa = static_cast<const char *>(a.p);
    const char *pb = static_cast<const char *>(b.p);
    char *pc = static_cast<char *>(c.p);
    for (int64_t i = 0; i < batches; ++i)
      LOOM_RETURN_IF_ERROR(runGemm(*d, *g, pa + aOff[i] * elemBytes(a.e),
                                   pb + bOff[i] * elemBytes(b.e),
                                   pc + i * cMat * elemBytes(c.e), false));
    return Status::ok();
  });
}

} // namespace loom::runtime::cuda
