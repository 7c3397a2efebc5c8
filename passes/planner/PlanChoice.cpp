//===- PlanChoice.cpp - One set of plan choices, and pinned ones -*- C++ -*-===//

#include "passes/planner/PlanChoice.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

using namespace mlir::loom::planner;
using llvm::StringRef;

StringRef mlir::loom::planner::stringifyRemat(Remat remat) {
  switch (remat) {
  case Remat::None:
    return "none";
  case Remat::Selective:
    return "selective";
  case Remat::Full:
    return "full";
  }
  return "none";
}

std::string PlanChoice::text() const {
  std::string s = "dp=" + std::to_string(dp) + " tp=" + std::to_string(tp) +
                  " pp=" + std::to_string(pp) + " micro-batch=" +
                  std::to_string(microBatchSize) + "x" +
                  std::to_string(microBatches);
  if (pp > 1) {
    s += " " + stringifySchedule(schedule).str();
    if (chunks > 1)
      s += "/" + std::to_string(chunks);
  }
  s += " zero=" + std::to_string(zero) +
       " remat=" + stringifyRemat(remat).str();
  return s;
}

bool ChoicePins::admits(const PlanChoice &c) const {
  if ((dp && *dp != c.dp) || (tp && *tp != c.tp) || (pp && *pp != c.pp) ||
      (micro && *micro != c.microBatches) || (zero && *zero != c.zero) ||
      (microBatchSize && *microBatchSize != c.microBatchSize))
    return false;
  if (schedule && c.pp > 1 && *schedule != c.schedule)
    return false;
  if (chunks && *chunks != c.chunks)
    return false;
  if (remat && *remat != "auto" && *remat != stringifyRemat(c.remat))
    return false;
  return true;
}

llvm::Expected<ChoicePins> mlir::loom::planner::parseChoicePins(StringRef text) {
  ChoicePins pins;
  llvm::SmallVector<StringRef> items;
  text.split(items, ',', -1, false);
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    auto bad = [&](const llvm::Twine &why) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "bad --force item '" + item + "': " + why);
    };
    if (key == "remat") {
      if (value != "none" && value != "selective" && value != "full" &&
          value != "auto")
        return bad("expected none, selective, full or auto");
      pins.remat = value.str();
      continue;
    }
    if (key == "schedule") {
      pins.schedule = parseSchedule(value);
      if (!pins.schedule)
        return bad("expected gpipe, 1f1b, interleaved or zb-h1");
      continue;
    }
    std::optional<int64_t> *field = key == "dp"        ? &pins.dp
                                    : key == "tp"      ? &pins.tp
                                    : key == "pp"      ? &pins.pp
                                    : key == "micro"   ? &pins.micro
                                    : key == "zero"    ? &pins.zero
                                    : key == "virtual" ? &pins.chunks
                                                       : nullptr;
    if (!field)
      return bad("unknown key; expected dp, tp, pp, micro, zero, remat, "
                 "schedule, virtual");
    int64_t v;
    if (value.getAsInteger(10, v) || v < 0)
      return bad("expected a non-negative integer");
    if (key == "zero" && v > 3)
      return bad("ZeRO stages are 0 to 3");
    if (key != "zero" && v < 1)
      return bad("must be at least 1");
    *field = v;
  }
  return pins;
}
