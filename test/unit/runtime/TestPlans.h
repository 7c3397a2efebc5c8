//===- TestPlans.h - Build plans in C++ for runtime tests ----------*- C++ -*-===//
//
// Helpers that lay buffers out in an arena (64-byte aligned, no sharing) and
// append instructions, plus a ready-made linear-regression training plan
// used by the executor tests and the MPI smoke test.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_TESTPLANS_H
#define LOOM_TEST_UNIT_RUNTIME_TESTPLANS_H

#include "runtime/comm/Communicator.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/plan.pb.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace plan = loom::plan;

namespace loom::runtime::test {

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

inline void setData(plan::Buffer &b, const std::vector<float> &values) {
  b.set_data(std::string(reinterpret_cast<const char *>(values.data()),
                         values.size() * sizeof(float)));
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
  inst->set_loc(loc.empty() ? op + "_" +
                                  std::to_string(program.instructions_size())
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

/// An empty plan skeleton: format 1, `worldSize` ranks on a single `dp` axis.
inline plan::Plan makePlan(int worldSize, bool training) {
  plan::Plan p;
  p.set_format_version(1);
  p.set_producer("runtime tests");
  p.set_world_size(worldSize);
  plan::MeshAxis *axis = p.add_mesh();
  axis->set_name("dp");
  axis->set_size(worldSize);
  p.set_is_training(training);
  return p;
}

/// Linear regression y = x . W with mse and plain SGD, data-parallel over
/// `dp` ranks (one program per rank, as a plan may have), `batch`
/// samples per global batch, `k` features in and `n` out. The loss and the
/// gradient are all-reduced over the dp axis and scaled by 1/dp.
inline plan::Plan makeLinearRegressionPlan(int dp, int64_t batch, int64_t k,
                                           int64_t n, double lr,
                                           const std::vector<float> &w0) {
  plan::Plan p = makePlan(dp, true);
  p.mutable_training()->set_loss("mse");
  p.mutable_training()->set_optimizer("sgd");
  p.mutable_training()->set_lr(lr);
  p.mutable_training()->set_global_batch(batch);
  p.mutable_training()->set_tokens_per_sample(1);
  int64_t b = batch / dp;
  for (int r = 0; r < dp; ++r) {
    plan::Program &prog = *p.add_programs();
    prog.add_ranks(r);
    int32_t x = addBuffer(prog, "x", plan::INPUT, {b, k});
    buffer(prog, x).set_binding("x");
    buffer(prog, x).set_sample_offset(0);
    int32_t t = addBuffer(prog, "target", plan::TARGET, {b, n});
    buffer(prog, t).set_binding("target");
    buffer(prog, t).set_sample_offset(0);
    int32_t w = addBuffer(prog, "W", plan::PARAMETER, {k, n});
    buffer(prog, w).set_binding("W");
    setData(buffer(prog, w), w0);
    int32_t y = addBuffer(prog, "y", plan::TEMPORARY, {b, n});
    int32_t localLoss = addBuffer(prog, "local_loss", plan::TEMPORARY, {});
    int32_t loss = addBuffer(prog, "loss", plan::LOSS, {});
    int32_t dy = addBuffer(prog, "dy", plan::TEMPORARY, {b, n});
    int32_t dw = addBuffer(prog, "dW", plan::TEMPORARY, {k, n});
    prog.set_loss_buffer(loss);

    addInst(prog, "matmul", {x, w}, {y}, "linear");
    addInst(prog, "mse", {y, t}, {localLoss}, "loss");
    setInts(addInst(prog, "all_reduce", {localLoss}, {loss}), "axes", {0});
    setF(addInst(prog, "scale", {loss}, {loss}), "factor", 1.0 / dp);
    addInst(prog, "mse_grad", {y, t}, {dy}, "loss_grad");
    setI(addInst(prog, "matmul", {x, dy}, {dw}, "linear_grad"), "transpose_a",
         1);
    setInts(addInst(prog, "all_reduce", {dw}, {dw}), "axes", {0});
    setF(addInst(prog, "scale", {dw}, {dw}), "factor", 1.0 / dp);
    setF(addInst(prog, "sgd", {w, dw}, {w}, "sgd_W"), "lr", lr);
  }
  return p;
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

} // namespace loom::runtime::test

#endif // LOOM_TEST_UNIT_RUNTIME_TESTPLANS_H
