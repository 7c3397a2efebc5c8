//===- CudaTestUtil.h - Run plans on the CPU and on a GPU ---------*- C++
//-*-===//

#ifndef LOOM_TEST_UNIT_CUDA_CUDATESTUTIL_H
#define LOOM_TEST_UNIT_CUDA_CUDATESTUTIL_H

#include "TestPlans.h"
#include "runtime/Executor.h"
#include "runtime/Session.h"
#include "runtime/cuda/CudaBackend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

namespace loom::runtime::test {

/// One CUDA device for the whole test binary, or null when there is none.
/// Never destroyed: tearing down cuBLASLt and streams from a static
/// destructor can run after the CUDA runtime has shut down.
inline Device *testDevice() {
  static Device *device = []() -> Device * {
    if (cuda::deviceCount() == 0)
      return nullptr;
    auto d = cuda::createCudaDevice();
    if (!d.isOk()) {
      ADD_FAILURE() << d.status().message();
      return nullptr;
    }
    return std::move(d).value().release();
  }();
  return device;
}

/// Skips the test when no CUDA device is visible (CI has none).
#define LOOM_REQUIRE_CUDA()                                                    \
  do {                                                                         \
    if (!::loom::runtime::test::testDevice())                                  \
      GTEST_SKIP() << "no CUDA device";                                        \
  } while (false)

inline std::vector<float> randomFloats(int64_t n, std::mt19937 &rng,
                                       float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

inline HostTensor f32(const std::vector<int64_t> &shape,
                      const std::vector<float> &values) {
  HostTensor t(ElemType::F32, shape);
  std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(float));
  return t;
}

inline HostTensor i64(const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &values) {
  HostTensor t(ElemType::I64, shape);
  std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

/// Runs `op` `steps` times on inputs held in CONSTANT buffers (PARAMETER
/// where `inPlace` writes them), on the host (`device` null) or on
/// `device`; returns the outputs.
inline StatusOr<std::vector<HostTensor>>
runOpOn(Device *device, const std::string &op,
        const std::vector<HostTensor> &inputs,
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
    buffer(prog, id).set_data(
        std::string(inputs[i].bytes.begin(), inputs[i].bytes.end()));
    ins.push_back(id);
  }
  for (size_t i = 0; i < outShapes.size(); ++i) {
    if (i < inPlace.size() && inPlace[i] >= 0) {
      outs.push_back(ins[inPlace[i]]);
      continue;
    }
    outs.push_back(addBuffer(prog, "out" + std::to_string(i), plan::TEMPORARY,
                             outShapes[i]));
  }
  plan::Instruction &inst = addInst(prog, op, ins, outs, "test_op");
  if (attrs)
    attrs(inst);
  LOOM_RETURN_IF_ERROR(validatePlan(p, "test"));
  LocalCommunicator world;
  LOOM_ASSIGN_OR_RETURN(auto exec, Executor::create(p, world, "test", device));
  for (int s = 0; s < steps; ++s)
    LOOM_RETURN_IF_ERROR(exec->runStep(s));
  std::vector<HostTensor> results;
  for (int32_t id : outs)
    results.push_back(exec->readBuffer(*exec->findBuffer(id)));
  if (device)
    LOOM_RETURN_IF_ERROR(device->synchronize());
  return results;
}

/// `|got - want| <= atol + rtol |want|` element-wise (NaN matches NaN).
inline ::testing::AssertionResult allClose(const HostTensor &got,
                                           const HostTensor &want, double atol,
                                           double rtol) {
  std::vector<float> g = got.toF32(), w = want.toF32();
  if (g.size() != w.size())
    return ::testing::AssertionFailure()
           << "size " << g.size() << " != " << w.size();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double err = std::fabs(double(g[i]) - w[i]);
    if (std::isnan(g[i]) && std::isnan(w[i]))
      continue;
    if (!(err <= atol + rtol * std::fabs(w[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": cuda " << g[i] << ", cpu " << w[i];
    worst = std::max(worst, err);
  }
  return ::testing::AssertionSuccess() << "max abs error " << worst;
}

/// Runs `op` on the CPU and on the GPU and expects every output to agree.
inline void
expectSameOnCuda(const std::string &op, const std::vector<HostTensor> &inputs,
                 const std::vector<std::vector<int64_t>> &outShapes,
                 const std::function<void(plan::Instruction &)> &attrs = {},
                 const std::vector<int> &inPlace = {}, int steps = 1,
                 double atol = 1e-5, double rtol = 1e-4) {
  auto cpu = runOpOn(nullptr, op, inputs, outShapes, attrs, inPlace, steps);
  ASSERT_TRUE(cpu.isOk()) << "cpu: " << cpu.status().message();
  auto gpu =
      runOpOn(testDevice(), op, inputs, outShapes, attrs, inPlace, steps);
  ASSERT_TRUE(gpu.isOk()) << "cuda: " << gpu.status().message();
  ASSERT_EQ(cpu->size(), gpu->size());
  for (size_t i = 0; i < cpu->size(); ++i)
    EXPECT_TRUE(allClose((*gpu)[i], (*cpu)[i], atol, rtol))
        << op << " output " << i;
}

} // namespace loom::runtime::test

#endif // LOOM_TEST_UNIT_CUDA_CUDATESTUTIL_H
