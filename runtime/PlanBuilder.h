//===- PlanBuilder.h - Build plans in C++ -----------------------*- C++ -*-===//
//
// Helpers that lay buffers out in a program's arena (64-byte aligned, no
// sharing) and append instructions: what `loom-run --profile` runs its
// kernels through (driver/KernelProfile.cpp) and what the runtime tests
// build their plans with (test/unit/runtime/TestPlans.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLANBUILDER_H
#define LOOM_RUNTIME_PLANBUILDER_H

#include "runtime/comm/Communicator.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

/// Appends a buffer at the end of `program`'s arena; returns its id.
inline int32_t addBuffer(plan::Program &program, const std::string &name,
                         plan::Role role, const std::vector<int64_t> &shape,
                         plan::DType dtype = plan::F32) {
  plan::Buffer *b = program.add_buffers();
  b->set_id(program.buffers_size() - 1);
  b->set_name(name);
  b->set_role(role);
  b->set_dtype(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    b->add_shape(d);
    n *= d;
  }
  int64_t bytes = n * (dtype == plan::I64 ? 8 : dtype == plan::BF16 ? 2 : 4);
  b->set_offset(program.arena_bytes());
  b->set_size_bytes(bytes);
  program.set_arena_bytes((program.arena_bytes() + bytes + 63) / 64 * 64);
  return b->id();
}

inline plan::Buffer &buffer(plan::Program &program, int32_t id) {
  return *program.mutable_buffers(id);
}

inline plan::Instruction &addInst(plan::Program &program, const std::string &op,
                                  const std::vector<int32_t> &inputs,
                                  const std::vector<int32_t> &outputs,
                                  const std::string &loc = "") {
  plan::Instruction *inst = program.add_instructions();
  inst->set_op(op);
  for (int32_t id : inputs)
    inst->add_inputs(id);
  for (int32_t id : outputs)
    inst->add_outputs(id);
  inst->set_loc(loc.empty()
                    ? op + "_" + std::to_string(program.instructions_size())
                    : loc);
  return *inst;
}

inline void setF(plan::Instruction &inst, const std::string &name, double v) {
  (*inst.mutable_attrs())[name].set_f(v);
}
inline void setI(plan::Instruction &inst, const std::string &name, int64_t v) {
  (*inst.mutable_attrs())[name].set_i(v);
}
inline void setS(plan::Instruction &inst, const std::string &name,
                 const std::string &v) {
  (*inst.mutable_attrs())[name].set_s(v);
}
inline void setInts(plan::Instruction &inst, const std::string &name,
                    const std::vector<int64_t> &v) {
  auto *ints = (*inst.mutable_attrs())[name].mutable_ints();
  for (int64_t x : v)
    ints->add_values(x);
}

/// A host arena and one communicator for every set of mesh axes: binds a
/// kernel directly, without an executor.
class HostContext final : public BindContext {
public:
  HostContext(std::vector<uint8_t> &arena, Communicator &group)
      : memory(arena), group(group) {}
  uint8_t *arena() override { return memory.data(); }
  Communicator *commForAxes(const std::vector<int64_t> &) override {
    return &group;
  }

private:
  std::vector<uint8_t> &memory;
  Communicator &group;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLANBUILDER_H
