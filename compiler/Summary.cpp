//===- Summary.cpp - What a plan does, for people and tools -----*- C++ -*-===//

#include "compiler/Summary.h"
#include "compiler/PlanCost.h"
#include "passes/planner/LayerName.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>

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
                                    const planner::StepRequest &request,
                                    planner::StepEstimate step) {
  PlanFigures f;
  f.numParameters = emitted.numParameters;
  f.step = std::move(step);
  f.collectives = request.collectives;
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

void mlir::loom::setPipelineFigures(PlanFigures &f, const plan::Plan &plan,
                                     const PipelineStages &stages,
                                     const std::vector<double> &deviceSeconds) {
  f.schedule = stages.schedule;
  f.pipelineStretch = stages.stretch;
  for (auto [s, layers] : llvm::enumerate(stages.layers)) {
    // A device's seconds shared among its stages (interleaved: its model
    // chunks) as the stage partition predicted them.
    int64_t device = static_cast<int64_t>(s) % stages.devices;
    double planned = 0, ofDevice = 0;
    for (auto [k, secs] : llvm::enumerate(stages.plannedSeconds))
      if (static_cast<int64_t>(k) % stages.devices == device) {
        ofDevice += secs;
        if (k == s)
          planned = secs;
      }
    PlanFigures::Stage st;
    st.firstLayer = layers.first;
    st.lastLayer = layers.second;
    if (device < plan.programs_size()) {
      const plan::Program &prog = plan.programs(static_cast<int>(device));
      st.ranks.assign(prog.ranks().begin(), prog.ranks().end());
      if (!st.ranks.empty())
        st.peakBytes = f.peakBytesPerRank[st.ranks.front()];
    }
    if (device < static_cast<int64_t>(stages.inFlight.size()))
      st.microBatchesInFlight = stages.inFlight[device];
    if (device < static_cast<int64_t>(deviceSeconds.size()))
      st.seconds = deviceSeconds[device] *
                   (ofDevice > 0 ? planned / ofDevice : 1.0);
    f.stages.push_back(std::move(st));
  }
}

/// The name of mesh axis `index` of `plan`.
static std::string axisName(const plan::Plan &plan, int64_t index) {
  return index >= 0 && index < plan.mesh_size()
             ? plan.mesh(index).name()
             : "axis" + std::to_string(index);
}

/// Each parameter's split, as mesh axis names per dimension (a dimension
/// of several blocks lists the axes that split each block).
static llvm::json::Object parameterShardings(const plan::Plan &plan) {
  llvm::json::Object out;
  for (const plan::Program &prog : plan.programs())
    for (const plan::Buffer &b : prog.buffers()) {
      if (b.role() != plan::PARAMETER || out.find(b.binding()) != out.end())
        continue;
      llvm::json::Array dims;
      int rank = b.global_shape_size() ? b.global_shape_size() : b.shape_size();
      for (int d = 0; d < rank; ++d) {
        llvm::json::Array axes;
        if (d < b.dim_shardings_size())
          for (int32_t axis : b.dim_shardings(d).axes())
            axes.push_back(axisName(plan, axis));
        dims.push_back(std::move(axes));
      }
      out[b.binding()] = std::move(dims);
    }
  return out;
}

/// One rank's collectives in a step, by kind and mesh axes.
static llvm::json::Array
communicationPerStep(const plan::Plan &plan,
                     llvm::ArrayRef<planner::CollectiveRecord> collectives) {
  struct Total {
    int64_t count = 0;
    double bytes = 0;
  };
  std::map<std::pair<std::string, std::vector<std::string>>, Total> totals;
  for (const planner::CollectiveRecord &c : collectives) {
    std::vector<std::string> axes;
    for (unsigned axis : c.axes)
      axes.push_back(axisName(plan, axis));
    Total &t = totals[{planner::collectiveName(c.kind).str(), axes}];
    ++t.count;
    t.bytes += c.bytes;
  }
  llvm::json::Array out;
  for (const auto &[key, total] : totals) {
    llvm::json::Array axes;
    for (const std::string &a : key.second)
      axes.push_back(a);
    out.push_back(llvm::json::Object{{"kind", key.first},
                                     {"axes", std::move(axes)},
                                     {"count", total.count},
                                     {"bytes", static_cast<int64_t>(total.bytes)}});
  }
  return out;
}

/// The buckets of overlapped collectives: how many, their bytes and
/// tensors, in all and for each kind.
struct BucketTotals {
  int64_t buckets = 0, tensors = 0;
  double bytes = 0;
  std::map<std::string, BucketTotals> byKind;
};
static BucketTotals bucketTotals(
    llvm::ArrayRef<planner::CollectiveRecord> collectives) {
  BucketTotals t;
  for (const planner::CollectiveRecord &c : collectives)
    if (c.bucket)
      for (BucketTotals *into :
           {&t, &t.byKind[planner::collectiveName(c.kind).str()]}) {
        ++into->buckets;
        into->tensors += c.tensors;
        into->bytes += c.bytes;
      }
  return t;
}

/// The summary JSON's `overlapped_buckets`: the totals, and `kinds`, each
/// kind's.
static llvm::json::Object overlappedBucketsJson(const BucketTotals &t) {
  llvm::json::Array kinds;
  for (const auto &[kind, k] : t.byKind)
    kinds.push_back(llvm::json::Object{{"kind", kind},
                                       {"count", k.buckets},
                                       {"tensors", k.tensors},
                                       {"bytes", static_cast<int64_t>(k.bytes)}});
  return llvm::json::Object{{"count", t.buckets},
                            {"tensors", t.tensors},
                            {"bytes", static_cast<int64_t>(t.bytes)},
                            {"kinds", std::move(kinds)}};
}

/// The `stages` array of the summary JSON (empty without stages).
static llvm::json::Array stagesJson(const PlanFigures &figures) {
  llvm::json::Array stages;
  for (const PlanFigures::Stage &s : figures.stages) {
    llvm::json::Array ranks;
    for (int32_t r : s.ranks)
      ranks.push_back(r);
    stages.push_back(llvm::json::Object{
        {"layers", llvm::json::Array{s.firstLayer, s.lastLayer}},
        {"ranks", std::move(ranks)},
        {"predicted_time_s", s.seconds},
        {"peak_memory_bytes", s.peakBytes},
        {"micro_batches_in_flight", s.microBatchesInFlight}});
  }
  return stages;
}

/// The busiest device's predicted seconds a step by op and collective kind.
static llvm::json::Object secondsByKind(const planner::StepEstimate &step) {
  llvm::json::Object o;
  for (const auto &[kind, seconds] : step.secondsByKind)
    o[kind] = seconds;
  return o;
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
  BucketTotals buckets = bucketTotals(figures.collectives);
  return llvm::json::Object{
      {"mesh",
       llvm::json::Object{{"dp", meshSize(plan, "dp")},
                          {"tp", meshSize(plan, "tp")},
                          {"pp", meshSize(plan, "pp")}}},
      {"micro_batch", t.micro_batch()},
      {"num_micro_batches", t.num_micro_batches()},
      {"schedule", figures.schedule},
      {"stages", stagesJson(figures)},
      {"zero_stage", t.zero_stage()},
      {"remat", figures.remat.mode},
      {"recompute",
       llvm::json::Object{{"layers", figures.remat.layers},
                          {"full_layers", figures.remat.fullLayers},
                          {"selective_layers", figures.remat.selectiveLayers},
                          {"regathered", figures.remat.regathered},
                          {"predicted_time_s", figures.remat.seconds}}},
      {"precision", isBf16(plan) ? "bf16" : "fp32"},
      {"predicted",
       llvm::json::Object{
           {"step_time_s", step.stepSeconds},
           {"basis", cluster.predictionBasisKey()},
           {"communication_s", step.totalCommSeconds()},
           {"exposed_communication_s", step.exposedCommSeconds},
           {"peak_memory_bytes_per_device", std::move(peaks)},
           {"live_set_bytes", figures.liveBytes},
           {"estimated_peak_bytes", figures.estimatedBytes},
           {"model_tflops_per_device", step.modelTflops},
           {"hardware_tflops_per_device", step.modelTflops},
           {"mfu", step.mfu},
           {"seconds_by_kind", secondsByKind(step)},
           {"memory_breakdown_bytes_per_device",
            llvm::json::Object{{"parameters", memory.parameters},
                               {"gradients", memory.gradients},
                               {"optimizer_state", memory.optimizerState},
                               {"activations", memory.activations},
                               {"workspace", memory.workspace}}}}},
      {"num_parameters", figures.numParameters},
      {"parameter_shardings", parameterShardings(plan)},
      {"sequence_parallel_norms",
       llvm::json::Object{{"norms", figures.norms},
                          {"split", figures.sequenceParallelNorms}}},
      {"communication_per_step",
       communicationPerStep(plan, figures.collectives)},
      {"overlapped_buckets", overlappedBucketsJson(buckets)},
      {"planning_time_s", planningSeconds},
      {"world_size", plan.world_size()},
      {"global_batch", t.global_batch()},
      {"cluster", cluster.spec},
      {"device_memory_bytes", cluster.memoryBytes()},
      {"device_usable_memory_bytes", cluster.usableMemoryBytes()},
  };
}

/// The split parameters by kind of layer: `h.*.attn.c_proj.weight [tp, -]`.
static void printLayerShardings(llvm::raw_ostream &os,
                                const plan::Plan &plan) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, int>> kinds;
  int64_t split = 0, total = 0;
  for (const plan::Program &prog : plan.programs()) {
    for (const plan::Buffer &b : prog.buffers()) {
      if (b.role() != plan::PARAMETER)
        continue;
      ++total;
      std::string dims;
      bool any = false;
      for (const plan::DimSharding &d : b.dim_shardings()) {
        dims += dims.empty() ? "[" : ", ";
        if (d.axes().empty())
          dims += "-";
        for (auto [i, axis] : llvm::enumerate(d.axes())) {
          dims += (i ? "+" : "") + axisName(plan, axis);
          any = true;
        }
        if (!d.axes().empty() && d.blocks() > 1)
          dims += " in " + std::to_string(d.blocks()) + " blocks";
      }
      if (!any)
        continue;
      ++split;
      std::string kind = planner::splitLayerIndex(b.binding()).kind;
      auto [it, fresh] = kinds.try_emplace(kind, dims + "]", 0);
      if (fresh)
        order.push_back(kind);
      ++it->second.second;
    }
  }
  os << "  sharding    " << split << " of " << total
     << " parameter tensors split, the others replicated\n";
  for (const std::string &kind : order) {
    const auto &[dims, count] = kinds[kind];
    os << "              " << kind << " " << dims;
    if (count > 1)
      os << " (" << count << " layers)";
    os << "\n";
  }
}

std::string mlir::loom::rematText(const RematFigures &remat) {
  std::string s;
  if (remat.fullLayers == 0 && remat.selectiveLayers == 0)
    s = "none";
  if (remat.fullLayers > 0)
    s += "full on " + std::to_string(remat.fullLayers);
  if (remat.selectiveLayers > 0)
    s += (s.empty() ? "" : ", ") + std::string("selective on ") +
         std::to_string(remat.selectiveLayers);
  s += " of " + std::to_string(remat.layers) + " layers";
  if (remat.regathered > 0)
    s += ", " + std::to_string(remat.regathered) +
         " sequence-parallel gather(s) made again";
  return s;
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
  int64_t tp = meshSize(plan, "tp");
  os << "  mesh        pp=" << meshSize(plan, "pp")
     << " dp=" << meshSize(plan, "dp") << " tp=" << tp
     << "  (data parallel: each dp rank takes "
     << t.micro_batch() * std::max<int64_t>(t.num_micro_batches(), 1)
     << " of " << t.global_batch() << " samples";
  if (t.num_micro_batches() > 1)
    os << " in " << t.num_micro_batches() << " micro-batches of "
       << t.micro_batch() << ", gradients accumulated, then all-reduced";
  else
    os << ", gradients all-reduced";
  os << (tp > 1 ? "; tensor parallel: loom-auto-shard splits ops over tp"
                : "")
     << ")\n";
  if (tp > 1) {
    printLayerShardings(os, plan);
    if (figures.norms > 0)
      os << "  activations " << figures.sequenceParallelNorms << " of "
         << figures.norms
         << " norms split along the tokens over tp (sequence parallelism)\n";
  }
  if (!figures.stages.empty()) {
    os << "  pipeline    " << figures.stages.size() << " stages, "
       << figures.schedule << " over " << t.num_micro_batches()
       << " micro-batch(es); its waits make the step "
       << llvm::format("%.2f", figures.pipelineStretch)
       << "x the busiest device's work\n";
    for (auto [i, s] : llvm::enumerate(figures.stages)) {
      os << "              stage " << i << ": layers " << s.firstLayer << "-"
         << s.lastLayer << " on rank(s) ";
      for (auto [k, r] : llvm::enumerate(s.ranks))
        os << (k ? "," : "") << r;
      os << llvm::format(", %.3g ms a step, ", s.seconds * 1e3)
         << mib(s.peakBytes) << ", " << s.microBatchesInFlight
         << " micro-batch(es) in flight\n";
    }
  }
  if (plan.is_training())
    os << "  training    loss " << t.loss() << ", optimizer " << t.optimizer()
       << llvm::format(" (lr %g, weight decay %g", t.lr(), t.weight_decay())
       << "), zero " << t.zero_stage() << ", remat " << figures.remat.mode
       << "\n";
  if (figures.remat.mode != "none" || figures.remat.regathered > 0)
    os << "  recompute   " << rematText(figures.remat)
       << llvm::format(" (%.3g ms a step)", figures.remat.seconds * 1e3)
       << "\n";
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
  os << "); device has " << llvm::format("%.1f GiB", cluster.memoryGiB);
  if (cluster.reserveGiB > 0)
    os << llvm::format(" (%.1f GiB usable)",
                       cluster.memoryGiB - cluster.reserveGiB);
  os << "\n";
  if (figures.liveBytes > 0) {
    int64_t arena = memory.total() - memory.workspace;
    os << "  arena       " << mib(arena) << ", live-set bound "
       << mib(figures.liveBytes)
       << llvm::format(" (placement +%.1f%%)",
                       100.0 * (arena - figures.liveBytes) / figures.liveBytes)
       << "\n";
  }
  if (figures.estimatedBytes > 0) {
    int64_t arena = memory.total() - memory.workspace;
    os << "  estimate    " << mib(figures.estimatedBytes)
       << " from the planned step"
       << llvm::format(" (%+.1f%% of the arena)",
                       100.0 * (figures.estimatedBytes - arena) / arena)
       << "\n";
  }
  auto ms = [](double seconds) {
    return llvm::format("%.3g ms", seconds * 1e3);
  };
  os << "  predicted   " << llvm::format("%.3g", step.stepSeconds * 1e3)
     << " ms/step (compute " << ms(step.computeBoundSeconds) << ", memory "
     << ms(step.memoryBoundSeconds) << ", communication "
     << ms(step.totalCommSeconds());
  for (auto [i, axis] : llvm::enumerate(step.commSeconds))
    os << (i ? " + " : " = ") << axis.axes << " " << ms(axis.seconds);
  if (!step.commSeconds.empty())
    os << ", exposed " << ms(step.exposedCommSeconds);
  os << "; " << cluster.predictionBasis() << ")\n";
  BucketTotals buckets = bucketTotals(figures.collectives);
  if (buckets.buckets) {
    os << "  overlap     ";
    for (auto [i, entry] : llvm::enumerate(buckets.byKind)) {
      const BucketTotals &k = entry.second;
      std::string name = entry.first; // all_reduce -> all-reduces
      std::replace(name.begin(), name.end(), '_', '-');
      os << (i ? ", " : "") << k.tensors << " " << name
         << (k.tensors == 1 ? " in " : "s in ") << k.buckets
         << (k.buckets == 1 ? " bucket (" : " buckets (")
         << mib(static_cast<int64_t>(k.bytes)) << ")";
    }
    os << "; each started when its last tensor is made"
       << (buckets.byKind.count("all_gather")
               ? " (a parameter gather: when the bucket before it is "
                 "waited for)"
               : "")
       << " and waited for where it is first read\n";
  }
  return s;
}
