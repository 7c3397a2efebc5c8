//===- PipelineSchedule.cpp - The order of micro-batches on each stage ---===//

#include "passes/planner/PipelineSchedule.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>

using namespace mlir::loom::planner;

namespace {

llvm::Error fail(const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}

using Order = std::vector<PipelineTask>;

PipelineTask f(int64_t micro, int64_t chunk = 0) {
  return {PipelineTask::Forward, micro, chunk};
}
PipelineTask b(int64_t micro, int64_t chunk = 0) {
  return {PipelineTask::Backward, micro, chunk};
}
PipelineTask w(int64_t micro) { return {PipelineTask::WeightGrad, micro, 0}; }

/// All forwards, then all backwards.
Order gpipe(int64_t m) {
  Order o;
  for (int64_t i = 0; i < m; ++i)
    o.push_back(f(i));
  for (int64_t i = 0; i < m; ++i)
    o.push_back(b(i));
  return o;
}

/// PipeDream-flush: p - d - 1 warm-up forwards, then one forward and one
/// backward in turn, then the backwards left.
Order oneFOneB(int64_t p, int64_t d, int64_t m) {
  int64_t warm = std::min(p - d - 1, m);
  Order o;
  for (int64_t i = 0; i < warm; ++i)
    o.push_back(f(i));
  for (int64_t k = 0; k < m - warm; ++k) {
    o.push_back(f(warm + k));
    o.push_back(b(k));
  }
  for (int64_t k = m - warm; k < m; ++k)
    o.push_back(b(k));
  return o;
}

/// ZB-H1: 1F1B's forwards and backwards (the backward without the weight
/// gradients), and device d holds back its first d weight gradients, which
/// then fill the waits of the cool-down and the end. Every device then holds
/// at most p micro-batches' activations, 1F1B's peak.
Order zeroBubbleH1(int64_t p, int64_t d, int64_t m) {
  int64_t warm = std::min(p - d - 1, m);
  Order o;
  int64_t nextW = 0;
  for (int64_t i = 0; i < warm; ++i)
    o.push_back(f(i));
  for (int64_t k = 0; k < m - warm; ++k) {
    o.push_back(f(warm + k));
    o.push_back(b(k));
    if (k >= d)
      o.push_back(w(nextW++));
  }
  for (int64_t k = m - warm; k < m; ++k) {
    o.push_back(b(k));
    o.push_back(w(nextW++));
  }
  while (nextW < m)
    o.push_back(w(nextW++));
  return o;
}

/// Megatron-LM's interleaved 1F1B: forward step k is micro-batch
/// (k / (p v)) p + k % p on chunk (k / p) % v; backward steps go through
/// the chunks in reverse; (p - d - 1) 2 + (v - 1) p warm-up forwards.
Order interleaved(int64_t p, int64_t d, int64_t m, int64_t v) {
  int64_t total = m * v;
  auto micro = [&](int64_t k) { return (k / (p * v)) * p + k % p; };
  auto chunk = [&](int64_t k, bool backward) {
    int64_t c = (k / p) % v;
    return backward ? v - 1 - c : c;
  };
  int64_t warm = std::min((p - d - 1) * 2 + (v - 1) * p, total);
  Order o;
  for (int64_t k = 0; k < warm; ++k)
    o.push_back(f(micro(k), chunk(k, false)));
  for (int64_t k = 0; k < total - warm; ++k) {
    o.push_back(f(micro(warm + k), chunk(warm + k, false)));
    o.push_back(b(micro(k), chunk(k, true)));
  }
  for (int64_t k = total - warm; k < total; ++k)
    o.push_back(b(micro(k), chunk(k, true)));
  return o;
}

} // namespace

llvm::StringRef mlir::loom::planner::stringifySchedule(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "";
}

std::optional<ScheduleKind>
mlir::loom::planner::parseSchedule(llvm::StringRef s) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                         ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1})
    if (s == stringifySchedule(k))
      return k;
  return std::nullopt;
}

std::string PipelineSchedule::text(int64_t device) const {
  std::string s;
  for (const PipelineTask &t : order[device]) {
    if (!s.empty())
      s += ' ';
    s += t.kind == PipelineTask::Forward    ? 'F'
         : t.kind == PipelineTask::Backward ? 'B'
                                            : 'W';
    s += std::to_string(t.microBatch);
    if (chunks > 1)
      s += '.' + std::to_string(t.chunk);
  }
  return s;
}

int64_t PipelineSchedule::inFlight(int64_t device) const {
  // A micro-batch's activations are freed by its last backward part.
  PipelineTask::Kind last = kind == ScheduleKind::ZeroBubbleH1
                                ? PipelineTask::WeightGrad
                                : PipelineTask::Backward;
  int64_t now = 0, peak = 0;
  for (const PipelineTask &t : order[device]) {
    if (t.kind == PipelineTask::Forward)
      peak = std::max(peak, ++now);
    else if (t.kind == last)
      --now;
  }
  return peak;
}

int64_t PipelineSchedule::microBatchesInFlight(int64_t device) const {
  PipelineTask::Kind last = kind == ScheduleKind::ZeroBubbleH1
                                ? PipelineTask::WeightGrad
                                : PipelineTask::Backward;
  const std::vector<PipelineTask> &o = order[device];
  // Each micro-batch's first task and its last backward part.
  std::vector<size_t> open(microBatches, o.size()), close(microBatches, 0);
  for (size_t i = 0; i < o.size(); ++i) {
    int64_t j = o[i].microBatch;
    open[j] = std::min(open[j], i);
    if (o[i].kind == last)
      close[j] = i;
  }
  int64_t peak = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    int64_t now = 0;
    for (int64_t j = 0; j < microBatches; ++j)
      now += open[j] <= i && i < close[j];
    peak = std::max(peak, now);
  }
  return peak;
}

llvm::Expected<std::vector<std::vector<int64_t>>>
PipelineSchedule::startTimes() const {
  int64_t stages = devices * chunks;
  // When each part (kind, stage, micro-batch) ends; -1: not yet run.
  auto key = [&](PipelineTask::Kind k, int64_t stage, int64_t micro) {
    return (static_cast<int64_t>(k) * stages + stage) * microBatches + micro;
  };
  std::vector<int64_t> end(3 * stages * microBatches, -1);
  std::vector<std::vector<int64_t>> start(devices);
  std::vector<int64_t> free(devices, 0); // when each device is next idle
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t d = 0; d < devices; ++d) {
      size_t next = start[d].size();
      if (next == order[d].size())
        continue;
      const PipelineTask &t = order[d][next];
      int64_t stage = t.chunk * devices + d, micro = t.microBatch;
      llvm::SmallVector<int64_t, 2> needs;
      if (t.kind == PipelineTask::Forward) {
        if (stage > 0)
          needs.push_back(key(PipelineTask::Forward, stage - 1, micro));
      } else if (t.kind == PipelineTask::Backward) {
        needs.push_back(key(PipelineTask::Forward, stage, micro));
        if (stage < stages - 1)
          needs.push_back(key(PipelineTask::Backward, stage + 1, micro));
      } else {
        needs.push_back(key(PipelineTask::Backward, stage, micro));
      }
      int64_t at = free[d];
      bool ready = true;
      for (int64_t n : needs) {
        ready &= end[n] >= 0;
        at = std::max(at, end[n]);
      }
      if (!ready)
        continue;
      start[d].push_back(at);
      free[d] = end[key(t.kind, stage, micro)] = at + 1;
      progress = true;
    }
  }
  for (int64_t d = 0; d < devices; ++d)
    if (start[d].size() != order[d].size())
      return fail("device " + llvm::Twine(d) +
                  " waits for ever before task " +
                  llvm::Twine(start[d].size()) + " of its order '" + text(d) +
                  "'");
  return start;
}

llvm::Expected<double> PipelineSchedule::stretch() const {
  llvm::Expected<std::vector<std::vector<int64_t>>> times = startTimes();
  if (!times)
    return times.takeError();
  int64_t end = 0;
  size_t busiest = 0;
  for (int64_t d = 0; d < devices; ++d) {
    busiest = std::max(busiest, order[d].size());
    if (!(*times)[d].empty())
      end = std::max(end, (*times)[d].back() + 1);
  }
  return busiest ? static_cast<double>(end) / busiest : 1.0;
}

llvm::Expected<PipelineSchedule>
mlir::loom::planner::buildSchedule(ScheduleKind kind, int64_t devices,
                                   int64_t microBatches, int64_t chunks) {
  if (devices < 1 || microBatches < 1 || chunks < 1)
    return fail("a pipeline needs at least one device, micro-batch and "
                "chunk");
  if (kind == ScheduleKind::Interleaved) {
    if (chunks < 2)
      return fail("the interleaved schedule needs at least 2 model chunks a "
                  "device, got " +
                  llvm::Twine(chunks));
    if (microBatches % devices != 0)
      return fail("the interleaved schedule needs a number of micro-batches "
                  "that is a multiple of the " +
                  llvm::Twine(devices) + " pipeline devices, got " +
                  llvm::Twine(microBatches));
  } else if (chunks != 1) {
    return fail("only the interleaved schedule has several model chunks a "
                "device");
  }
  PipelineSchedule s;
  s.kind = kind;
  s.devices = devices;
  s.microBatches = microBatches;
  s.chunks = chunks;
  for (int64_t d = 0; d < devices; ++d) {
    switch (kind) {
    case ScheduleKind::GPipe:
      s.order.push_back(gpipe(microBatches));
      break;
    case ScheduleKind::OneFOneB:
      s.order.push_back(oneFOneB(devices, d, microBatches));
      break;
    case ScheduleKind::ZeroBubbleH1:
      s.order.push_back(zeroBubbleH1(devices, d, microBatches));
      break;
    case ScheduleKind::Interleaved:
      s.order.push_back(interleaved(devices, d, microBatches, chunks));
      break;
    }
  }
  return s;
}

int64_t mlir::loom::planner::defaultMicroBatches(ScheduleKind kind,
                                                 int64_t devices,
                                                 int64_t share, int64_t chunks,
                                                 double maxStretch) {
  int64_t best = 1;
  double bestStretch = 0;
  for (int64_t m = 1; m <= share; ++m) {
    if (share % m != 0)
      continue;
    llvm::Expected<PipelineSchedule> s =
        buildSchedule(kind, devices, m, chunks);
    if (!s) {
      llvm::consumeError(s.takeError());
      continue;
    }
    llvm::Expected<double> stretch = s->stretch();
    if (!stretch) {
      llvm::consumeError(stretch.takeError());
      continue;
    }
    if (*stretch <= maxStretch)
      return m;
    if (bestStretch == 0 || *stretch < bestStretch) {
      best = m;
      bestStretch = *stretch;
    }
  }
  return best;
}
