//===- PlanIntegrity.cpp - Program order and settings of a plan -----------===//

#include "runtime/PlanIntegrity.h"

#include "runtime/PlanFormat.h"
#include "runtime/support/HostTensor.h"

#include <algorithm>
#include <map>
#include <set>

namespace loom::runtime {

Status checkPlanSettings(const plan::Plan &plan) {
  static const char *const kAxes[] = {"pp", "dp", "tp"};
  size_t next = 0; // the first axis name still allowed
  for (const plan::MeshAxis &axis : plan.mesh()) {
    size_t k = next;
    while (k < 3 && axis.name() != kAxes[k])
      ++k;
    if (k == 3)
      return makeError("mesh axis '%s' is %s; a plan's mesh axes are pp, dp "
                       "and tp, each once, in that order",
                       axis.name().c_str(),
                       std::find_if(std::begin(kAxes), std::end(kAxes),
                                    [&](const char *a) {
                                      return axis.name() == a;
                                    }) != std::end(kAxes)
                           ? "repeated or out of order"
                           : "unknown");
    next = k + 1;
  }
  if (!plan.is_training())
    return Status::ok();
  const plan::Training &t = plan.training();
  if (!t.optimizer().empty() && t.optimizer() != "adamw" &&
      t.optimizer() != "sgd")
    return makeError("training.optimizer '%s' is not adamw or sgd",
                     t.optimizer().c_str());
  if (!t.precision().empty() && t.precision() != "fp32" &&
      t.precision() != "bf16")
    return makeError("training.precision '%s' is not fp32 or bf16",
                     t.precision().c_str());
  if (!t.loss().empty() && t.loss() != "cross_entropy" && t.loss() != "mse" &&
      t.loss().rfind("output:", 0) != 0)
    return makeError("training.loss '%s' is not cross_entropy, mse or "
                     "output:NAME",
                     t.loss().c_str());
  return Status::ok();
}

namespace {

bool definedAtStart(plan::Role role) {
  return role != plan::TEMPORARY && role != plan::LOSS && role != plan::OUTPUT;
}

/// Roles whose bytes hold a value from one step to the next: no other
/// buffer may be written over them.
bool persistent(plan::Role role) {
  return role == plan::PARAMETER || role == plan::OPTIMIZER_STATE ||
         role == plan::RUNNING_STAT || role == plan::CONSTANT;
}

/// The persistent buffers of a program by arena offset, checked not to
/// overlap one another; `overlapping` finds one whose bytes meet a range.
class PersistentBytes {
public:
  static StatusOr<PersistentBytes> of(const plan::Program &program) {
    PersistentBytes p;
    for (const plan::Buffer &b : program.buffers())
      if (persistent(b.role()) && b.size_bytes() > 0)
        p.byOffset.push_back(&b);
    std::sort(p.byOffset.begin(), p.byOffset.end(),
              [](const plan::Buffer *a, const plan::Buffer *b) {
                return a->offset() < b->offset();
              });
    for (size_t i = 1; i < p.byOffset.size(); ++i) {
      const plan::Buffer &a = *p.byOffset[i - 1], &b = *p.byOffset[i];
      if (a.offset() + a.size_bytes() > b.offset())
        return makeError("%s buffer %d '%s' and %s buffer %d '%s' share "
                         "arena bytes [%lld, %lld), but each keeps its value "
                         "across steps",
                         plan::Role_Name(a.role()).c_str(), a.id(),
                         a.name().c_str(), plan::Role_Name(b.role()).c_str(),
                         b.id(), b.name().c_str(), (long long)b.offset(),
                         (long long)std::min(a.offset() + a.size_bytes(),
                                             b.offset() + b.size_bytes()));
    }
    return p;
  }

  /// A persistent buffer other than `b` whose bytes meet `b`'s.
  const plan::Buffer *overlapping(const plan::Buffer &b) const {
    int64_t end = b.offset() + b.size_bytes();
    auto it = std::upper_bound(
        byOffset.begin(), byOffset.end(), end,
        [](int64_t v, const plan::Buffer *x) { return v <= x->offset(); });
    // Persistent buffers are disjoint: only the one before the first that
    // starts at or after `end`, and those after it, can meet [offset, end).
    while (it != byOffset.begin()) {
      const plan::Buffer *x = *--it;
      if (x->offset() + x->size_bytes() <= b.offset())
        break;
      if (x->id() != b.id())
        return x;
    }
    return nullptr;
  }

private:
  std::vector<const plan::Buffer *> byOffset;
};

/// The INPUT/TARGET buffers of each binding tile [0, share).
Status checkDataBuffers(const plan::Plan &plan, const plan::Program &program) {
  int64_t dp = meshAxisSize(plan, "dp");
  int64_t share = plan.training().global_batch() / std::max<int64_t>(dp, 1);
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> ranges;
  for (const plan::Buffer &b : program.buffers())
    if ((b.role() == plan::INPUT || b.role() == plan::TARGET) &&
        b.shape_size() > 0)
      ranges[b.binding()].push_back({b.sample_offset(), b.shape(0)});
  for (auto &[binding, list] : ranges) {
    std::sort(list.begin(), list.end());
    int64_t covered = 0;
    for (auto [offset, count] : list) {
      if (offset != covered)
        return makeError("the data buffers of '%s' %s samples [%lld, %lld) "
                         "of a data-parallel rank's share of %lld (global "
                         "batch %lld / dp = %lld)",
                         binding.c_str(), offset < covered ? "repeat" : "skip",
                         (long long)std::min(offset, covered),
                         (long long)std::max(offset, covered), (long long)share,
                         (long long)plan.training().global_batch(),
                         (long long)dp);
      covered = offset + count;
    }
    if (covered != share)
      return makeError("the data buffers of '%s' hold %lld samples, not a "
                       "data-parallel rank's share of %lld (global batch "
                       "%lld / dp = %lld)",
                       binding.c_str(), (long long)covered, (long long)share,
                       (long long)plan.training().global_batch(),
                       (long long)dp);
  }
  return Status::ok();
}

} // namespace

Status checkProgramOrder(const plan::Plan &plan, const plan::Program &program) {
  if (plan.is_training() && program.instructions_size() == 0)
    return makeError("a training program without instructions");
  std::map<int32_t, const plan::Buffer *> byId;
  for (const plan::Buffer &b : program.buffers())
    byId[b.id()] = &b;
  StatusOr<PersistentBytes> persistentBytes = PersistentBytes::of(program);
  if (!persistentBytes)
    return persistentBytes.status();
  // The union of the arena bytes written so far, as disjoint [begin, end)
  // ranges by begin. Buffers may be views of others, which no instruction
  // writes (a reshape's result is its operand's bytes, a parameter's too; a
  // gradient is a part of its bucket, which all_reduce_start reads whole):
  // a temporary is defined once bytes of it were written.
  std::map<int64_t, int64_t> written;
  auto wasWritten = [&](const plan::Buffer &b) {
    int64_t begin = b.offset(), end = b.offset() + b.size_bytes();
    auto it = written.upper_bound(begin);
    if (it != written.begin() && std::prev(it)->second > begin)
      return true;
    return it != written.end() && it->first < end;
  };
  auto write = [&](const plan::Buffer &b) {
    int64_t begin = b.offset(), end = b.offset() + b.size_bytes();
    auto it = written.upper_bound(begin);
    if (it != written.begin() && std::prev(it)->second >= begin)
      --it;
    while (it != written.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = written.erase(it);
    }
    written.emplace(begin, end);
  };
  // Parameters, data and constants hold their bytes from the start (a view
  // of one, such as a batch norm's scale reshaped, is defined too).
  for (const plan::Buffer &b : program.buffers())
    if (definedAtStart(b.role()))
      write(b);
  for (int i = 0; i < program.instructions_size(); ++i) {
    const plan::Instruction &inst = program.instructions(i);
    for (int32_t id : inst.inputs()) {
      const plan::Buffer &b = *byId.at(id);
      if (definedAtStart(b.role()) || b.size_bytes() == 0 || wasWritten(b))
        continue;
      return makeError(
          "instruction %d '%s'%s reads %s buffer %d '%s' before "
          "any instruction writes it",
          i, inst.op().c_str(),
          inst.loc().empty() ? "" : (" at '" + inst.loc() + "'").c_str(),
          plan::Role_Name(b.role()).c_str(), id, b.name().c_str());
    }
    for (int32_t id : inst.outputs()) {
      const plan::Buffer &b = *byId.at(id);
      if (b.size_bytes() > 0)
        if (const plan::Buffer *kept = persistentBytes->overlapping(b))
          return makeError(
              "instruction %d '%s'%s writes %s buffer %d '%s' (arena bytes "
              "[%lld, %lld)) over %s buffer %d '%s' ([%lld, %lld)), which "
              "keeps its value across steps; the plan's arena placement is "
              "broken: compile it again with loomc",
              i, inst.op().c_str(),
              inst.loc().empty() ? "" : (" at '" + inst.loc() + "'").c_str(),
              plan::Role_Name(b.role()).c_str(), id, b.name().c_str(),
              (long long)b.offset(), (long long)(b.offset() + b.size_bytes()),
              plan::Role_Name(kept->role()).c_str(), kept->id(),
              kept->name().c_str(), (long long)kept->offset(),
              (long long)(kept->offset() + kept->size_bytes()));
      write(b);
    }
  }
  if (plan.is_training())
    LOOM_RETURN_IF_ERROR(checkDataBuffers(plan, program));
  return Status::ok();
}

} // namespace loom::runtime
