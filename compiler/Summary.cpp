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

static int64_t attrInt(const plan::Instruction &inst, const char *name) {
  auto it = inst.attrs().find(name);
  return it == inst.attrs().end() ? 0 : it->second.i();
}

/// "bf16" for mixed-precision plans, "fp32" otherwise (also for plans that
/// predate the field).
static std::string precisionOf(const plan::Plan &plan) {
  return plan.training().precision() == "bf16" ? "bf16" : "fp32";
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
    if (inst.op() == "matmul") {
      const plan::Buffer &a = prog.buffers(inst.inputs(0));
      int64_t last = a.shape_size() ? a.shape(a.shape_size() - 1) : 1;
      int64_t rows = last ? numElements(a) / last : 0;
      int64_t k = attrInt(inst, "transpose_a") ? rows : last;
      p.flopsPerDevice += 2.0 * numElements(out) * k;
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
  double peak = (precisionOf(plan) == "bf16" ? cluster.peakTflopsBf16
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
        perRank[rank] = prog.arena_bytes() + memory.workspace;
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
      {"precision", precisionOf(plan)},
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
  if (precisionOf(plan) == "bf16")
    os << "  precision   bf16 activations and activation gradients, f32 "
          "parameters, gradients and optimizer state\n";
  else
    os << "  precision   fp32\n";
  os << "  parameters  " << memory.numParameters << " ("
     << mib(memory.parameters) << ")\n";
  os << "  memory      " << mib(memory.arena + memory.workspace)
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
