//===- TestPlans.h - Build plans in C++ for runtime tests ----------*- C++ -*-===//
//
// The plan builders of runtime/PlanBuilder.h, plus a ready-made
// linear-regression training plan used by the executor tests and the MPI
// smoke test.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_TESTPLANS_H
#define LOOM_TEST_UNIT_RUNTIME_TESTPLANS_H

#include "runtime/PlanBuilder.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace plan = loom::plan;

namespace loom::runtime::test {

using loom::runtime::addBuffer;
using loom::runtime::addInst;
using loom::runtime::buffer;
using loom::runtime::HostContext;
using loom::runtime::setF;
using loom::runtime::setI;
using loom::runtime::setInts;
using loom::runtime::setS;

/// The values of an f32 buffer's stored data.
inline void setData(plan::Buffer &b, const std::vector<float> &values) {
  b.set_data(std::string(reinterpret_cast<const char *>(values.data()),
                         values.size() * sizeof(float)));
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

} // namespace loom::runtime::test

#endif // LOOM_TEST_UNIT_RUNTIME_TESTPLANS_H
