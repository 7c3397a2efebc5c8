//===- AttentionKernels.cpp - Binds of attention and its gradient -*- C++
//-*-===//
//
// Three algorithms with the semantics of runtime/kernels/cpu/Attention.cpp:
//  - tc (AttentionTc.cu): flash attention on the tensor cores (mma.sync),
//    bf16 storage with D = Dv = 64 or 128 and 16-byte aligned operands only,
//    no score matrix in memory;
//  - flash (Attention.cu): fp32 CUDA cores, no score matrix in memory, head
//    dims up to 128;
//  - gemm: the products as cuBLASLt strided-batched GEMMs (tensor cores for
//    bf16 storage) around the fused row kernels of AttentionGemm.cu, with
//    the scores of the whole instruction in the device's attention
//    workspace (f32 S or dP, then P or dS in the storage type). Causal
//    attention computes the full score matrix and masks in the softmax, so
//    its GEMMs do twice the FLOPs it needs.
// `LOOM_CUDA_ATTENTION` = auto (default) | tc | gemm | flash picks one at
// bind. auto takes tc where it applies; otherwise (and for tc where it does
// not apply) gemm when its workspace is at most
// `LOOM_CUDA_ATTENTION_WORKSPACE_MB` (default 4096) MiB, else flash (and
// flash too when the GEMM path fails to bind).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBind.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/Gemm.h"

#include "runtime/Plan.h"
#include "runtime/Workspace.h"
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace loom::runtime::cuda {

namespace {

/// Shapes of q `[..., Sq, D]`, k `[..., Sk, D]`, v `[..., Sk, Dv]` (verified
/// at load by runtime/kernels/cpu/Attention.cpp), the `scale` and `causal`
/// attributes, and the one storage every operand must share.
StatusOr<AttentionDims> attentionDims(const OpView &op, size_t first,
                                      Elem *storage) {
  std::vector<int64_t> q = op.inShape(first), k = op.inShape(first + 1),
                       v = op.inShape(first + 2);
  size_t r = q.size();
  if (r < 2 || k.size() != r || v.size() != r)
    return makeError("q, k and v must have the same rank >= 2");
  AttentionDims a;
  a.batch = product(q, 0, r - 2);
  a.sq = q[r - 2];
  a.d = q[r - 1];
  a.sk = k[r - 2];
  a.dv = v[r - 1];
  LOOM_ASSIGN_OR_RETURN(double scale, op.numAttr("scale"));
  LOOM_ASSIGN_OR_RETURN(a.causal, flagAttr(op, "causal"));
  a.scale = static_cast<float>(scale);
  if (a.sq >= INT32_MAX || a.sk >= INT32_MAX || a.batch >= INT32_MAX)
    return makeError("attention on CUDA takes fewer than 2^31 rows and "
                     "batch entries");
  plan::DType dt = op.inputs[first]->dtype();
  for (size_t i = 0; i < op.inputs.size(); ++i)
    LOOM_RETURN_IF_ERROR(expectDType(op, false, i, dt));
  for (size_t i = 0; i < op.outputs.size(); ++i)
    LOOM_RETURN_IF_ERROR(expectDType(op, true, i, dt));
  if (dt != plan::F32 && dt != plan::BF16)
    return makeError("attention on CUDA takes f32 or bf16 operands, got %s",
                     dtypeName(dt));
  *storage = dt == plan::BF16 ? Elem::BF16 : Elem::F32;
  return a;
}

/// Where P (or dS) starts in the GEMM path's workspace, and its size
/// (runtime/Workspace.h, which loomc's memory proof uses too).
int64_t probsOffset(const AttentionDims &a) {
  return attentionProbsOffset(a.batch, a.sq, a.sk);
}
int64_t gemmWorkspaceBytes(const AttentionDims &a, Elem e) {
  return attentionGemmWorkspaceBytes(a.batch, a.sq, a.sk, elemBytes(e));
}

/// Fails when the device's attention workspace shrank below `bytes` (a
/// later bind failed to grow it and could not restore it).
Status checkWorkspace(const CudaDevice &dev, int64_t bytes) {
  if (dev.attentionWorkspaceBytes() >= bytes)
    return Status::ok();
  return makeError("the attention workspace of %s holds %lld bytes, this "
                   "instruction needs %lld",
                   dev.name().c_str(), (long long)dev.attentionWorkspaceBytes(),
                   (long long)bytes);
}

enum class Algorithm { Tc, Flash, Gemm };

/// The algorithm of an instruction and, for gemm under `auto`, whether the
/// flash kernels may take over should the GEMM path fail to bind (cuBLASLt
/// offers no algorithm, the workspace cannot be allocated).
struct Choice {
  Algorithm algorithm;
  bool flashFallback;
};

/// A non-negative integer from the environment, or `fallback` when unset.
StatusOr<int64_t> envCount(const char *name, int64_t fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  errno = 0;
  char *end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < 0)
    return makeError("%s must be a non-negative integer (MiB), got '%s'", name,
                     v);
  return static_cast<int64_t>(n);
}

/// The algorithm of one attention instruction, from `LOOM_CUDA_ATTENTION`
/// and `LOOM_CUDA_ATTENTION_WORKSPACE_MB` (read at bind); `aligned` says
/// whether every operand is 16-byte aligned (the tc kernels' vector loads).
/// Where tc applies is runtime/Workspace.h's rule, which loomc's memory
/// proof uses too, plus that alignment.
StatusOr<Choice> chooseAlgorithm(const AttentionDims &a, Elem e, bool aligned) {
  const char *env = std::getenv("LOOM_CUDA_ATTENTION");
  std::string mode = env && *env ? env : "auto";
  if (mode != "auto" && mode != "tc" && mode != "gemm" && mode != "flash")
    return makeError("LOOM_CUDA_ATTENTION must be auto, tc, gemm or flash, "
                     "got '%s'",
                     mode.c_str());
  plan::DType dtype = e == Elem::BF16 ? plan::BF16 : plan::F32;
  if ((mode == "auto" || mode == "tc") && aligned &&
      attentionTakesTensorCorePath(dtype, a.sq, a.sk, a.d, a.dv, a.causal))
    return Choice{Algorithm::Tc, false};
  if (mode == "tc") // not supported here: as auto
    mode = "auto";
  bool flashFits = a.d <= kMaxAttentionHeadDim && a.dv <= kMaxAttentionHeadDim;
  // Empty head dims make empty GEMMs: the flash kernels handle them.
  bool gemmFits = a.d > 0 && a.dv > 0;
  if (mode == "auto" && gemmFits) {
    LOOM_ASSIGN_OR_RETURN(int64_t limitMb,
                          envCount("LOOM_CUDA_ATTENTION_WORKSPACE_MB",
                                   kDefaultAttentionWorkspaceMiB));
    gemmFits = limitMb >= (INT64_MAX >> 20) ||
               gemmWorkspaceBytes(a, e) <= (limitMb << 20);
  }
  if (mode != "flash" && gemmFits)
    return Choice{Algorithm::Gemm, mode == "auto" && flashFits};
  if (flashFits)
    return Choice{Algorithm::Flash, false};
  return makeError("flash attention on CUDA takes head dims up to %lld, got "
                   "D = %lld and Dv = %lld (the GEMM path, "
                   "LOOM_CUDA_ATTENTION=gemm, takes any)",
                   (long long)kMaxAttentionHeadDim, (long long)a.d,
                   (long long)a.dv);
}

/// The operands of one attention instruction in the arena.
struct Operands {
  const void *q, *k, *v, *dO = nullptr;
  void *o = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;

  /// Whether every operand is 16-byte aligned.
  bool aligned() const {
    for (const void *p :
         {q, k, v, dO, static_cast<const void *>(o),
          static_cast<const void *>(dq), static_cast<const void *>(dk),
          static_cast<const void *>(dv)})
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
        return false;
    return true;
  }
};

/// The GEMMs of the GEMM path, prepared against the device's attention
/// workspace (reserved first; only its alignment matters here).
struct GemmPlan {
  std::shared_ptr<LtGemm> scores;         // S = scale Q K^T
  std::shared_ptr<LtGemm> out;            // O = P V
  std::shared_ptr<LtGemm> dv, dp, dq, dk; // the gradient's
};

StatusOr<KernelFn> bindGemmForward(CudaDevice &dev, Elem e,
                                   const AttentionDims &a, const Operands &x) {
  cudaStream_t s = dev.stream();
  if (a.batch * a.sq == 0)
    return noopKernel();
  if (a.sk == 0) // O = 0, as the CPU kernel's empty GEMM
    return KernelFn([=](const StepContext &) {
      return launchZero(x.o, a.batch * a.sq * a.dv * elemBytes(e), s);
    });
  LOOM_RETURN_IF_ERROR(dev.reserveAttentionWorkspace(gemmWorkspaceBytes(a, e)));
  char *ws = static_cast<char *>(dev.attentionWorkspace());
  int64_t pAt = probsOffset(a);
  FloatOut scores{ws, Elem::F32};
  FloatIn probs{ws + pAt, e};
  GemmPlan g;
  LOOM_ASSIGN_OR_RETURN(g.scores, prepareGemm(dev, {x.q, e}, {x.k, e}, scores,
                                              {{a.sq, a.d},
                                               {a.sk, a.d},
                                               false,
                                               true,
                                               a.batch,
                                               a.sq * a.d,
                                               a.sk * a.d,
                                               a.sq * a.sk},
                                              false, "attention (scores)"));
  LOOM_ASSIGN_OR_RETURN(g.out, prepareGemm(dev, probs, {x.v, e}, {x.o, e},
                                           {{a.sq, a.sk},
                                            {a.sk, a.dv},
                                            false,
                                            false,
                                            a.batch,
                                            a.sq * a.sk,
                                            a.sk * a.dv,
                                            a.sq * a.dv},
                                           false, "attention (P V)"));
  CudaDevice *d = &dev;
  int64_t need = gemmWorkspaceBytes(a, e);
  return KernelFn([=](const StepContext &) {
    LOOM_RETURN_IF_ERROR(checkWorkspace(*d, need));
    char *w = static_cast<char *>(d->attentionWorkspace());
    float *sc = reinterpret_cast<float *>(w);
    void *p = w + pAt;
    LOOM_RETURN_IF_ERROR(runGemm(*d, *g.scores, x.q, x.k, sc, false, a.scale));
    LOOM_RETURN_IF_ERROR(launchAttentionSoftmax(e, sc, p, a.batch * a.sq, a.sq,
                                                a.sk, a.causal, s));
    return runGemm(*d, *g.out, p, x.v, x.o, false);
  });
}

StatusOr<KernelFn> bindGemmGrad(CudaDevice &dev, Elem e, const AttentionDims &a,
                                const Operands &x) {
  cudaStream_t s = dev.stream();
  if (a.batch == 0)
    return noopKernel();
  int64_t el = elemBytes(e);
  // No queries or no keys: every gradient is zero (the CPU's empty GEMMs).
  if (a.sq == 0 || a.sk == 0)
    return KernelFn([=](const StepContext &) {
      LOOM_RETURN_IF_ERROR(launchZero(x.dq, a.batch * a.sq * a.d * el, s));
      LOOM_RETURN_IF_ERROR(launchZero(x.dk, a.batch * a.sk * a.d * el, s));
      return launchZero(x.dv, a.batch * a.sk * a.dv * el, s);
    });
  LOOM_RETURN_IF_ERROR(dev.reserveAttentionWorkspace(gemmWorkspaceBytes(a, e)));
  char *ws = static_cast<char *>(dev.attentionWorkspace());
  int64_t pAt = probsOffset(a);
  FloatOut scores{ws, Elem::F32}; // S, then dP
  FloatIn probs{ws + pAt, e};     // P, then dS
  const int64_t sqk = a.sq * a.sk, qd = a.sq * a.d, kd = a.sk * a.d,
                qdv = a.sq * a.dv, kdv = a.sk * a.dv;
  GemmPlan g;
  LOOM_ASSIGN_OR_RETURN(
      g.scores,
      prepareGemm(dev, {x.q, e}, {x.k, e}, scores,
                  {{a.sq, a.d}, {a.sk, a.d}, false, true, a.batch, qd, kd, sqk},
                  false, "attention_grad (scores)"));
  // dV = P^T dO
  LOOM_ASSIGN_OR_RETURN(
      g.dv,
      prepareGemm(
          dev, probs, {x.dO, e}, {x.dv, e},
          {{a.sq, a.sk}, {a.sq, a.dv}, true, false, a.batch, sqk, qdv, kdv},
          false, "attention_grad (dV)"));
  // dP = dO V^T
  LOOM_ASSIGN_OR_RETURN(
      g.dp,
      prepareGemm(
          dev, {x.dO, e}, {x.v, e}, scores,
          {{a.sq, a.dv}, {a.sk, a.dv}, false, true, a.batch, qdv, kdv, sqk},
          false, "attention_grad (dP)"));
  // dQ = scale dS K
  LOOM_ASSIGN_OR_RETURN(
      g.dq, prepareGemm(
                dev, probs, {x.k, e}, {x.dq, e},
                {{a.sq, a.sk}, {a.sk, a.d}, false, false, a.batch, sqk, kd, qd},
                false, "attention_grad (dQ)"));
  // dK = scale dS^T Q
  LOOM_ASSIGN_OR_RETURN(
      g.dk, prepareGemm(
                dev, probs, {x.q, e}, {x.dk, e},
                {{a.sq, a.sk}, {a.sq, a.d}, true, false, a.batch, sqk, qd, kd},
                false, "attention_grad (dK)"));
  CudaDevice *d = &dev;
  int64_t need = gemmWorkspaceBytes(a, e);
  return KernelFn([=](const StepContext &) {
    LOOM_RETURN_IF_ERROR(checkWorkspace(*d, need));
    char *w = static_cast<char *>(d->attentionWorkspace());
    float *sc = reinterpret_cast<float *>(w);
    void *p = w + pAt;
    int64_t rows = a.batch * a.sq;
    LOOM_RETURN_IF_ERROR(runGemm(*d, *g.scores, x.q, x.k, sc, false, a.scale));
    LOOM_RETURN_IF_ERROR(
        launchAttentionSoftmax(e, sc, p, rows, a.sq, a.sk, a.causal, s));
    LOOM_RETURN_IF_ERROR(runGemm(*d, *g.dv, p, x.dO, x.dv, false));
    LOOM_RETURN_IF_ERROR(runGemm(*d, *g.dp, x.dO, x.v, sc, false));
    LOOM_RETURN_IF_ERROR(
        launchAttentionSoftmaxGrad(e, p, sc, p, rows, a.sq, a.sk, a.causal, s));
    LOOM_RETURN_IF_ERROR(runGemm(*d, *g.dq, p, x.k, x.dq, false, a.scale));
    return runGemm(*d, *g.dk, p, x.q, x.dk, false, a.scale);
  });
}

} // namespace

StatusOr<KernelFn> bindAttention(const OpView &op, BindContext &ctx) {
  Elem e;
  LOOM_ASSIGN_OR_RETURN(AttentionDims a, attentionDims(op, 0, &e));
  uint8_t *arena = ctx.arena();
  Operands x{arena + op.inputs[0]->offset(), arena + op.inputs[1]->offset(),
             arena + op.inputs[2]->offset()};
  x.o = arena + op.outputs[0]->offset();
  LOOM_ASSIGN_OR_RETURN(Choice choice, chooseAlgorithm(a, e, x.aligned()));
  CudaDevice &dev = cudaDevice(ctx);
  if (choice.algorithm == Algorithm::Tc) {
    LOOM_RETURN_IF_ERROR(prepareTcAttentionKernels(a));
    cudaStream_t s = dev.stream();
    return KernelFn([=](const StepContext &) {
      return launchTcAttention(x.q, x.k, x.v, x.o, a, s);
    });
  }
  if (choice.algorithm == Algorithm::Gemm) {
    StatusOr<KernelFn> fn = bindGemmForward(dev, e, a, x);
    if (fn.isOk() || !choice.flashFallback)
      return fn;
  }
  LOOM_RETURN_IF_ERROR(prepareAttentionKernels(e, a));
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchAttention(e, x.q, x.k, x.v, x.o, a, s);
  });
}

StatusOr<KernelFn> bindAttentionGrad(const OpView &op, BindContext &ctx) {
  Elem e;
  LOOM_ASSIGN_OR_RETURN(AttentionDims a, attentionDims(op, 1, &e));
  uint8_t *arena = ctx.arena();
  Operands x{arena + op.inputs[1]->offset(), arena + op.inputs[2]->offset(),
             arena + op.inputs[3]->offset(), arena + op.inputs[0]->offset()};
  x.dq = arena + op.outputs[0]->offset();
  x.dk = arena + op.outputs[1]->offset();
  x.dv = arena + op.outputs[2]->offset();
  LOOM_ASSIGN_OR_RETURN(Choice choice, chooseAlgorithm(a, e, x.aligned()));
  CudaDevice &dev = cudaDevice(ctx);
  if (choice.algorithm == Algorithm::Tc) {
    LOOM_RETURN_IF_ERROR(prepareTcAttentionKernels(a));
    LOOM_ASSIGN_OR_RETURN(DeviceBuffer ws,
                          dev.allocateWorkspace(std::max<int64_t>(
                              attentionRowStatsBytes(a.batch, a.sq), 1)));
    cudaStream_t s = dev.stream();
    return KernelFn([=](const StepContext &) {
      return launchTcAttentionGrad(x.dO, x.q, x.k, x.v, x.dq, x.dk, x.dv, a,
                                   static_cast<float *>(ws.get()), s);
    });
  }
  if (choice.algorithm == Algorithm::Gemm) {
    StatusOr<KernelFn> fn = bindGemmGrad(dev, e, a, x);
    if (fn.isOk() || !choice.flashFallback)
      return fn;
  }
  LOOM_RETURN_IF_ERROR(prepareAttentionKernels(e, a));
  LOOM_ASSIGN_OR_RETURN(DeviceBuffer ws,
                        dev.allocateWorkspace(std::max<int64_t>(
                            attentionRowStatsBytes(a.batch, a.sq), 1)));
  cudaStream_t s = dev.stream();
  return KernelFn([=](const StepContext &) {
    return launchAttentionGrad(e, x.dO, x.q, x.k, x.v, x.dq, x.dk, x.dv, a,
                               static_cast<float *>(ws.get()), s);
  });
}

} // namespace loom::runtime::cuda
