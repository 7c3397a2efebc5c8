//===- Workspace.cpp - Device memory the kernels take besides the arena ---===//

#include "runtime/Workspace.h"
#include "runtime/OpView.h"
#include "runtime/PlanFormat.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <unordered_map>

namespace loom::runtime {

int64_t attentionProbsOffset(int64_t batch, int64_t sq, int64_t sk) {
  return (batch * sq * sk * int64_t(sizeof(float)) + 255) / 256 * 256;
}

int64_t attentionRowStatsBytes(int64_t batch, int64_t sq) {
  return 2 * batch * sq * int64_t(sizeof(float));
}

int64_t attentionGemmWorkspaceBytes(int64_t batch, int64_t sq, int64_t sk,
                                    int64_t elemBytes) {
  return attentionProbsOffset(batch, sq, sk) + batch * sq * sk * elemBytes;
}

bool attentionTakesTensorCorePath(plan::DType dtype, int64_t sq, int64_t sk,
                                  int64_t d, int64_t dv, bool causal) {
  return dtype == plan::BF16 && d == dv && (d == 64 || d == 128) &&
         (!causal || sq == sk);
}

GemmPadPlan planGemmPad(const GemmMatrix &a, bool ta, const GemmMatrix &b,
                        bool tb, const GemmMatrix &c, double minFlops) {
  GemmPadPlan p;
  int64_t m = c.rows, n = c.cols, k = ta ? a.rows : a.cols;
  double flops = 2.0 * double(c.count) * double(m) * double(n) * double(k);
  if (k == 0 || c.count * m * n == 0 || flops < minFlops)
    return p;
  auto misaligned = [](const GemmMatrix &x) {
    return x.cols * x.elemBytes % 16 != 0;
  };
  auto up = [](int64_t d) {
    return (d + kGemmPadDimMultiple - 1) / kGemmPadDimMultiple *
           kGemmPadDimMultiple;
  };
  // A row of a is m long when transposed, k otherwise; a row of b k or n; a
  // row of c n.
  bool padM = ta && misaligned(a);
  bool padK = (!ta && misaligned(a)) || (tb && misaligned(b));
  bool padN = (!tb && misaligned(b)) || misaligned(c);
  p.m = padM ? up(m) : m;
  p.n = padN ? up(n) : n;
  p.k = padK ? up(k) : k;
  p.a = ta ? GemmMatrix{a.count, p.k, p.m, a.elemBytes}
           : GemmMatrix{a.count, p.m, p.k, a.elemBytes};
  p.b = tb ? GemmMatrix{b.count, p.n, p.k, b.elemBytes}
           : GemmMatrix{b.count, p.k, p.n, b.elemBytes};
  p.c = GemmMatrix{c.count, p.m, p.n, c.elemBytes};
  p.copyA = p.a.rows != a.rows || p.a.cols != a.cols;
  p.copyB = p.b.rows != b.rows || p.b.cols != b.cols;
  p.copyC = p.c.rows != c.rows || p.c.cols != c.cols;
  auto bytesOf = [](const GemmMatrix &x, bool copied) {
    return copied ? (x.count * x.rows * x.cols * x.elemBytes + 255) / 256 * 256
                  : int64_t(0);
  };
  p.offA = 0;
  p.offB = bytesOf(p.a, p.copyA);
  p.offC = p.offB + bytesOf(p.b, p.copyB);
  int64_t bytes = p.offC + bytesOf(p.c, p.copyC);
  if (bytes > 0 && bytes <= kMaxGemmPadWorkspaceBytes)
    p.bytes = bytes;
  return p;
}

namespace {

/// A unit attribute as the kernels read it (`flagAttr`); one they would
/// reject counts as unset. Only the instruction's attributes are read, so
/// the view needs no plan and no operands.
bool flag(const plan::Instruction &inst, const char *name) {
  StatusOr<bool> f =
      flagAttr(OpView{plan::Plan::default_instance(), inst, {}, {}}, name);
  return f.isOk() && *f;
}

/// The padded-GEMM workspace of one instruction, shaped as its CUDA bind
/// (runtime/cuda/Matmul.cpp) shapes the GEMM; 0 for other instructions and
/// for broadcasts that run one GEMM per batch entry.
int64_t gemmPadWorkspaceBytes(const plan::Instruction &inst,
                              const plan::Buffer &x, const plan::Buffer &w,
                              const plan::Buffer &y) {
  std::vector<int64_t> as = bufferShape(x), bs = bufferShape(w),
                       cs = bufferShape(y);
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
    int64_t m = ta ? a.cols : a.rows, n = tb ? b.rows : b.cols;
    return planGemmPad(a, ta, b, tb, GemmMatrix{1, m, n, ec}).bytes;
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
    return planGemmPad(GemmMatrix{1, batches * m, k, ea}, false, b, tb,
                       GemmMatrix{1, batches * m, n, ec})
        .bytes;
  if ((aCount != batches && aCount != 1) || (bCount != batches && bCount != 1))
    return 0;
  b.count = bCount;
  return planGemmPad(GemmMatrix{aCount, as[ra - 2], as[ra - 1], ea}, ta, b, tb,
                     GemmMatrix{batches, m, n, ec})
      .bytes;
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
    auto shape = [&](size_t i) {
      return bufferShape(*byId.at(inst.inputs(i)));
    };
    std::vector<int64_t> qs = shape(q), ks = shape(q + 1), vs = shape(q + 2);
    size_t r = qs.size();
    if (r < 2 || ks.size() != r || vs.size() != r)
      continue;
    int64_t batch = product(qs, 0, r - 2);
    int64_t sq = qs[r - 2], sk = ks[r - 2], d = qs[r - 1], dv = vs[r - 1];
    plan::DType dtype = byId.at(inst.inputs(q))->dtype();
    int64_t gemm = attentionGemmWorkspaceBytes(batch, sq, sk, dtypeSize(dtype));
    if (attentionTakesTensorCorePath(dtype, sq, sk, d, dv,
                                     flag(inst, "causal"))) {
      if (grad) // the row statistics, as the flash path's
        flashStats += attentionRowStatsBytes(batch, sq);
    } else if (d > 0 && dv > 0 && gemm <= (kDefaultAttentionWorkspaceMiB << 20))
      scores = std::max(scores, gemm);
    else if (grad)
      flashStats += attentionRowStatsBytes(batch, sq);
  }
  return kCudaGemmWorkspaceBytes + scores + flashStats +
         largestGemmPadWorkspaceBytes(program);
}

} // namespace loom::runtime
