//===- KernelTestUtil.h - Run one instruction on a 1-rank plan -----*- C++ -*-===//

#ifndef LOOM_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
#define LOOM_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H

#include "TestPlans.h"
#include "runtime/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
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

/// Expects `|got - want| <= atol + rtol * |want|` element-wise.
inline ::testing::AssertionResult
allClose(const std::vector<float> &got, const std::vector<double> &want,
         double atol, double rtol = 0) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= atol + rtol * std::fabs(want[i])) &&
        !(std::isnan(want[i]) && std::isnan(got[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << want[i];
  }
  return ::testing::AssertionSuccess();
}

/// Row-major multi-index of `flat` in `shape`.
inline std::vector<int64_t> unravel(int64_t flat,
                                    const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

/// Flat offset of `idx` in `shape`.
inline int64_t ravel(const std::vector<int64_t> &idx,
                     const std::vector<int64_t> &shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    off = off * shape[d] + idx[d];
  return off;
}

/// NumPy broadcasting reference: the element of `t` (shape `s`) that lands
/// at output multi-index `idx`.
inline float bcastAt(const std::vector<float> &t, const std::vector<int64_t> &s,
                     const std::vector<int64_t> &idx) {
  int64_t off = 0;
  size_t shift = idx.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    off = off * s[d] + (s[d] == 1 ? 0 : idx[d + shift]);
  return t[off];
}

/// Runs `op` and returns its outputs as floats; a failure is reported
/// through `ok`.
inline std::vector<std::vector<float>>
runF32(const std::string &op, const std::vector<HostTensor> &inputs,
       const std::vector<std::vector<int64_t>> &outShapes,
       const std::function<void(plan::Instruction &)> &attrs, bool *ok,
       std::string *error = nullptr) {
  auto r = runOp(op, inputs, outShapes, attrs);
  *ok = r.isOk();
  if (!r.isOk()) {
    if (error)
      *error = r.status().message();
    return {};
  }
  std::vector<std::vector<float>> out;
  for (const HostTensor &t : *r)
    out.push_back(t.toF32());
  return out;
}

/// Central finite differences of `loss(x)` (computed in double from the
/// kernel's outputs) with respect to every element of `x`.
inline std::vector<double>
numericGrad(const std::function<double(const std::vector<float> &)> &loss,
            std::vector<float> x, double eps) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    float keep = x[i];
    x[i] = keep + static_cast<float>(eps);
    double hi = loss(x);
    x[i] = keep - static_cast<float>(eps);
    double lo = loss(x);
    x[i] = keep;
    g[i] = (hi - lo) / (2 * eps);
  }
  return g;
}

/// `sum(w * y)` in double.
inline double dot(const std::vector<float> &w, const std::vector<float> &y) {
  double s = 0;
  for (size_t i = 0; i < w.size() && i < y.size(); ++i)
    s += double(w[i]) * y[i];
  return s;
}

} // namespace loom::runtime::test

#endif // LOOM_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
