//===- JointSearch.cpp - Every plan choice at once ---------------*- C++ -*-===//

#include "passes/planner/JointSearch.h"
#include "passes/planner/NoFit.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

using namespace mlir::loom;
using namespace mlir::loom::planner;

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d)
        large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

std::string gib(double bytes) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.1f GiB", bytes / (1 << 30));
  return s;
}

std::string percent(double fraction) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.1f%%", 100 * fraction);
  return s;
}

/// The meshes of `devices` devices, tp innermost: tp ascending, then pp.
void forEachMesh(const SearchRequest &r, int64_t devices,
                 llvm::function_ref<void(int64_t, int64_t, int64_t)> fn) {
  for (int64_t tp : divisors(devices))
    for (int64_t pp : divisors(devices / tp)) {
      int64_t dp = devices / (tp * pp);
      if ((r.pins.tp && *r.pins.tp != tp) || (r.pins.pp && *r.pins.pp != pp) ||
          (r.pins.dp && *r.pins.dp != dp))
        continue;
      fn(dp, tp, pp);
    }
}

/// The choices on one mesh, except the micro-batch size: each ZeRO stage,
/// recomputation, schedule and its chunks.
std::vector<PlanChoice> shapesOnMesh(const SearchRequest &r, int64_t dp,
                                     int64_t tp, int64_t pp) {
  std::vector<PlanChoice> out;
  std::vector<std::pair<ScheduleKind, int64_t>> schedules;
  if (pp == 1) {
    schedules.push_back({ScheduleKind::OneFOneB, 1});
  } else {
    for (ScheduleKind k : {ScheduleKind::OneFOneB, ScheduleKind::GPipe,
                           ScheduleKind::ZeroBubbleH1})
      schedules.push_back({k, 1});
    if (r.model.numLayers() % pp == 0)
      for (int64_t v : divisors(r.model.numLayers() / pp))
        if (v >= 2 && v <= 16)
          schedules.push_back({ScheduleKind::Interleaved, v});
  }
  for (int64_t zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero)
    for (Remat remat : {Remat::None, Remat::Selective, Remat::Full})
      for (auto [kind, chunks] : schedules) {
        PlanChoice c;
        c.dp = dp, c.tp = tp, c.pp = pp;
        c.zero = zero, c.remat = remat, c.schedule = kind, c.chunks = chunks;
        out.push_back(c);
      }
  return out;
}

/// `shape` at each micro-batch size that divides a rank's share, smallest
/// first, valid and pinned.
void forEachSize(const SearchRequest &r, int64_t devices, PlanChoice shape,
                 llvm::function_ref<bool(const PlanChoice &)> fn) {
  if (r.setup.globalBatch % shape.dp != 0)
    return;
  int64_t share = r.setup.globalBatch / shape.dp;
  for (int64_t b : divisors(share)) {
    shape.microBatchSize = b;
    shape.microBatches = share / b;
    if (!isValidChoice(r.model, devices, r.setup, shape) ||
        !r.pins.admits(shape))
      continue;
    if (!fn(shape))
      return;
  }
}

/// Strict weak order of plans: faster, then smaller, then the earlier.
bool better(const RankedPlan &a, const RankedPlan &b) {
  if (a.prediction.stepSeconds != b.prediction.stepSeconds)
    return a.prediction.stepSeconds < b.prediction.stepSeconds;
  return a.prediction.memory.total() < b.prediction.memory.total();
}

} // namespace

std::vector<PlanChoice> planner::enumerateChoices(const SearchRequest &r) {
  std::vector<PlanChoice> out;
  int64_t devices = r.cluster.numDevices();
  forEachMesh(r, devices, [&](int64_t dp, int64_t tp, int64_t pp) {
    for (const PlanChoice &shape : shapesOnMesh(r, dp, tp, pp))
      forEachSize(r, devices, shape, [&](const PlanChoice &c) {
        out.push_back(c);
        return true;
      });
  });
  return out;
}

namespace {

/// The least memory any valid choice needs on `devices` devices of
/// `cluster` (each mesh at its smallest micro-batch), and that choice.
std::optional<RankedPlan> leanest(const SearchRequest &r,
                                  const Cluster &cluster) {
  std::optional<RankedPlan> best;
  int64_t devices = cluster.numDevices();
  forEachMesh(r, devices, [&](int64_t dp, int64_t tp, int64_t pp) {
    for (const PlanChoice &shape : shapesOnMesh(r, dp, tp, pp))
      forEachSize(r, devices, shape, [&](const PlanChoice &c) {
        RankedPlan p{c, predictCandidate(r.model, cluster, r.setup, c)};
        if (!best || p.prediction.memory.total() <
                         best->prediction.memory.total())
          best = p;
        return false; // larger micro-batches never need less
      });
  });
  return best;
}

std::string largestPart(const DeviceMemory &m) {
  std::pair<int64_t, const char *> parts[] = {
      {m.parameters, "parameters"},
      {m.gradients, "gradients"},
      {m.optimizerState, "optimizer state"},
      {m.activations, "activations"}};
  auto *it = std::max_element(std::begin(parts), std::end(parts),
                              [](auto &a, auto &b) { return a.first < b.first; });
  return std::string(it->second) + ", " + gib(double(it->first));
}

/// The cluster of `nodes` nodes of `c`'s devices, and its name.
std::pair<Cluster, std::string> resized(const Cluster &c, int64_t nodes) {
  Cluster out = c;
  llvm::StringRef preset = llvm::StringRef(c.spec).split(':').first;
  bool isPreset = !llvm::StringRef(c.spec).ends_with(".json");
  if (isPreset && preset == "cpu") {
    out.devicesPerNode = nodes; // cpu:N is one node of N ranks
    return {out, "cpu:" + std::to_string(nodes)};
  }
  out.nodes = nodes;
  std::string name =
      isPreset ? preset.str() + ":" + std::to_string(nodes) + "x" +
                     std::to_string(c.devicesPerNode)
               : std::to_string(nodes) + " nodes of " +
                     std::to_string(c.devicesPerNode) + " like " + c.spec;
  return {out, name};
}

/// The refusal when no plan fits.
llvm::Error noFit(const SearchRequest &r) {
  std::string line = "no plan of '" + r.model.name + "' fits '" +
                     r.cluster.spec + "'";
  if (std::optional<RankedPlan> lean = leanest(r, r.cluster))
    line += ": the least memory a plan needs is " +
            gib(double(lean->prediction.memory.total())) + " per device (" +
            lean->choice.text() + "; the most of it " +
            largestPart(lean->prediction.memory) + ") but " +
            r.cluster.deviceName + " has " +
            gib(r.cluster.usableMemoryBytes()) + " usable";
  bool isCpu = llvm::StringRef(r.cluster.spec).starts_with("cpu:");
  int64_t now = isCpu ? r.cluster.devicesPerNode : r.cluster.nodes;
  // The smallest cluster of these devices with a plan that fits (same
  // global batch and pins), within 64 times the nodes.
  for (int64_t n = now + 1; n <= now * 64 && n <= 100000; ++n) {
    auto [bigger, name] = resized(r.cluster, n);
    std::optional<RankedPlan> lean = leanest(r, bigger);
    if (lean && double(lean->prediction.memory.total()) <=
                    bigger.usableMemoryBytes()) {
      line += "; the smallest such cluster that fits is " + name +
              " (give --cluster " + name + ")";
      return noFitError(line);
    }
  }
  line += "; no cluster of up to 64 times the nodes fits at this global "
          "batch: use a smaller model or batch";
  return noFitError(line);
}

/// Whether `b` is `a` with another `dimension`: another mesh (whatever its
/// other choices, which a mesh changes the sense of), or only another
/// value of one of the rest.
bool onlyDiffersIn(const PlanChoice &a, const PlanChoice &b,
                   llvm::StringRef dimension) {
  bool mesh = a.dp == b.dp && a.tp == b.tp && a.pp == b.pp;
  bool size = a.microBatchSize == b.microBatchSize;
  bool schedule = a.schedule == b.schedule && a.chunks == b.chunks;
  bool zero = a.zero == b.zero, remat = a.remat == b.remat;
  if (dimension == "mesh")
    return !mesh;
  if (dimension == "micro-batch")
    return mesh && !size && schedule && zero && remat;
  if (dimension == "schedule")
    return mesh && size && !schedule && zero && remat;
  if (dimension == "zero")
    return mesh && size && schedule && !zero && remat;
  return mesh && size && schedule && zero && !remat;
}

/// For each dimension, why the winner's value beat the others: a faster
/// neighbour that does not fit, or the best neighbour and how much slower
/// (for the mesh: the best plan of another mesh).
std::vector<ChoiceReason> reasonsFor(const RankedPlan &best,
                                     const std::vector<RankedPlan> &all,
                                     const Cluster &cluster) {
  std::vector<ChoiceReason> out;
  const PlanChoice &w = best.choice;
  double usable = cluster.usableMemoryBytes();
  for (llvm::StringRef dim :
       {"mesh", "micro-batch", "schedule", "zero", "remat"}) {
    const RankedPlan *faster = nullptr, *runnerUp = nullptr;
    for (const RankedPlan &p : all) {
      if (!onlyDiffersIn(w, p.choice, dim))
        continue;
      if (!p.prediction.fits) {
        if (p.prediction.stepSeconds < best.prediction.stepSeconds &&
            (!faster || better(p, *faster)))
          faster = &p;
      } else if (!runnerUp || better(p, *runnerUp)) {
        runnerUp = &p;
      }
    }
    auto value = [&](const PlanChoice &c) -> std::string {
      if (dim == "mesh")
        return "dp=" + std::to_string(c.dp) + " tp=" + std::to_string(c.tp) +
               " pp=" + std::to_string(c.pp);
      if (dim == "micro-batch")
        return std::to_string(c.microBatchSize) + " sample(s) x " +
               std::to_string(c.microBatches);
      if (dim == "schedule")
        return c.pp == 1 ? std::string("none")
                         : stringifySchedule(c.schedule).str() +
                               (c.chunks > 1 ? "/" + std::to_string(c.chunks)
                                             : "");
      if (dim == "zero")
        return std::to_string(c.zero);
      return stringifyRemat(c.remat).str();
    };
    std::string text = value(w);
    double t = best.prediction.stepSeconds;
    if (faster)
      text += ": " + value(faster->choice) + " would take " +
              percent(1 - faster->prediction.stepSeconds / t) +
              " less time but needs " +
              gib(double(faster->prediction.memory.total())) + " of " +
              gib(usable);
    else if (runnerUp)
      text += ": the next best, " + value(runnerUp->choice) + ", is " +
              percent(runnerUp->prediction.stepSeconds / t - 1) + " slower";
    else
      text += ": the only choice";
    out.push_back({dim.str(), text});
  }
  return out;
}

} // namespace

llvm::Expected<SearchResult> planner::searchPlan(const SearchRequest &r) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  SearchResult result;
  std::vector<RankedPlan> all;
  std::optional<RankedPlan> best, fastest;
  int64_t devices = r.cluster.numDevices();
  bool anyValid = false;
  forEachMesh(r, devices, [&](int64_t dp, int64_t tp, int64_t pp) {
    if (!result.complete)
      return;
    bool meshFits = false;
    for (const PlanChoice &shape : shapesOnMesh(r, dp, tp, pp)) {
      forEachSize(r, devices, shape, [&](const PlanChoice &c) {
        anyValid = true;
        RankedPlan p{c, predictCandidate(r.model, r.cluster, r.setup, c)};
        ++result.candidates;
        all.push_back(p);
        if (!fastest || better(p, *fastest))
          fastest = p;
        if (!p.prediction.fits)
          return false; // larger micro-batches hold more
        meshFits = true;
        ++result.feasible;
        if (!best || better(p, *best))
          best = p;
        return true;
      });
      if (elapsed() > r.timeBudgetSeconds) {
        result.complete = false;
        break;
      }
    }
    if (!meshFits)
      ++result.prunedMeshes;
  });
  if (!anyValid)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "no plan of '" + r.model.name + "' on '" + r.cluster.spec +
            "' is valid with global batch " +
            std::to_string(r.setup.globalBatch) +
            (r.pins.dp || r.pins.tp || r.pins.pp || r.pins.micro ||
                     r.pins.zero || r.pins.schedule || r.pins.chunks
                 ? " and these --force choices"
                 : "") +
            ": dp must divide the batch, tp " +
            (r.model.family == "gpt" || r.model.family == "llama"
                 ? "the heads, kv heads and MLP width"
                 : "every dimension it splits") +
            ", pp the layers");
  if (!best)
    return noFit(r);
  result.best = *best;

  // The best plan of each mesh, fastest first.
  std::map<std::tuple<int64_t, int64_t, int64_t>, RankedPlan> perMesh;
  for (const RankedPlan &p : all) {
    if (!p.prediction.fits)
      continue;
    auto key = std::make_tuple(p.choice.dp, p.choice.tp, p.choice.pp);
    auto it = perMesh.find(key);
    if (it == perMesh.end() || better(p, it->second))
      perMesh.insert_or_assign(key, p);
  }
  for (auto &[key, p] : perMesh)
    result.alternatives.push_back(p);
  std::stable_sort(result.alternatives.begin(), result.alternatives.end(),
                   better);
  if (int64_t(result.alternatives.size()) > r.alternatives)
    result.alternatives.resize(r.alternatives);

  if (fastest && !fastest->prediction.fits)
    result.binding =
        "memory: the fastest plan (" + fastest->choice.text() + ", " +
        percent(1 - fastest->prediction.stepSeconds /
                        best->prediction.stepSeconds) +
        " less time) needs " +
        gib(double(fastest->prediction.memory.total())) + " per device, " +
        gib(r.cluster.usableMemoryBytes()) + " usable";
  else if (r.pins.dp || r.pins.tp || r.pins.pp || r.pins.micro ||
           r.pins.zero || r.pins.schedule || r.pins.chunks || r.pins.remat)
    result.binding = "the --force choices";
  else
    result.binding = "none: the fastest plan fits";
  result.reasons = reasonsFor(*best, all, r.cluster);
  result.seconds = elapsed();
  return result;
}
