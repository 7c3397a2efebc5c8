//===- Summary.cpp - What a plan does, for people and tools -----*- C++ -*-===//

#include "compiler/Summary.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir::loom;

static int64_t numElements(const plan::Buffer &b) {
  int64_t n = 1;
  for (int64_t d : b.shape())
    n *= d;
  return n;
}

/// Whether the 0/1 attribute `name` is set (stored as an int or a float).
static bool attrFlag(const plan::Instruction &inst, const char *name) {
  auto it = inst.attrs().find(name);
  if (it == inst.attrs().end())
    return false;
  return it->second.has_f() ? it->second.f() == 1 : it->second.i() == 1;
}

static int64_t dimFromEnd(const plan::Buffer &b, int k) {
  return b.shape_size() >= k ? b.shape(b.shape_size() - k) : 1;
}

/// The multiply-add FLOPs `inst` executes when it is a GEMM or attention,
/// else none: 2 per multiply-add of the output's contraction; attention
/// counts S = Q K^T and P V (forward) or the five products of its gradient
/// (S recomputed, dV, dP, dQ, dK), halved for causal masks as the CUDA
/// kernels skip the masked tiles.
static double gemmFlops(const plan::Program &prog,
                        const plan::Instruction &inst) {
  auto in = [&](int i) -> const plan::Buffer & {
    return prog.buffers(inst.inputs(i));
  };
  const plan::Buffer &out = prog.buffers(inst.outputs(0));
  const std::string &op = inst.op();
  if (op == "matmul" || op == "linear" || op == "batch_matmul") {
    bool transposed = attrFlag(inst, op == "matmul"         ? "transpose_a"
                                     : op == "batch_matmul" ? "transpose_lhs"
                                                            : "");
    int64_t k = dimFromEnd(in(0), transposed ? 2 : 1);
    if (op == "matmul" && transposed) // the lhs is [K, M] flattened
      k = dimFromEnd(in(0), 1) ? numElements(in(0)) / dimFromEnd(in(0), 1) : 0;
    return 2.0 * numElements(out) * k;
  }
  bool grad = op == "attention_grad";
  if (!grad && op != "attention")
    return 0;
  int q = grad ? 1 : 0; // attention_grad reads dO first
  const plan::Buffer &qb = in(q);
  double rows = static_cast<double>(numElements(qb)) / dimFromEnd(qb, 1);
  double pairs = rows * dimFromEnd(in(q + 1), 2); // batch * Sq * Sk
  if (attrFlag(inst, "causal"))
    pairs /= 2;
  double d = dimFromEnd(qb, 1), dv = dimFromEnd(in(q + 2), 1);
  return 2.0 * pairs * (grad ? 3 * d + 2 * dv : d + dv);
}

/// Whether the plan is mixed precision (plans that predate the field are
/// fp32).
static bool isBf16(const plan::Plan &plan) {
  return plan.training().precision() == "bf16";
}

static int64_t meshSize(const plan::Plan &plan, llvm::StringRef axis) {
  for (const plan::MeshAxis &a : plan.mesh())
    if (a.name() == axis)
      return a.size();
  return 1;
}

Prediction mlir::loom::predictStep(const plan::Plan &plan,
                                   const Cluster &cluster) {
  Prediction p;
  if (plan.programs_size() == 0)
    return p;
  const plan::Program &prog = plan.programs(0);
  double elementwiseBytes = 0;
  int64_t dp = meshSize(plan, "dp");
  const Link &link = dp <= cluster.devicesPerNode ? cluster.intraNode
                                                  : cluster.interNode;
  for (const plan::Instruction &inst : prog.instructions()) {
    const plan::Buffer &out = prog.buffers(inst.outputs(0));
    if (double flops = gemmFlops(prog, inst)) {
      p.flopsPerDevice += flops;
    } else if (inst.op() == "all_reduce") {
      if (dp > 1) {
        double bytes = out.size_bytes();
        p.commSeconds += 2.0 * (dp - 1) / dp * bytes /
                             (link.bandwidthGBps * 1e9) +
                         2.0 * (dp - 1) * link.latencyUs * 1e-6;
      }
    } else {
      for (int32_t id : inst.inputs())
        elementwiseBytes += prog.buffers(id).size_bytes();
      for (int32_t id : inst.outputs())
        elementwiseBytes += prog.buffers(id).size_bytes();
    }
  }
  // Mixed-precision GEMMs run at the device's bf16 rate.
  double peak = (isBf16(plan) ? cluster.peakTflopsBf16
                                             : cluster.peakTflopsFp32) *
                1e12;
  p.computeSeconds = peak > 0 ? p.flopsPerDevice / peak : 0;
  p.memorySeconds =
      cluster.hbmGBps > 0 ? elementwiseBytes / (cluster.hbmGBps * 1e9) : 0;
  p.stepSeconds = p.computeSeconds + p.memorySeconds + p.commSeconds;
  if (p.stepSeconds > 0) {
    p.modelTflopsPerDevice = p.flopsPerDevice / p.stepSeconds / 1e12;
    p.mfu = peak > 0 ? p.flopsPerDevice / p.stepSeconds / peak : 0;
  }
  return p;
}

llvm::json::Object mlir::loom::summaryJson(const plan::Plan &plan,
                                           const Cluster &cluster,
                                           const MemoryBreakdown &memory,
                                           const Prediction &prediction,
                                           double planningSeconds) {
  const plan::Training &t = plan.training();
  int64_t dp = meshSize(plan, "dp");
  // One entry per rank, from the program it runs.
  std::vector<int64_t> perRank(plan.world_size(), 0);
  for (const plan::Program &prog : plan.programs())
    for (int32_t rank : prog.ranks())
      if (rank >= 0 && rank < plan.world_size())
        perRank[rank] = memory.perDevice(prog.arena_bytes());
  llvm::json::Array peaks;
  for (int64_t bytes : perRank)
    peaks.push_back(bytes);
  return llvm::json::Object{
      {"mesh",
       llvm::json::Object{{"dp", dp},
                          {"tp", meshSize(plan, "tp")},
                          {"pp", meshSize(plan, "pp")}}},
      {"micro_batch", t.micro_batch()},
      {"num_micro_batches", t.num_micro_batches()},
      {"schedule", "none"},
      {"zero_stage", 0},
      {"remat", "none"},
      {"precision", isBf16(plan) ? "bf16" : "fp32"},
      {"predicted",
       llvm::json::Object{
           {"step_time_s", prediction.stepSeconds},
           {"peak_memory_bytes_per_device", std::move(peaks)},
           {"model_tflops_per_device", prediction.modelTflopsPerDevice},
           {"hardware_tflops_per_device", prediction.modelTflopsPerDevice},
           {"mfu", prediction.mfu},
           {"memory_breakdown_bytes_per_device",
            llvm::json::Object{{"parameters", memory.parameters},
                               {"gradients", memory.gradients},
                               {"optimizer_state", memory.optimizerState},
                               {"activations", memory.activations},
                               {"workspace", memory.workspace}}}}},
      {"num_parameters", memory.numParameters},
      {"planning_time_s", planningSeconds},
      {"world_size", plan.world_size()},
      {"cluster", cluster.spec},
      {"device_memory_bytes", cluster.memoryBytes()},
  };
}

static std::string mib(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.2f MiB", bytes / (1024.0 * 1024.0));
  return s;
}

std::string mlir::loom::summaryText(const plan::Plan &plan,
                                    const Cluster &cluster,
                                    const MemoryBreakdown &memory,
                                    const Prediction &prediction) {
  std::string s;
  llvm::raw_string_ostream os(s);
  const plan::Training &t = plan.training();
  os << "plan: " << plan.world_size() << " rank(s) on " << cluster.spec
     << " (" << cluster.deviceName << ")\n";
  os << "  mesh        pp=" << meshSize(plan, "pp")
     << " dp=" << meshSize(plan, "dp") << " tp=" << meshSize(plan, "tp")
     << "  (data parallel: each rank takes " << t.micro_batch() << " of "
     << t.global_batch() << " samples, gradients all-reduced)\n";
  if (plan.is_training())
    os << "  training    loss " << t.loss() << ", optimizer " << t.optimizer()
       << llvm::format(" (lr %g, weight decay %g", t.lr(), t.weight_decay())
       << "), zero 0, remat none\n";
  if (isBf16(plan))
    os << "  precision   bf16 activations and activation gradients, f32 "
          "parameters, gradients and optimizer state\n";
  else
    os << "  precision   fp32\n";
  os << "  parameters  " << memory.numParameters << " ("
     << mib(memory.parameters) << ")\n";
  os << "  memory      " << mib(memory.perDevice(memory.arena))
     << " per rank (parameters " << mib(memory.parameters) << ", gradients "
     << mib(memory.gradients) << ", optimizer state "
     << mib(memory.optimizerState) << ", activations "
     << mib(memory.activations);
  if (memory.workspace)
    os << ", kernel workspace " << mib(memory.workspace);
  os << "); device has " << llvm::format("%.1f GiB", cluster.memoryGiB)
     << "\n";
  os << "  predicted   "
     << llvm::format("%.3g", prediction.stepSeconds * 1e3)
     << " ms/step (compute "
     << llvm::format("%.3g", prediction.computeSeconds * 1e3)
     << " ms, memory " << llvm::format("%.3g", prediction.memorySeconds * 1e3)
     << " ms, all-reduce "
     << llvm::format("%.3g", prediction.commSeconds * 1e3) << " ms)\n";
  return s;
}
