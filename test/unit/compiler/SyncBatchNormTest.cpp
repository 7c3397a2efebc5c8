//===- SyncBatchNormTest.cpp - The written-out batch norm computes the fused one -===//
//
// `loom-sync-batch-norm` replaces `loom.batch_norm` and `loom.batch_norm_grad`
// by reductions and element-wise ops (so that data parallelism all-reduces
// their sums). On one rank, both forms must compute the same output and the
// same three gradients: emit a plan of the fused step and one of the
// rewritten step (the pass runs on a dp = 2 mesh, removed before emission),
// run both on the CPU runtime with the same inputs, and compare (relative
// 1e-5, plus 1e-6 absolute for values that cross zero).
//
//===----------------------------------------------------------------------===//

#include "RunForward.h"
#include "emit/PlanEmitter.h"
#include "ir/EntryFunction.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"
#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

using namespace mlir;
using namespace mlir::loom;
namespace rt = ::loom::runtime;

namespace {

struct NormCase {
  const char *name;
  std::vector<int64_t> shape; // [N, C, ...]
  double epsilon;
};

void PrintTo(const NormCase &c, std::ostream *os) { *os << c.name; }

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s;
}

/// @main(x, dy, g, b) -> (y, dx, dg, db) with the fused ops, on a dp = 2 mesh.
std::string stepText(const NormCase &c) {
  std::string t = "tensor<" + shapeText(c.shape) + "f32>";
  std::string v = "tensor<" + std::to_string(c.shape[1]) + "xf32>";
  std::string eps = std::to_string(c.epsilon);
  return "shard.grid @mesh(shape = 1x2x1)\n"
         "func.func @main(%x: " + t + " {loom.input = \"x\"}, %dy: " + t +
         " {loom.input = \"dy\"}, %g: " + v + " {loom.input = \"g\"}, %b: " + v +
         " {loom.input = \"b\"}) -> (" + t + " {loom.output = \"y\"}, " + t +
         " {loom.output = \"dx\"}, " + v + " {loom.output = \"dg\"}, " + v +
         " {loom.output = \"db\"}) {\n"
         "  %y = loom.batch_norm %x, %g, %b {epsilon = " + eps + " : f64} : (" +
         t + ", " + v + ", " + v + ") -> " + t + "\n"
         "  %dx, %dg, %db = loom.batch_norm_grad %dy, %x, %g {epsilon = " + eps +
         " : f64} : (" + t + ", " + t + ", " + v + ") -> (" + t + ", " + v +
         ", " + v + ")\n"
         "  return %y, %dx, %dg, %db : " + t + ", " + t + ", " + v + ", " + v +
         "\n}\n";
}

class SyncBatchNormNumerics : public ::testing::TestWithParam<NormCase> {
protected:
  SyncBatchNormNumerics() {
    DialectRegistry registry;
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Runs the forward plan of `module` (its mesh removed: one rank) on
  /// `inputs`; returns every output.
  std::map<std::string, rt::HostTensor>
  run(ModuleOp module, const std::map<std::string, rt::HostTensor> &inputs) {
    if (shard::GridOp grid = lookupMesh(module))
      grid.erase();
    return ::loom::test::runForward(module, inputs);
  }

  MLIRContext ctx;
};

TEST_P(SyncBatchNormNumerics, WrittenOutMatchesFused) {
  const NormCase &c = GetParam();
  OwningOpRef<ModuleOp> fused = parseSourceString<ModuleOp>(stepText(c), &ctx);
  ASSERT_TRUE(fused);
  OwningOpRef<ModuleOp> synced = fused->clone();
  PassManager pm(&ctx);
  pm.addPass(createLoomSyncBatchNormPass());
  ASSERT_TRUE(succeeded(pm.run(*synced)));
  bool left = false;
  synced->walk([&](Operation *op) {
    left |= isa<BatchNormOp, BatchNormGradOp>(op);
  });
  ASSERT_FALSE(left) << c.name << ": a fused batch norm survived the pass";

  // Inputs far from zero mean (mean 3, spread 2), so centring matters.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  auto random = [&](std::vector<int64_t> shape, float offset) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<float> v(n);
    for (float &x : v)
      x = offset + uni(rng);
    return rt::HostTensor::fromF32(shape, v);
  };
  std::map<std::string, rt::HostTensor> inputs{
      {"x", random(c.shape, 3.0f)},
      {"dy", random(c.shape, 0.0f)},
      {"g", random({c.shape[1]}, 1.0f)},
      {"b", random({c.shape[1]}, 0.0f)}};

  std::map<std::string, rt::HostTensor> want = run(*fused, inputs);
  std::map<std::string, rt::HostTensor> got = run(*synced, inputs);
  for (const char *name : {"y", "dx", "dg", "db"}) {
    ASSERT_TRUE(want.count(name) && got.count(name)) << c.name << ": " << name;
    std::vector<float> w = want[name].toF32(), g = got[name].toF32();
    ASSERT_EQ(w.size(), g.size());
    // Different summation orders in f32: ~1e-7 relative for y, a few 1e-7
    // absolute for dx (a difference of order-1 terms); 1e-5 keeps a factor 10.
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR(g[i], w[i], 1e-6 + 1e-5 * std::fabs(w[i]))
          << c.name << ": " << name << "[" << i << "]";
  }
}

const NormCase kCases[] = {
    {"nchw", {6, 3, 4, 5}, 1e-5},
    {"ncl", {8, 2, 7}, 1e-3},
    {"one_pixel", {4, 5, 1, 1}, 1e-5},
};

INSTANTIATE_TEST_SUITE_P(
    Cases, SyncBatchNormNumerics, ::testing::ValuesIn(kCases),
    [](const ::testing::TestParamInfo<NormCase> &info) {
      return std::string(info.param.name);
    });

} // namespace
