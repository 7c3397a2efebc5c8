//===- Workspace.h - Device memory the kernels take besides the arena -*- C++
//-*-===//
//
// The arena holds every buffer of a plan; some kernels also allocate
// workspace of their own when they are bound. The largest are the CUDA
// backend's attention score buffer (runtime/cuda/AttentionKernels.cpp) and
// its padded copies of GEMM operands whose rows are not 16-byte aligned
// (runtime/cuda/Matmul.cpp; GPT-2's logits), gigabytes at GPT-2 sizes. The
// formulas live here, in the plan format library (`LoomPlanFormat`: no CUDA,
// no kernels), so that the CUDA binds and `loomc`'s memory proof use the
// same numbers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_WORKSPACE_H
#define LOOM_RUNTIME_WORKSPACE_H

#include "runtime/plan.pb.h"

#include <cstdint>

namespace loom::runtime {

/// Default of `LOOM_CUDA_ATTENTION_WORKSPACE_MB`: the largest score
/// workspace for which `auto` takes the GEMM path.
constexpr int64_t kDefaultAttentionWorkspaceMiB = 4096;
/// cuBLASLt workspace of one CUDA device.
constexpr int64_t kCudaGemmWorkspaceBytes = int64_t(32) << 20;

/// Byte offset of the probabilities in the CUDA GEMM-path attention
/// workspace: after `batch * sq * sk` f32 scores, 256-byte aligned.
int64_t attentionProbsOffset(int64_t batch, int64_t sq, int64_t sk);
/// Bytes of that workspace: the f32 scores, then the probabilities (later
/// dS) in the storage type of `elemBytes` bytes.
int64_t attentionGemmWorkspaceBytes(int64_t batch, int64_t sq, int64_t sk,
                                    int64_t elemBytes);

/// Bytes of the row statistics the flash and tensor-core attention
/// gradients keep per instruction: the logsumexp and rowsum(dO * O) of each
/// of the `batch * sq` query rows, in f32.
int64_t attentionRowStatsBytes(int64_t batch, int64_t sq);

/// Whether the CUDA backend's default (`auto`) attention takes the
/// tensor-core path, which keeps no scores: bf16 storage, D = Dv = 64 or
/// 128, and Sq = Sk when causal. The one copy of this rule: the CUDA bind
/// (runtime/cuda/AttentionKernels.cpp) adds only that every operand be
/// 16-byte aligned, which arena operands always are.
bool attentionTakesTensorCorePath(plan::DType dtype, int64_t sq, int64_t sk,
                                  int64_t d, int64_t dv, bool causal);

/// Default of `LOOM_CUDA_GEMM_PAD_MIN_FLOPS`: the smallest GEMM (2 m n k per
/// batch entry) that the CUDA backend runs on padded copies when a row of
/// one of its matrices is not a multiple of 16 bytes.
constexpr double kDefaultGemmPadMinFlops = 1e9;
/// The largest padded-GEMM workspace one GEMM may take; a GEMM that would
/// need more keeps its unpadded path.
constexpr int64_t kMaxGemmPadWorkspaceBytes = int64_t(8) << 30;

/// What a padded GEMM rounds a dimension up to (in elements): the length
/// of a misaligned row becomes a multiple of 64 (GPT-2's 50257: 50304),
/// which cuBLASLt's fast tiles fit.
constexpr int64_t kGemmPadDimMultiple = 64;

/// `count` row-major `[rows, cols]` matrices of `elemBytes`-byte elements
/// stored back to back: a GEMM operand or output as stored (before any
/// transpose), `count` 1 for a plain or a broadcast (shared) one.
struct GemmMatrix {
  int64_t count, rows, cols, elemBytes;
};

/// How the CUDA backend runs `c = op(a) op(b)` on padded copies: each GEMM
/// dimension (m, n, k) that is the row length of a matrix whose rows are
/// not a multiple of 16 bytes is rounded up to `kGemmPadDimMultiple`; a
/// matrix whose stored shape changes so is copied (dense, zero pad) into the
/// workspace at `off*`, the others are used in place.
struct GemmPadPlan {
  int64_t m = 0, n = 0, k = 0; ///< the padded GEMM's dimensions
  GemmMatrix a{}, b{}, c{};    ///< the shapes cuBLASLt sees
  bool copyA = false, copyB = false, copyC = false;
  int64_t offA = 0, offB = 0, offC = 0; ///< 256-byte aligned byte offsets
  /// The workspace it takes; 0 when the GEMM keeps its unpadded path (every
  /// row 16-byte aligned, fewer than `minFlops` real FLOPs, or over
  /// `kMaxGemmPadWorkspaceBytes`).
  int64_t bytes = 0;
};
/// The padded plan of `c = op(a) op(b)` (`ta`, `tb`: transposed operands).
GemmPadPlan planGemmPad(const GemmMatrix &a, bool ta, const GemmMatrix &b,
                        bool tb, const GemmMatrix &c,
                        double minFlops = kDefaultGemmPadMinFlops);
/// The largest padded-GEMM workspace of the `matmul`, `linear` and
/// `batch_matmul` instructions of `program` with the default threshold
/// (one workspace per device, shared by all of them).
int64_t largestGemmPadWorkspaceBytes(const plan::Program &program);

/// What the CUDA backend's kernels of `program` allocate besides its arena
/// with the default settings: the shared attention score workspace (the
/// largest GEMM-path instruction's), the per-instruction row statistics of
/// the gradients of the tensor-core and flash paths, the shared padded-GEMM
/// workspace, and the cuBLASLt workspace. Small per-instruction row
/// statistics of the other kernels (losses, norms) are not counted.
int64_t estimateCudaWorkspaceBytes(const plan::Program &program);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_WORKSPACE_H
