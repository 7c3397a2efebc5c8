//===- PlanFuzzer.cpp - Fuzz target: the plan loader and validator --------===//
//
// Bytes as a plan file: parsed, then validated as loom-run validates a plan
// before it runs one. A refusal is fine; a crash, a sanitizer report, a hang
// or an allocation beyond libFuzzer's limit is a bug.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loom::plan::Plan plan;
  if (!plan.ParseFromArray(data, static_cast<int>(size)))
    return 0;
  (void)loom::runtime::validatePlan(plan, "fuzz.loomplan");
  return 0;
}
