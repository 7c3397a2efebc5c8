//===- Workspace.h - Device memory the kernels take besides the arena -*- C++
//-*-===//
//
// The arena holds every buffer of a plan; some kernels also allocate
// workspace of their own when they are bound. The largest is the CUDA
// backend's attention score buffer (runtime/cuda/AttentionKernels.cpp),
// which takes gigabytes at GPT-2 sizes. The formulas live here, in the
// runtime library without CUDA, so that the CUDA binds and `loomc`'s memory
// proof use the same numbers.
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

/// Whether the CUDA backend's default (`auto`) attention takes the
/// tensor-core path, which keeps no scores: bf16 storage, D = Dv = 64 or 128
/// (runtime/cuda/AttentionTc.cu's `tcAttentionSupports`; arena operands are
/// always 16-byte aligned).
bool attentionTakesTensorCorePath(plan::DType dtype, int64_t d, int64_t dv);

/// What the CUDA backend's kernels of `program` allocate besides its arena
/// with the default settings: the shared attention score workspace (the
/// largest GEMM-path instruction's), the per-instruction row statistics of
/// the gradients of the tensor-core and flash paths, and the cuBLASLt
/// workspace. Small per-instruction row
/// statistics of the other kernels (losses, norms) are not counted.
int64_t estimateCudaWorkspaceBytes(const plan::Program &program);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_WORKSPACE_H
