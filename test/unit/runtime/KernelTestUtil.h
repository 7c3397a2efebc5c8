//===- KernelTestUtil.h - Run one instruction on a 1-rank plan -----*- C++ -*-===//

#ifndef LOOM_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
#define LOOM_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H

#include "TestPlans.h"
#include "runtime/Executor.h"

#include <functional>
#include <random>

namespace loom::runtime::test {

inline std::vector<float> randomFloats(int64_t n, std::mt19937 &rng,
                                       float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Runs `op` once (or `steps` times) on inputs held in CONSTANT buffers, with
/// fresh TEMPORARY outputs of `outShapes`; returns the outputs.
/// `inPlace[i] = j` makes output i the same buffer as input j (then the input
/// is a PARAMETER or OPTIMIZER_STATE buffer so it may be written).
inline StatusOr<std::vector<HostTensor>>
runOp(const std::string &op, const std::vector<HostTensor> &inputs,
      const std::vector<std::vector<int64_t>> &outShapes,
      const std::function<void(plan::Instruction &)> &attrs = {},
      const std::vector<int> &inPlace = {}, int steps = 1) {
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  prog.add_ranks(0);
  prog.set_loss_buffer(-1);
  std::vector<int32_t> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool written = false;
    for (int j : inPlace)
      written |= j == static_cast<int>(i);
    plan::DType dt = inputs[i].type == ElemType::I64 ? plan::I64 : plan::F32;
    int32_t id = addBuffer(prog, "in" + std::to_string(i),
                           written ? plan::PARAMETER : plan::CONSTANT,
                           inputs[i].shape, dt);
    buffer(prog, id).set_data(std::string(inputs[i].bytes.begin(),
                                          inputs[i].bytes.end()));
    ins.push_back(id);
  }
  for (size_t i = 0; i < outShapes.size(); ++i) {
    if (i < inPlace.size() && inPlace[i] >= 0) {
      outs.push_back(ins[inPlace[i]]);
      continue;
    }
    outs.push_back(
        addBuffer(prog, "out" + std::to_string(i), plan::TEMPORARY,
                  outShapes[i]));
  }
  plan::Instruction &inst = addInst(prog, op, ins, outs, "test_op");
  if (attrs)
    attrs(inst);
  LOOM_RETURN_IF_ERROR(validatePlan(p, "test"));
  LocalCommunicator world;
  LOOM_ASSIGN_OR_RETURN(auto exec, Executor::create(p, world, "test"));
  for (int s = 0; s < steps; ++s)
    LOOM_RETURN_IF_ERROR(exec->runStep(s));
  std::vector<HostTensor> results;
  for (int32_t id : outs)
    results.push_back(exec->readBuffer(*exec->findBuffer(id)));
  return results;
}

} // namespace loom::runtime::test

#endif // LOOM_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
