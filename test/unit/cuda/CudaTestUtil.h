//===- CudaTestUtil.h - Run plans on the CPU and on a GPU ---------*- C++
//-*-===//

#ifndef LOOM_TEST_UNIT_CUDA_CUDATESTUTIL_H
#define LOOM_TEST_UNIT_CUDA_CUDATESTUTIL_H

#include "TestPlans.h"
#include "runtime/Executor.h"
#include "runtime/Session.h"
#include "runtime/kernels/cpu/Bf16.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cuda/CudaBackend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>

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

/// Sets an environment variable for one scope (a test) and restores its
/// previous value, or unsets it, at the end.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name)) {
      had = true;
      saved = old;
    }
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), saved.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  std::string name, saved;
  bool had = false;
};

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
/// Used for single kernels, GPU against CPU, on well-conditioned random
/// inputs of order 1 (the CPU result moves by ~1e-7 relative for 1e-7
/// inputs): the bounds are the two backends' rounding differences (summation
/// order, f32 vs bf16 storage) with a margin of 10 or more. Trained weights
/// are compared with expectUpdatesClose instead.
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

// --- bf16 storage
// -------------------------------------------------------------

using cpu::bf16ToFloat;
using cpu::floatToBf16;

/// `t` with every value rounded to bf16 (still stored as f32).
inline HostTensor roundedToBf16(const HostTensor &t) {
  std::vector<float> v = t.toF32();
  for (float &x : v)
    x = bf16ToFloat(floatToBf16(x));
  return f32(t.shape, v);
}

/// A bind context over a device arena, for kernels bound without an
/// executor (the executor's plan validation knows only f32 and i64).
class DirectBindContext : public BindContext {
public:
  DirectBindContext(Device &device, uint8_t *arena)
      : theDevice(device), theArena(arena) {}
  uint8_t *arena() override { return theArena; }
  Communicator *commForAxes(const std::vector<int64_t> &) override {
    return nullptr;
  }
  Device *device() override { return &theDevice; }

private:
  Device &theDevice;
  uint8_t *theArena;
};

/// Binds and runs `op` once on the device with operands stored as
/// `inTypes` / `outTypes` (F32, BF16 or I64); inputs are given as f32 or
/// i64 host tensors and encoded (bf16: rounded), outputs come back as f32.
/// Output `i` is input `inPlace[i]` where that is given and >= 0. A bind or
/// run failure is the returned status. With `timedRuns` > 0 the call then
/// runs that many more times and `*msPerRun` gets their mean wall time
/// (stream synchronised at both ends).
inline StatusOr<std::vector<HostTensor>>
runOpDirect(const std::string &op, const std::vector<HostTensor> &inputs,
            const std::vector<plan::DType> &inTypes,
            const std::vector<std::vector<int64_t>> &outShapes,
            const std::vector<plan::DType> &outTypes,
            const std::function<void(plan::Instruction &)> &attrs = {},
            const std::vector<int> &inPlace = {}, int timedRuns = 0,
            double *msPerRun = nullptr) {
  Device &device = *testDevice();
  plan::Plan p = makePlan(1, false);
  plan::Program &prog = *p.add_programs();
  auto add = [&](const std::string &name, plan::DType dt,
                 const std::vector<int64_t> &shape) {
    plan::Buffer *b = prog.add_buffers();
    b->set_id(prog.buffers_size() - 1);
    b->set_name(name);
    b->set_role(plan::TEMPORARY);
    b->set_dtype(dt);
    int64_t n = 1;
    for (int64_t d : shape) {
      b->add_shape(d);
      n *= d;
    }
    int64_t bytes = n * (dt == plan::I64 ? 8 : dt == plan::BF16 ? 2 : 4);
    b->set_offset(prog.arena_bytes());
    b->set_size_bytes(bytes);
    prog.set_arena_bytes((prog.arena_bytes() + bytes + 63) / 64 * 64);
    return b->id();
  };
  std::vector<int32_t> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(add("in" + std::to_string(i), inTypes[i], inputs[i].shape));
  for (size_t i = 0; i < outShapes.size(); ++i)
    outs.push_back(
        i < inPlace.size() && inPlace[i] >= 0
            ? ins[inPlace[i]]
            : add("out" + std::to_string(i), outTypes[i], outShapes[i]));
  plan::Instruction &inst = addInst(prog, op, ins, outs, "test_op");
  if (attrs)
    attrs(inst);

  std::vector<uint8_t> host(std::max<int64_t>(prog.arena_bytes(), 64), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    uint8_t *at = host.data() + prog.buffers(ins[i]).offset();
    if (inTypes[i] == plan::I64) {
      std::memcpy(at, inputs[i].bytes.data(), inputs[i].bytes.size());
      continue;
    }
    std::vector<float> v = inputs[i].toF32();
    for (size_t j = 0; j < v.size(); ++j) {
      if (inTypes[i] == plan::BF16) {
        uint16_t h = floatToBf16(v[j]);
        std::memcpy(at + 2 * j, &h, 2);
      } else {
        std::memcpy(at + 4 * j, &v[j], 4);
      }
    }
  }
  LOOM_ASSIGN_OR_RETURN(
      uint8_t * arena, device.allocateArena(static_cast<int64_t>(host.size())));
  std::unique_ptr<uint8_t, std::function<void(uint8_t *)>> owner(
      arena, [&](uint8_t *a) { device.freeArena(a); });
  LOOM_RETURN_IF_ERROR(device.upload(arena, host.data(), host.size()));

  OpView view{p, inst, {}, {}};
  for (int32_t id : ins)
    view.inputs.push_back(&prog.buffers(id));
  for (int32_t id : outs)
    view.outputs.push_back(&prog.buffers(id));
  const KernelDef *kernel = device.findKernel(op);
  if (!kernel)
    return makeError("no CUDA kernel for '%s'", op.c_str());
  DirectBindContext ctx(device, arena);
  LOOM_ASSIGN_OR_RETURN(KernelFn fn, kernel->bind(view, ctx));
  LOOM_RETURN_IF_ERROR(fn(StepContext{}));
  LOOM_RETURN_IF_ERROR(device.synchronize());
  if (timedRuns > 0) {
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < timedRuns; ++r)
      LOOM_RETURN_IF_ERROR(fn(StepContext{}));
    LOOM_RETURN_IF_ERROR(device.synchronize());
    std::chrono::duration<double, std::milli> took =
        std::chrono::steady_clock::now() - start;
    if (msPerRun)
      *msPerRun = took.count() / timedRuns;
  }
  LOOM_RETURN_IF_ERROR(device.download(host.data(), arena, host.size()));

  std::vector<HostTensor> results;
  for (size_t i = 0; i < outs.size(); ++i) {
    const uint8_t *at = host.data() + prog.buffers(outs[i]).offset();
    int64_t n = numElements(outShapes[i]);
    std::vector<float> v(n);
    for (int64_t j = 0; j < n; ++j) {
      if (outTypes[i] == plan::BF16) {
        uint16_t h;
        std::memcpy(&h, at + 2 * j, 2);
        v[j] = bf16ToFloat(h);
      } else if (outTypes[i] == plan::I64) {
        int64_t x;
        std::memcpy(&x, at + 8 * j, 8);
        v[j] = static_cast<float>(x);
      } else {
        std::memcpy(&v[j], at + 4 * j, 4);
      }
    }
    results.push_back(f32(outShapes[i], v));
  }
  return results;
}

/// Runs `op` on the GPU with the given storage types and compares each
/// output with the CPU fp32 kernel run on the same values (the bf16 inputs
/// rounded to bf16 first), within bf16 tolerances.
inline void
expectBf16MatchesCpu(const std::string &op,
                     const std::vector<HostTensor> &inputs,
                     const std::vector<plan::DType> &inTypes,
                     const std::vector<std::vector<int64_t>> &outShapes,
                     const std::vector<plan::DType> &outTypes,
                     const std::function<void(plan::Instruction &)> &attrs = {},
                     double atol = 1e-2, double rtol = 1e-2,
                     const std::vector<int> &inPlace = {}) {
  std::vector<HostTensor> rounded;
  for (size_t i = 0; i < inputs.size(); ++i)
    rounded.push_back(inTypes[i] == plan::BF16 ? roundedToBf16(inputs[i])
                                               : inputs[i]);
  auto cpu = runOpOn(nullptr, op, rounded, outShapes, attrs, inPlace);
  ASSERT_TRUE(cpu.isOk()) << "cpu: " << cpu.status().message();
  auto gpu =
      runOpDirect(op, inputs, inTypes, outShapes, outTypes, attrs, inPlace);
  ASSERT_TRUE(gpu.isOk()) << "cuda: " << gpu.status().message();
  for (size_t i = 0; i < cpu->size(); ++i)
    EXPECT_TRUE(allClose((*gpu)[i], (*cpu)[i], atol, rtol))
        << op << " (bf16) output " << i;
}

/// Losses of every step and the final parameters of a training run.
struct Run {
  std::vector<float> losses;
  std::map<std::string, HostTensor> params;
};

/// Trains `plan` (named `name` in errors) for `steps` steps on one rank, on
/// `device` (null: the host), with `data` attached by input name.
inline StatusOr<Run>
train(const plan::Plan &plan, Device *device, const char *name,
      const std::vector<std::pair<std::string, HostTensor>> &data, int steps) {
  LocalCommunicator world;
  LOOM_ASSIGN_OR_RETURN(auto session,
                        Session::create(plan, world, name, device));
  for (const auto &[input, tensor] : data)
    LOOM_RETURN_IF_ERROR(session->attachData(input, tensor));
  Run run;
  for (int s = 0; s < steps; ++s) {
    LOOM_RETURN_IF_ERROR(session->runStep(s));
    LOOM_ASSIGN_OR_RETURN(float loss, session->loss());
    run.losses.push_back(loss);
  }
  LOOM_ASSIGN_OR_RETURN(run.params, session->parameters());
  return run;
}

/// `plan` with every stored parameter value x moved to x (1 +- rel), the
/// sign drawn per element from a fixed generator (test/models/perturb.py for
/// plans built in C++).
inline plan::Plan perturbedParameters(plan::Plan plan, float rel) {
  std::mt19937 signs(1);
  for (plan::Program &g : *plan.mutable_programs())
    for (plan::Buffer &b : *g.mutable_buffers()) {
      if (b.role() != plan::PARAMETER || b.dtype() != plan::F32 || b.data().empty())
        continue;
      std::string bytes = b.data();
      for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        float x;
        std::memcpy(&x, bytes.data() + i, 4);
        x *= 1 + ((signs() % 2) ? rel : -rel);
        std::memcpy(bytes.data() + i, &x, 4);
      }
      b.set_data(bytes);
    }
  return plan;
}

/// The AdamW weight rule of test/models/compare.py --initial: each tensor's
/// update `got - initial` within `rtol` of the reference's update `ref -
/// initial` in L2. Element-wise bounds on AdamW weights are ill-posed (AdamW
/// turns a gradient that nearly cancels into a step of +-lr on the sign of
/// rounding noise). Well-posed: `moved`, the reference re-run on perturbed
/// inputs, must stay within a tenth of the tolerance (its own update, from
/// `movedInitial` when its weights were the perturbed inputs); with `got` =
/// `ref` this checks only that, on any machine (the CPU half of a GPU test).
inline void expectUpdatesClose(const Run &got, const Run &ref, const Run &moved,
                               const Run &initial, double rtol,
                               const Run *movedInitial = nullptr) {
  for (const auto &[name, want] : ref.params) {
    const float *w0 = initial.params.at(name).data<float>();
    const float *m0 = (movedInitial ? *movedInitial : initial).params.at(name).data<float>();
    const float *r = want.data<float>();
    const float *g = got.params.at(name).data<float>();
    const float *m = moved.params.at(name).data<float>();
    double upd2 = 0, err2 = 0, sens2 = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      upd2 += (double(r[i]) - w0[i]) * (double(r[i]) - w0[i]);
      err2 += (double(g[i]) - r[i]) * (double(g[i]) - r[i]);
      double dm = (double(m[i]) - m0[i]) - (double(r[i]) - w0[i]);
      sens2 += dm * dm;
    }
    double upd = std::sqrt(upd2);
    EXPECT_LE(std::sqrt(sens2), 0.1 * rtol * upd)
        << name << ": ill-posed: the reference on perturbed inputs moves its "
        << "update by " << std::sqrt(sens2) / upd << " relative";
    EXPECT_LE(std::sqrt(err2), rtol * upd)
        << name << ": update differs by " << std::sqrt(err2) / upd << " relative";
    std::printf("%s: update %.3g, rel L2 err %.3g, sensitivity %.3g\n", name.c_str(), upd,
                std::sqrt(err2) / upd, std::sqrt(sens2) / upd);
  }
}

} // namespace loom::runtime::test

#endif // LOOM_TEST_UNIT_CUDA_CUDATESTUTIL_H
