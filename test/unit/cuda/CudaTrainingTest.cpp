//===- CudaTrainingTest.cpp - A whole training plan on CPU and GPU -*- C++
//-*-===//
//
// A two-layer MLP (matmul, bias add, relu, cross-entropy, their gradients,
// sum_to, AdamW) written as a plan by hand, trained a few steps on both
// backends from the same weights and data: the losses and the trained
// weights must agree (each weight within what a 1e-6 relative perturbation
// of the inputs does to it on the CPU, see MlpAdamWMatchesCpu). This is the
// path `loom-run --device cuda` takes.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace loom::runtime::test {
namespace {

constexpr int64_t kBatch = 64, kIn = 32, kHidden = 128, kClasses = 10;

plan::Plan makeMlpPlan(std::mt19937 &rng) {
  plan::Plan p = makePlan(1, true);
  p.mutable_training()->set_global_batch(kBatch);
  plan::Program &g = *p.add_programs();
  g.add_ranks(0);
  auto param = [&](const std::string &name, std::vector<int64_t> shape,
                   float bound) {
    int32_t id = addBuffer(g, name, plan::PARAMETER, shape);
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    setData(buffer(g, id), randomFloats(n, rng, -bound, bound));
    buffer(g, id).set_binding(name);
    return id;
  };
  auto temp = [&](const std::string &name, std::vector<int64_t> shape) {
    return addBuffer(g, name, plan::TEMPORARY, shape);
  };
  int32_t x = addBuffer(g, "x", plan::INPUT, {kBatch, kIn});
  buffer(g, x).set_binding("x");
  int32_t t = addBuffer(g, "target", plan::TARGET, {kBatch}, plan::I64);
  buffer(g, t).set_binding("target");
  int32_t w1 = param("w1", {kIn, kHidden}, 0.2f);
  int32_t b1 = param("b1", {kHidden}, 0.1f);
  int32_t w2 = param("w2", {kHidden, kClasses}, 0.2f);
  int32_t b2 = param("b2", {kClasses}, 0.1f);
  int32_t h = temp("h", {kBatch, kHidden}), hb = temp("hb", {kBatch, kHidden});
  int32_t a = temp("a", {kBatch, kHidden});
  int32_t z = temp("z", {kBatch, kClasses}),
          zb = temp("zb", {kBatch, kClasses});
  int32_t loss = addBuffer(g, "loss", plan::LOSS, {});
  g.set_loss_buffer(loss);
  int32_t dz = temp("dz", {kBatch, kClasses});
  int32_t dw2 = temp("dw2", {kHidden, kClasses}), db2 = temp("db2", {kClasses});
  int32_t da = temp("da", {kBatch, kHidden}),
          dh = temp("dh", {kBatch, kHidden});
  int32_t dw1 = temp("dw1", {kIn, kHidden}), db1 = temp("db1", {kHidden});

  addInst(g, "matmul", {x, w1}, {h});
  addInst(g, "add", {h, b1}, {hb});
  addInst(g, "relu", {hb}, {a});
  addInst(g, "matmul", {a, w2}, {z});
  addInst(g, "add", {z, b2}, {zb});
  addInst(g, "cross_entropy", {zb, t}, {loss});
  addInst(g, "cross_entropy_grad", {zb, t}, {dz});
  setI(addInst(g, "matmul", {a, dz}, {dw2}), "transpose_a", 1);
  addInst(g, "sum_to", {dz}, {db2});
  setI(addInst(g, "matmul", {dz, w2}, {da}), "transpose_b", 1);
  addInst(g, "relu_grad", {da, hb}, {dh});
  setI(addInst(g, "matmul", {x, dh}, {dw1}), "transpose_a", 1);
  addInst(g, "sum_to", {dh}, {db1});
  for (auto [w, dw] : {std::pair{w1, dw1}, {b1, db1}, {w2, dw2}, {b2, db2}}) {
    std::vector<int64_t> shape(buffer(g, w).shape().begin(),
                               buffer(g, w).shape().end());
    int32_t m =
        addBuffer(g, buffer(g, w).name() + ".m", plan::OPTIMIZER_STATE, shape);
    int32_t v =
        addBuffer(g, buffer(g, w).name() + ".v", plan::OPTIMIZER_STATE, shape);
    buffer(g, m).set_zeros(true);
    buffer(g, v).set_zeros(true);
    plan::Instruction &u = addInst(g, "adamw", {w, dw, m, v}, {w, m, v});
    setF(u, "lr", 1e-2);
  }
  return p;
}

/// The MLP's data: two global batches, so steps see different samples.
std::vector<std::pair<std::string, HostTensor>> mlpData(std::mt19937 &rng,
                                                        float perturb = 0) {
  HostTensor x = f32({2 * kBatch, kIn}, randomFloats(2 * kBatch * kIn, rng));
  std::vector<int64_t> labels(2 * kBatch);
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<int64_t>(i * 7 % kClasses);
  std::mt19937 signs(1);
  for (int64_t i = 0; i < x.numel() && perturb != 0; ++i)
    x.data<float>()[i] *= 1 + ((signs() % 2) ? perturb : -perturb);
  return {{"x", x}, {"target", i64({2 * kBatch}, labels)}};
}

constexpr int kSteps = 10;
// Each weight tensor's AdamW update within 1e-3 in relative L2
// (expectUpdatesClose). The CPU run on inputs perturbed by 1e-6 relative
// (well above the float rounding by which the two backends' summation orders
// differ) measures the comparison's sensitivity: at most 1.8e-5 here
// (MlpPlan.UpdateComparisonIsWellPosed checks it in every build).
constexpr double kUpdateRtol = 1e-3;

/// Initial weights, the CPU run and the CPU run on perturbed inputs.
struct MlpRuns {
  plan::Plan plan;
  std::vector<std::pair<std::string, HostTensor>> data;
  StatusOr<Run> initial, cpu, moved;
};

MlpRuns mlpRuns() {
  std::mt19937 rng(7);
  MlpRuns r{makeMlpPlan(rng), {}, Run(), Run(), Run()};
  std::mt19937 same = rng;
  r.data = mlpData(rng);
  r.initial = train(r.plan, nullptr, "mlp", r.data, 0);
  r.cpu = train(r.plan, nullptr, "mlp", r.data, kSteps);
  r.moved = train(r.plan, nullptr, "mlp", mlpData(same, 1e-6f), kSteps);
  return r;
}

TEST(CudaTraining, MlpAdamWMatchesCpu) {
  LOOM_REQUIRE_CUDA();
  MlpRuns r = mlpRuns();
  ASSERT_TRUE(validatePlan(r.plan, "mlp").isOk())
      << validatePlan(r.plan, "mlp").message();
  ASSERT_TRUE(r.initial.isOk() && r.cpu.isOk() && r.moved.isOk())
      << r.cpu.status().message();
  auto gpu = train(r.plan, testDevice(), "mlp", r.data, kSteps);
  ASSERT_TRUE(gpu.isOk()) << gpu.status().message();
  // Losses within 1e-4 (the perturbed CPU run moves them by <= 1e-6).
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(gpu->losses[s], r.cpu->losses[s],
                1e-4 * std::fabs(r.cpu->losses[s]))
        << "step " << s + 1;
  EXPECT_LT(r.cpu->losses.back(), r.cpu->losses.front());
  expectUpdatesClose(*gpu, *r.cpu, *r.moved, *r.initial, kUpdateRtol);
}

/// The CPU half of the test above, in every build: the weight comparison
/// it makes on a GPU is well-posed.
TEST(MlpPlan, UpdateComparisonIsWellPosed) {
  MlpRuns r = mlpRuns();
  ASSERT_TRUE(r.initial.isOk() && r.cpu.isOk() && r.moved.isOk())
      << r.cpu.status().message();
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(r.moved->losses[s], r.cpu->losses[s],
                1e-5 * std::fabs(r.cpu->losses[s]))
        << "step " << s + 1;
  expectUpdatesClose(*r.cpu, *r.cpu, *r.moved, *r.initial, kUpdateRtol);
}

} // namespace
} // namespace loom::runtime::test
