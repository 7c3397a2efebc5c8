//===- Workspace.cpp - Device memory the kernels take besides the arena ---===//

#include "runtime/Workspace.h"
#include "runtime/Plan.h"

#include <algorithm>
#include <unordered_map>

namespace loom::runtime {

int64_t attentionProbsOffset(int64_t batch, int64_t sq, int64_t sk) {
  return (batch * sq * sk * int64_t(sizeof(float)) + 255) / 256 * 256;
}

int64_t attentionGemmWorkspaceBytes(int64_t batch, int64_t sq, int64_t sk,
                                    int64_t elemBytes) {
  return attentionProbsOffset(batch, sq, sk) + batch * sq * sk * elemBytes;
}

bool attentionTakesTensorCorePath(plan::DType dtype, int64_t d, int64_t dv) {
  return dtype == plan::BF16 && d == dv && (d == 64 || d == 128);
}

int64_t estimateCudaWorkspaceBytes(const plan::Program &program) {
  std::unordered_map<int32_t, const plan::Buffer *> byId;
  for (const plan::Buffer &b : program.buffers())
    byId[b.id()] = &b;
  int64_t scores = 0, flashStats = 0;
  for (const plan::Instruction &inst : program.instructions()) {
    bool grad = inst.op() == "attention_grad";
    if (!grad && inst.op() != "attention")
      continue;
    size_t q = grad ? 1 : 0; // attention_grad reads dO first
    if (inst.inputs_size() < static_cast<int>(q + 3))
      continue;
    auto shape =
        [&](size_t i) -> const google::protobuf::RepeatedField<int64_t> & {
      return byId.at(inst.inputs(i))->shape();
    };
    const auto &qs = shape(q), &ks = shape(q + 1), &vs = shape(q + 2);
    int r = qs.size();
    if (r < 2 || ks.size() != r || vs.size() != r)
      continue;
    int64_t batch = 1;
    for (int d = 0; d + 2 < r; ++d)
      batch *= qs[d];
    int64_t sq = qs[r - 2], sk = ks[r - 2], d = qs[r - 1], dv = vs[r - 1];
    plan::DType dtype = byId.at(inst.inputs(q))->dtype();
    int64_t gemm = attentionGemmWorkspaceBytes(batch, sq, sk, dtypeSize(dtype));
    if (attentionTakesTensorCorePath(dtype, d, dv)) {
      if (grad) // the row statistics, as the flash path's
        flashStats += 2 * batch * sq * int64_t(sizeof(float));
    } else if (d > 0 && dv > 0 && gemm <= (kDefaultAttentionWorkspaceMiB << 20))
      scores = std::max(scores, gemm);
    else if (grad)
      flashStats += 2 * batch * sq * int64_t(sizeof(float));
  }
  return kCudaGemmWorkspaceBytes + scores + flashStats;
}

} // namespace loom::runtime
