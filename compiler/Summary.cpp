//===- Summary.cpp - What a plan does, for people and tools -----*- C++ -*-===//

#include "compiler/Summary.h"
#include "compiler/PlanCost.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir::loom;

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

PlanFigures mlir::loom::planFigures(const plan::Plan &plan,
                                    const MemoryBreakdown &emitted,
                                    planner::StepEstimate step) {
  PlanFigures f;
  f.numParameters = emitted.numParameters;
  f.step = std::move(step);
  f.memory = deviceMemoryOf(emitted, emitted.arena);
  // One entry per rank, from the program it runs; the busiest program's
  // breakdown is the one reported.
  f.peakBytesPerRank.assign(plan.world_size(), 0);
  for (const plan::Program &prog : plan.programs()) {
    planner::DeviceMemory m = deviceMemoryOf(emitted, prog.arena_bytes());
    if (m.total() > f.memory.total())
      f.memory = m;
    for (int32_t rank : prog.ranks())
      if (rank >= 0 && rank < plan.world_size())
        f.peakBytesPerRank[rank] = m.total();
  }
  return f;
}

llvm::json::Object mlir::loom::summaryJson(const plan::Plan &plan,
                                           const Cluster &cluster,
                                           const PlanFigures &figures,
                                           double planningSeconds) {
  const plan::Training &t = plan.training();
  const planner::DeviceMemory &memory = figures.memory;
  const planner::StepEstimate &step = figures.step;
  llvm::json::Array peaks;
  for (int64_t bytes : figures.peakBytesPerRank)
    peaks.push_back(bytes);
  return llvm::json::Object{
      {"mesh",
       llvm::json::Object{{"dp", meshSize(plan, "dp")},
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
           {"step_time_s", step.stepSeconds},
           {"peak_memory_bytes_per_device", std::move(peaks)},
           {"model_tflops_per_device", step.modelTflops},
           {"hardware_tflops_per_device", step.modelTflops},
           {"mfu", step.mfu},
           {"memory_breakdown_bytes_per_device",
            llvm::json::Object{{"parameters", memory.parameters},
                               {"gradients", memory.gradients},
                               {"optimizer_state", memory.optimizerState},
                               {"activations", memory.activations},
                               {"workspace", memory.workspace}}}}},
      {"num_parameters", figures.numParameters},
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
                                    const PlanFigures &figures) {
  std::string s;
  llvm::raw_string_ostream os(s);
  const plan::Training &t = plan.training();
  const planner::DeviceMemory &memory = figures.memory;
  const planner::StepEstimate &step = figures.step;
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
  os << "  parameters  " << figures.numParameters << " ("
     << mib(memory.parameters) << ")\n";
  for (const plan::TiedInitializer &tie : plan.tied_initializers())
    os << "  tied        " << tie.name() << " = " << tie.parameter()
       << (tie.transposed() ? "^T" : "")
       << " (the exporter's copy; trained as one, exported from it)\n";
  os << "  memory      " << mib(memory.total())
     << " per rank (parameters " << mib(memory.parameters) << ", gradients "
     << mib(memory.gradients) << ", optimizer state "
     << mib(memory.optimizerState) << ", activations "
     << mib(memory.activations);
  if (memory.workspace)
    os << ", kernel workspace " << mib(memory.workspace);
  os << "); device has " << llvm::format("%.1f GiB", cluster.memoryGiB)
     << "\n";
  auto ms = [](double seconds) {
    return llvm::format("%.3g ms", seconds * 1e3);
  };
  os << "  predicted   " << llvm::format("%.3g", step.stepSeconds * 1e3)
     << " ms/step (compute " << ms(step.computeBoundSeconds) << ", memory "
     << ms(step.memoryBoundSeconds) << ", communication "
     << ms(step.totalCommSeconds());
  for (auto [i, axis] : llvm::enumerate(step.commSeconds))
    os << (i ? " + " : " = ") << axis.axes << " " << ms(axis.seconds);
  os << ")\n";
  return s;
}
