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

int64_t gemmPaddedCols(const GemmMatrix &m) {
  int64_t per16 = 16 / m.elemBytes; // elements per 16 bytes (bf16 8, f32 4)
  return (m.cols + per16 - 1) / per16 * per16;
}

int64_t gemmPaddedBytes(const GemmMatrix &m) {
  if (m.cols * m.elemBytes % 16 == 0)
    return 0;
  return (m.count * m.rows * gemmPaddedCols(m) * m.elemBytes + 255) / 256 * 256;
}

int64_t gemmPadWorkspaceBytes(const GemmMatrix &a, const GemmMatrix &b,
                              const GemmMatrix &c, int64_t k, double minFlops) {
  int64_t bytes = gemmPaddedBytes(a) + gemmPaddedBytes(b) + gemmPaddedBytes(c);
  double flops =
      2.0 * double(c.count) * double(c.rows) * double(c.cols) * double(k);
  if (bytes == 0 || k == 0 || c.count * c.rows * c.cols == 0 ||
      flops < minFlops || bytes > kMaxGemmPadWorkspaceBytes)
    return 0;
  return bytes;
}

namespace {

bool flag(const plan::Instruction &inst, const char *name) {
  auto it = inst.attrs().find(name);
  if (it == inst.attrs().end())
    return false;
  return it->second.has_f() ? it->second.f() == 1 : it->second.i() == 1;
}

int64_t product(const google::protobuf::RepeatedField<int64_t> &s, int from,
                int to) {
  int64_t n = 1;
  for (int i = from; i < to; ++i)
    n *= s[i];
  return n;
}

/// The padded-GEMM workspace of one instruction, shaped as its CUDA bind
/// (runtime/cuda/Matmul.cpp) shapes the GEMM; 0 for other instructions and
/// for broadcasts that run one GEMM per batch entry.
int64_t gemmPadWorkspaceBytes(const plan::Instruction &inst,
                              const plan::Buffer &x, const plan::Buffer &w,
                              const plan::Buffer &y) {
  const auto &as = x.shape(), &bs = w.shape(), &cs = y.shape();
  int64_t ea = dtypeSize(x.dtype()), eb = dtypeSize(w.dtype()),
          ec = dtypeSize(y.dtype());
  // Row-major [rows, cols] views of all but the last dimension.
  auto rows = [](const auto &s) {
    return s.empty() ? 1 : product(s, 0, s.size() - 1);
  };
  auto cols = [](const auto &s) {
    return s.empty() ? int64_t(1) : s[s.size() - 1];
  };
  if (inst.op() == "matmul" || inst.op() == "linear") {
    bool ta = inst.op() == "matmul" && flag(inst, "transpose_a");
    bool tb =
        flag(inst, inst.op() == "matmul" ? "transpose_b" : "transpose_weight");
    GemmMatrix a{1, rows(as), cols(as), ea}, b{1, rows(bs), cols(bs), eb};
    int64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
    int64_t n = tb ? b.rows : b.cols;
    return gemmPadWorkspaceBytes(a, b, GemmMatrix{1, m, n, ec}, k);
  }
  if (inst.op() != "batch_matmul" || as.size() < 2 || bs.size() < 2 ||
      cs.size() < 2)
    return 0;
  bool ta = flag(inst, "transpose_lhs"), tb = flag(inst, "transpose_rhs");
  int ra = as.size(), rb = bs.size(), rc = cs.size();
  int64_t m = ta ? as[ra - 1] : as[ra - 2], k = ta ? as[ra - 2] : as[ra - 1];
  int64_t n = tb ? bs[rb - 2] : bs[rb - 1];
  int64_t batches = product(cs, 0, rc - 2), aCount = product(as, 0, ra - 2),
          bCount = product(bs, 0, rb - 2);
  GemmMatrix b{1, bs[rb - 2], bs[rb - 1], eb};
  if (bCount == 1 && aCount == batches && !ta) // one tall GEMM
    return gemmPadWorkspaceBytes(GemmMatrix{1, batches * m, k, ea}, b,
                                 GemmMatrix{1, batches * m, n, ec}, k);
  if ((aCount != batches && aCount != 1) || (bCount != batches && bCount != 1))
    return 0;
  b.count = bCount;
  return gemmPadWorkspaceBytes(GemmMatrix{aCount, as[ra - 2], as[ra - 1], ea},
                               b, GemmMatrix{batches, m, n, ec}, k);
}

} // namespace

int64_t largestGemmPadWorkspaceBytes(const plan::Program &program) {
  std::unordered_map<int32_t, const plan::Buffer *> byId;
  for (const plan::Buffer &b : program.buffers())
    byId[b.id()] = &b;
  int64_t largest = 0;
  for (const plan::Instruction &inst : program.instructions()) {
    if (inst.op() != "matmul" && inst.op() != "linear" &&
        inst.op() != "batch_matmul")
      continue;
    if (inst.inputs_size() < 2 || inst.outputs_size() < 1)
      continue;
    largest =
        std::max(largest, gemmPadWorkspaceBytes(inst, *byId.at(inst.inputs(0)),
                                                *byId.at(inst.inputs(1)),
                                                *byId.at(inst.outputs(0))));
  }
  return largest;
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
  return kCudaGemmWorkspaceBytes + scores + flashStats +
         largestGemmPadWorkspaceBytes(program);
}

} // namespace loom::runtime
