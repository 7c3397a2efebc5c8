//===- StagePartition.cpp - Layers into pipeline stages -------------------===//

#include "passes/planner/StagePartition.h"
#include "passes/planner/NoFit.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

using namespace mlir::loom::planner;

namespace {

llvm::Error fail(const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}

/// A candidate: the slowest stage so far, and the sum of squared stage
/// times (smaller: more even) to break ties.
struct Score {
  double worst = std::numeric_limits<double>::infinity();
  double squares = std::numeric_limits<double>::infinity();
  bool better(const Score &o) const {
    constexpr double kTie = 1e-12;
    if (worst < o.worst * (1 - kTie))
      return true;
    return worst <= o.worst * (1 + kTie) && squares < o.squares;
  }
};

} // namespace

llvm::Expected<StageSplit>
mlir::loom::planner::partitionStages(const StageRequest &r) {
  int64_t layers = r.layerSeconds.size();
  int64_t stages = r.inFlight.size();
  if (stages < 1)
    return fail("a pipeline needs at least one stage");
  if (layers < stages)
    return fail("pp = " + llvm::Twine(stages) + " needs at least " +
                llvm::Twine(stages) + " layers, the model has " +
                llvm::Twine(layers));
  auto at = [](const std::vector<double> &v, int64_t i) {
    return i < static_cast<int64_t>(v.size()) ? v[i] : 0.0;
  };
  // Prefix sums over the layers.
  std::vector<double> secs(layers + 1, 0), state(layers + 1, 0),
      acts(layers + 1, 0);
  for (int64_t i = 0; i < layers; ++i) {
    secs[i + 1] = secs[i] + r.layerSeconds[i];
    state[i + 1] = state[i] + at(r.layerStateBytes, i);
    acts[i + 1] = acts[i] + at(r.layerActivationBytes, i);
  }
  // Stage s over layers [a, b).
  auto seconds = [&](int64_t s, int64_t a, int64_t b) {
    return secs[b] - secs[a] + (s == 0 ? r.firstSeconds : 0) +
           (s == stages - 1 ? r.lastSeconds : 0);
  };
  auto bytes = [&](int64_t s, int64_t a, int64_t b) {
    double held = state[b] - state[a], act = acts[b] - acts[a];
    if (s == 0) {
      held += r.firstStateBytes;
      act += r.firstActivationBytes;
    }
    if (s == stages - 1) {
      held += r.lastStateBytes;
      act += r.lastActivationBytes;
    }
    return held + static_cast<double>(r.inFlight[s]) * act;
  };

  // best[s][b]: stages 0..s over layers [0, b), stage s ending at b.
  std::vector<std::vector<Score>> best(stages,
                                       std::vector<Score>(layers + 1));
  std::vector<std::vector<int64_t>> cut(stages,
                                        std::vector<int64_t>(layers + 1, -1));
  for (int64_t s = 0; s < stages; ++s)
    for (int64_t b = s + 1; b <= layers - (stages - 1 - s); ++b)
      for (int64_t a = s; a < b; ++a) {
        Score prev;
        if (s == 0) {
          if (a != 0)
            continue;
          prev.worst = 0;
          prev.squares = 0;
        } else {
          prev = best[s - 1][a];
          if (!std::isfinite(prev.worst))
            continue;
        }
        if (r.budgetBytes > 0 && bytes(s, a, b) > r.budgetBytes)
          continue;
        double t = seconds(s, a, b);
        Score here{std::max(prev.worst, t), prev.squares + t * t};
        if (here.better(best[s][b])) {
          best[s][b] = here;
          cut[s][b] = a;
        }
      }
  if (!std::isfinite(best[stages - 1][layers].worst))
    return noFitError("no split of the " + llvm::Twine(layers) + " layers into " +
                llvm::Twine(stages) + " stages fits " +
                llvm::Twine(static_cast<int64_t>(r.budgetBytes)) +
                " bytes a device");
  StageSplit split;
  split.layers.resize(stages);
  split.seconds.resize(stages);
  split.bytes.resize(stages);
  for (int64_t s = stages - 1, b = layers; s >= 0; --s) {
    int64_t a = cut[s][b];
    split.layers[s] = {a, b - 1};
    split.seconds[s] = seconds(s, a, b);
    split.bytes[s] = bytes(s, a, b);
    b = a;
  }
  return split;
}

std::vector<int64_t>
mlir::loom::planner::splitLayersByTime(llvm::ArrayRef<double> seconds,
                                       int64_t stages) {
  int64_t layers = int64_t(seconds.size());
  assert(stages >= 1 && stages <= layers && "a stage needs a layer");
  // Stages a greedy pass needs when no stage may exceed `bound`.
  auto stagesWithin = [&](double bound) {
    int64_t count = 1;
    double sum = 0;
    for (double s : seconds) {
      if (sum + s > bound && sum > 0)
        ++count, sum = 0;
      sum += s;
    }
    return count;
  };
  // The bound lies between the slowest layer (or an even share) and all
  // of them; once it is within 1e-12 of the least that `stages` cover, that
  // is the split's slowest stage to the same precision.
  double total = 0, slowest = 0;
  for (double s : seconds)
    total += s, slowest = std::max(slowest, s);
  double lo = std::max(slowest, total / double(stages)), hi = total;
  if (stagesWithin(lo) <= stages)
    hi = lo;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    double mid = lo + (hi - lo) / 2;
    (stagesWithin(mid) <= stages ? hi : lo) = mid;
  }
  // The greedy pass at that bound, cutting early where the layers left are
  // as many as the stages left: exactly `stages`, none slower than the
  // bound (each cut only shortens a stage).
  std::vector<int64_t> counts(stages, 0);
  int64_t stage = 0;
  double sum = 0;
  for (int64_t j = 0; j < layers; ++j) {
    bool full = counts[stage] > 0 && sum + seconds[j] > hi;
    bool needed = layers - j == stages - stage - 1;
    if (counts[stage] > 0 && (full || needed))
      ++stage, sum = 0;
    ++counts[stage];
    sum += seconds[j];
  }
  return counts;
}
