//===- GradientCheckTest.cpp - Autodiff against finite differences --------===//
//
// For every differentiable op: build `loss = mse(op(params...), target)` (or
// the op's own loss), differentiate it with `loom-autodiff`, emit a plan, run
// it on the CPU runtime, and compare each parameter gradient element with a
// central finite difference of the loss computed by the same runtime.
// The same steps check every op's sharding loop nest (ir/sharding/): one map
// per operand and result, of its rank, and loops shared only by dimensions of
// one size (but for a reshape, whose groups share their outer dimensions).
//
//===----------------------------------------------------------------------===//

#include "emit/PlanEmitter.h"
#include "ir/EntryFunction.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "passes/Passes.h"
#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace mlir;
using namespace mlir::loom;
namespace rt = ::loom::runtime;

namespace {

struct GradCase {
  const char *name;
  const char *mlir; // @main(params..., target) -> loss
  /// Parameters get well-separated values (no near ties), for max-pooling.
  bool distinct = false;
};

void PrintTo(const GradCase &c, std::ostream *os) { *os << c.name; }

class GradientCheck : public ::testing::TestWithParam<GradCase> {
protected:
  GradientCheck() {
    DialectRegistry registry;
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Runs the plan once with the given parameter values; returns the loss
  /// and fills `grads` (by parameter name) when given.
  float run(::loom::plan::Plan plan,
            const std::map<std::string, std::vector<float>> &values,
            std::map<std::string, std::vector<float>> *grads) {
    for (::loom::plan::Buffer &b :
         *plan.mutable_programs(0)->mutable_buffers()) {
      if (b.role() == ::loom::plan::PARAMETER) {
        const std::vector<float> &v = values.at(b.binding());
        b.set_data(std::string(reinterpret_cast<const char *>(v.data()),
                               v.size() * sizeof(float)));
      }
    }
    rt::LocalCommunicator world;
    auto session = rt::Session::create(plan, world);
    EXPECT_TRUE(session.isOk()) << session.status().message();
    if (!session.isOk())
      return NAN;
    for (const auto &[binding, tensor] : inputs)
      EXPECT_TRUE((*session)->attachData(binding, tensor).isOk());
    rt::Status st = (*session)->runStep(0);
    EXPECT_TRUE(st.isOk()) << st.message();
    if (grads)
      for (auto &[binding, tensor] : (*session)->outputs())
        if (llvm::StringRef(binding).starts_with("grad:"))
          (*grads)[binding.substr(5)] = tensor.toF32();
    auto loss = (*session)->loss();
    EXPECT_TRUE(loss.isOk());
    return loss.isOk() ? *loss : NAN;
  }

  MLIRContext ctx;
  std::map<std::string, rt::HostTensor> inputs;
};

TEST_P(GradientCheck, MatchesFiniteDifferences) {
  const GradCase &c = GetParam();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(c.mlir, &ctx);
  ASSERT_TRUE(module);
  auto func = lookupEntryFunction(*module);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);

  // Random parameters (kept away from 0 so relu and div are smooth) and data.
  std::map<std::string, std::vector<float>> values;
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    int64_t n = type.getNumElements();
    if (auto p = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   mlir::loom::attr::kParam)) {
      std::vector<float> v(n);
      for (float &x : v) {
        x = uni(rng);
        x += x < 0 ? -0.25f : 0.25f;
      }
      if (c.distinct) {
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (int64_t i = 0; i < n; ++i)
          v[i] = 0.1f * order[i] - 0.05f * n;
      }
      values[p.str()] = v;
    } else if (type.getElementType().isInteger(64)) {
      int64_t classes = 3;
      std::vector<int64_t> ids(n);
      for (int64_t &id : ids)
        id = rng() % classes;
      inputs["target"] = rt::HostTensor::fromI64(shape, ids);
    } else {
      std::vector<float> v(n);
      for (float &x : v)
        x = uni(rng);
      inputs["target"] = rt::HostTensor::fromF32(shape, v);
    }
  }

  PassManager pm(&ctx);
  pm.addNestedPass<func::FuncOp>(createLoomAutodiffPass());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  FailureOr<::loom::plan::Plan> plan = emitPlan(*module, EmitOptions());
  ASSERT_TRUE(succeeded(plan));
  plan->mutable_training()->set_global_batch(
      inputs["target"].shape.empty() ? 1 : inputs["target"].shape[0]);

  std::map<std::string, std::vector<float>> grads;
  run(*plan, values, &grads);
  ASSERT_EQ(grads.size(), values.size());

  const float eps = 1e-2f;
  for (auto &[name, v] : values) {
    for (size_t i = 0; i < v.size(); ++i) {
      auto plus = values, minus = values;
      plus[name][i] += eps;
      minus[name][i] -= eps;
      float fd = (run(*plan, plus, nullptr) - run(*plan, minus, nullptr)) /
                 (2 * eps);
      float ad = grads[name][i];
      // The central difference in f32 is the noisy side: at eps = 1e-2 its
      // rounding error is ~ulp(loss)/eps, about 1e-5 of the loss, and its
      // truncation error O(eps^2), about 1e-4 relative on these order-1
      // inputs; the bound stays 10x above both.
      EXPECT_NEAR(ad, fd, 2e-3f + 2e-2f * std::fabs(fd))
          << c.name << ": d loss / d " << name << "[" << i << "]";
    }
  }
}

TEST_P(GradientCheck, LoopNestsAreWellFormed) {
  const GradCase &c = GetParam();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(c.mlir, &ctx);
  ASSERT_TRUE(module);
  PassManager pm(&ctx);
  pm.addNestedPass<func::FuncOp>(createLoomAutodiffPass());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  module->walk([&](Operation *op) {
    if (!isa<LoomDialect>(op->getDialect()))
      return;
    std::string name = op->getName().getStringRef().str();
    auto sharding = dyn_cast<shard::ShardingInterface>(op);
    ASSERT_TRUE(sharding) << name;
    EXPECT_TRUE(succeeded(sharding.verifyShardingInterfaceImpl())) << name;
    SmallVector<AffineMap> maps = sharding.getIndexingMaps();
    size_t loops = sharding.getLoopIteratorTypes().size();
    ASSERT_EQ(maps.size(), op->getNumOperands() + op->getNumResults()) << name;
    std::vector<int64_t> extent(loops, -1);
    SmallVector<Value> values(op->getOperands());
    llvm::append_range(values, op->getResults());
    for (auto [value, map] : llvm::zip(values, maps)) {
      ArrayRef<int64_t> shape = cast<RankedTensorType>(value.getType()).getShape();
      ASSERT_EQ(map.getNumResults(), shape.size()) << name;
      ASSERT_EQ(map.getNumDims(), loops) << name;
      for (auto [d, expr] : llvm::enumerate(map.getResults())) {
        unsigned loop = cast<AffineDimExpr>(expr).getPosition();
        if (extent[loop] < 0)
          extent[loop] = shape[d];
        if (!isa<ReshapeOp>(op))
          EXPECT_EQ(extent[loop], shape[d])
            << name << ": loop " << loop << " indexes dimensions of sizes "
            << extent[loop] << " and " << shape[d];
      }
    }
  });
}

const GradCase kCases[] = {
    {"matmul", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %b: tensor<3x2xf32> {loom.param = "b"}, %t: tensor<2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.matmul %a, %b : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
      %1 = loom.mse %0, %t : tensor<2x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"matmul_transpose_rhs", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %b: tensor<4x3xf32> {loom.param = "b"}, %t: tensor<2x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.matmul %a, %b {transpose_rhs} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
      %1 = loom.mse %0, %t : tensor<2x4xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"matmul_transpose_lhs", R"(func.func @main(%a: tensor<3x2xf32> {loom.param = "a"}, %b: tensor<3x4xf32> {loom.param = "b"}, %t: tensor<2x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.matmul %a, %b {transpose_lhs} : (tensor<3x2xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      %1 = loom.mse %0, %t : tensor<2x4xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"matmul_transpose_both", R"(func.func @main(%a: tensor<3x2xf32> {loom.param = "a"}, %b: tensor<4x3xf32> {loom.param = "b"}, %t: tensor<2x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.matmul %a, %b {transpose_lhs, transpose_rhs} : (tensor<3x2xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
      %1 = loom.mse %0, %t : tensor<2x4xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"matmul_batched_lhs", R"(func.func @main(%a: tensor<2x2x3xf32> {loom.param = "a"}, %b: tensor<3x2xf32> {loom.param = "b"}, %t: tensor<2x2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.matmul %a, %b : (tensor<2x2x3xf32>, tensor<3x2xf32>) -> tensor<2x2x2xf32>
      %1 = loom.mse %0, %t : tensor<2x2x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"add_broadcast", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %b: tensor<3xf32> {loom.param = "b"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"sub_broadcast_column", R"(func.func @main(%a: tensor<2x1xf32> {loom.param = "a"}, %b: tensor<2x3xf32> {loom.param = "b"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.sub %a, %b : (tensor<2x1xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"mul_broadcast", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %b: tensor<1x3xf32> {loom.param = "b"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.mul %a, %b : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"div", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %b: tensor<3xf32> {loom.param = "b"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"relu", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.relu %a : tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"tanh", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.tanh %a : tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"sigmoid", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.sigmoid %a : tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"scale", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.scale %a by -1.5 : tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"reshape", R"(func.func @main(%a: tensor<2x3x2xf32> {loom.param = "a"}, %b: tensor<6x1xf32> {loom.param = "b"}, %t: tensor<2x1xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.reshape %a [0, -1] : tensor<2x3x2xf32> -> tensor<2x6xf32>
      %1 = loom.matmul %0, %b : (tensor<2x6xf32>, tensor<6x1xf32>) -> tensor<2x1xf32>
      %2 = loom.mse %1, %t : tensor<2x1xf32> -> tensor<f32>
      return %2 : tensor<f32> })"},
    {"cross_entropy", R"(func.func @main(%a: tensor<4x3xf32> {loom.param = "a"}, %t: tensor<4xi64> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.cross_entropy %a, %t : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
      return %0 : tensor<f32> })"},
    {"cross_entropy_sequence", R"(func.func @main(%a: tensor<2x2x3xf32> {loom.param = "a"}, %t: tensor<2x2xi64> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.cross_entropy %a, %t : (tensor<2x2x3xf32>, tensor<2x2xi64>) -> tensor<f32>
      return %0 : tensor<f32> })"},
    {"mse", R"(func.func @main(%a: tensor<3x2xf32> {loom.param = "a"}, %t: tensor<3x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.mse %a, %t : tensor<3x2xf32> -> tensor<f32>
      return %0 : tensor<f32> })"},
    {"shared_parameter", R"(func.func @main(%a: tensor<2x2xf32> {loom.param = "a"}, %t: tensor<2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.matmul %a, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %1 = loom.mul %0, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %2 = loom.mse %1, %t : tensor<2x2xf32> -> tensor<f32>
      return %2 : tensor<f32> })"},
    {"batch_matmul_broadcast", R"(func.func @main(%a: tensor<2x2x3xf32> {loom.param = "a"}, %b: tensor<3x2xf32> {loom.param = "b"}, %t: tensor<2x2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.batch_matmul %a, %b : (tensor<2x2x3xf32>, tensor<3x2xf32>) -> tensor<2x2x2xf32>
      %1 = loom.mse %0, %t : tensor<2x2x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"batch_matmul_transposed", R"(func.func @main(%a: tensor<2x3x2xf32> {loom.param = "a"}, %b: tensor<1x2x3xf32> {loom.param = "b"}, %t: tensor<2x2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.batch_matmul %a, %b {transpose_lhs, transpose_rhs} : (tensor<2x3x2xf32>, tensor<1x2x3xf32>) -> tensor<2x2x2xf32>
      %1 = loom.mse %0, %t : tensor<2x2x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"linear", R"(func.func @main(%x: tensor<2x2x3xf32> {loom.param = "x"}, %w: tensor<4x3xf32> {loom.param = "w"}, %b: tensor<4xf32> {loom.param = "b"}, %t: tensor<2x2x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.linear %x, %w, %b {transpose_weight} : (tensor<2x2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x2x4xf32>
      %1 = loom.mse %0, %t : tensor<2x2x4xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"pow", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %c = loom.constant dense<3.0> : tensor<f32>
      %0 = loom.pow %a, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"max_min", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %b: tensor<3xf32> {loom.param = "b"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %c = loom.constant dense<0.1> : tensor<f32>
      %0 = loom.max %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = loom.min %0, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
      %2 = loom.min %b, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %3 = loom.add %1, %2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %4 = loom.mse %3, %t : tensor<2x3xf32> -> tensor<f32>
      return %4 : tensor<f32> })"},
    {"exp_log_sqrt", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.mul %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %1 = loom.sqrt %0 : tensor<2x3xf32>
      %2 = loom.exp %1 : tensor<2x3xf32>
      %3 = loom.log %2 : tensor<2x3xf32>
      %4 = loom.rsqrt %2 : tensor<2x3xf32>
      %5 = loom.add %3, %4 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %6 = loom.mse %5, %t : tensor<2x3xf32> -> tensor<f32>
      return %6 : tensor<f32> })"},
    {"neg_reciprocal_erf", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.neg %a : tensor<2x3xf32>
      %1 = loom.reciprocal %0 : tensor<2x3xf32>
      %2 = loom.erf %1 : tensor<2x3xf32>
      %3 = loom.mse %2, %t : tensor<2x3xf32> -> tensor<f32>
      return %3 : tensor<f32> })"},
    {"sin_cos", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.sin %a : tensor<2x3xf32>
      %1 = loom.cos %0 : tensor<2x3xf32>
      %2 = loom.mul %1, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %3 = loom.mse %2, %t : tensor<2x3xf32> -> tensor<f32>
      return %3 : tensor<f32> })"},
    {"select", R"(func.func @main(%a: tensor<2x3xf32> {loom.param = "a"}, %b: tensor<3xf32> {loom.param = "b"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %m = loom.constant dense<[[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]> : tensor<2x3xf32>
      %0 = loom.select %m, %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"reduce_sum_mean", R"(func.func @main(%a: tensor<2x3x2xf32> {loom.param = "a"}, %t: tensor<2x1x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.reduce_mean %a axes [1] {keep_dims} : tensor<2x3x2xf32> -> tensor<2x1x2xf32>
      %1 = loom.reduce_sum %a axes [1] : tensor<2x3x2xf32> -> tensor<2x2xf32>
      %2 = loom.reshape %1 [0, 1, 2] : tensor<2x2xf32> -> tensor<2x1x2xf32>
      %3 = loom.mul %0, %2 : (tensor<2x1x2xf32>, tensor<2x1x2xf32>) -> tensor<2x1x2xf32>
      %4 = loom.mse %3, %t : tensor<2x1x2xf32> -> tensor<f32>
      return %4 : tensor<f32> })"},
    {"reduce_max", R"(func.func @main(%a: tensor<2x3x2xf32> {loom.param = "a"}, %t: tensor<2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.reduce_max %a axes [1] : tensor<2x3x2xf32> -> tensor<2x2xf32>
      %1 = loom.reduce_max %a axes [0, 2] {keep_dims} : tensor<2x3x2xf32> -> tensor<1x3x1xf32>
      %2 = loom.reshape %1 [1, 3] : tensor<1x3x1xf32> -> tensor<1x3xf32>
      %3 = loom.slice %2 axes [1] starts [0] ends [2] steps [1] : tensor<1x3xf32> -> tensor<1x2xf32>
      %4 = loom.mul %0, %3 : (tensor<2x2xf32>, tensor<1x2xf32>) -> tensor<2x2xf32>
      %5 = loom.mse %4, %t : tensor<2x2xf32> -> tensor<f32>
      return %5 : tensor<f32> })"},
    {"transpose_expand", R"(func.func @main(%a: tensor<2x1x3xf32> {loom.param = "a"}, %t: tensor<3x4x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.expand %a [-1, 4, -1] : tensor<2x1x3xf32> -> tensor<2x4x3xf32>
      %1 = loom.transpose %0 [2, 1, 0] : tensor<2x4x3xf32> -> tensor<3x4x2xf32>
      %2 = loom.mse %1, %t : tensor<3x4x2xf32> -> tensor<f32>
      return %2 : tensor<f32> })"},
    {"slice_concat", R"(func.func @main(%a: tensor<2x5xf32> {loom.param = "a"}, %b: tensor<2x1xf32> {loom.param = "b"}, %t: tensor<2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.slice %a axes [1] starts [1] ends [5] steps [2] : tensor<2x5xf32> -> tensor<2x2xf32>
      %1 = loom.concat %0, %b axis 1 : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
      %2 = loom.mse %1, %t : tensor<2x3xf32> -> tensor<f32>
      return %2 : tensor<f32> })"},
    {"gather_embedding", R"(func.func @main(%e: tensor<5x3xf32> {loom.param = "e"}, %t: tensor<2x2x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %ids = loom.constant dense<[[1, 4], [1, 0]]> : tensor<2x2xi64>
      %0 = loom.gather %e, %ids axis 0 : (tensor<5x3xf32>, tensor<2x2xi64>) -> tensor<2x2x3xf32>
      %1 = loom.mse %0, %t : tensor<2x2x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"gather_elements", R"(func.func @main(%a: tensor<3x4xf32> {loom.param = "a"}, %t: tensor<3x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %ids = loom.constant dense<[[1, 1], [-1, 0], [2, 3]]> : tensor<3x2xi64>
      %0 = loom.gather_elements %a, %ids axis 1 : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
      %1 = loom.mse %0, %t : tensor<3x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"scatter_nd_none_add", R"(func.func @main(%a: tensor<3x4xf32> {loom.param = "a"}, %u: tensor<2x4xf32> {loom.param = "u"}, %t: tensor<3x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %ids = loom.constant dense<[[2], [0]]> : tensor<2x1xi64>
      %0 = loom.scatter_nd %a, %ids, %u {reduction = "none"} : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
      %1 = loom.scatter_nd %0, %ids, %u {reduction = "add"} : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
      %2 = loom.mul %1, %a : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
      %3 = loom.mse %2, %t : tensor<3x4xf32> -> tensor<f32>
      return %3 : tensor<f32> })"},
    {"gather_nd", R"(func.func @main(%a: tensor<3x4xf32> {loom.param = "a"}, %t: tensor<3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %ids = loom.constant dense<[[2, 1], [0, -1], [2, 1]]> : tensor<3x2xi64>
      %0 = loom.gather_nd %a, %ids : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3xf32>
      %1 = loom.mse %0, %t : tensor<3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"softmax", R"(func.func @main(%a: tensor<2x4xf32> {loom.param = "a"}, %t: tensor<2x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.softmax %a axis 1 : tensor<2x4xf32>
      %1 = loom.mse %0, %t : tensor<2x4xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"gelu_exact_and_tanh", R"(func.func @main(%a: tensor<2x4xf32> {loom.param = "a"}, %t: tensor<2x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.gelu %a : tensor<2x4xf32>
      %1 = loom.gelu %0 {approximate} : tensor<2x4xf32>
      %2 = loom.mse %1, %t : tensor<2x4xf32> -> tensor<f32>
      return %2 : tensor<f32> })"},
    {"layer_norm", R"(func.func @main(%x: tensor<2x2x4xf32> {loom.param = "x"}, %g: tensor<4xf32> {loom.param = "g"}, %b: tensor<4xf32> {loom.param = "b"}, %t: tensor<2x2x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.layer_norm %x, %g, %b axis 2 {epsilon = 1.0e-5 : f64} : (tensor<2x2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x2x4xf32>
      %1 = loom.mse %0, %t : tensor<2x2x4xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"rms_norm", R"(func.func @main(%x: tensor<2x2x4xf32> {loom.param = "x"}, %g: tensor<4xf32> {loom.param = "g"}, %t: tensor<2x2x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.rms_norm %x, %g axis 2 {epsilon = 1.0e-6 : f64} : (tensor<2x2x4xf32>, tensor<4xf32>) -> tensor<2x2x4xf32>
      %1 = loom.mse %0, %t : tensor<2x2x4xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"batch_norm", R"(func.func @main(%x: tensor<3x2x2x2xf32> {loom.param = "x"}, %g: tensor<2xf32> {loom.param = "g"}, %b: tensor<2xf32> {loom.param = "b"}, %t: tensor<3x2x2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.batch_norm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<3x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<3x2x2x2xf32>
      %1 = loom.mse %0, %t : tensor<3x2x2x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"conv2d", R"(func.func @main(%x: tensor<2x2x5x5xf32> {loom.param = "x"}, %w: tensor<4x1x3x3xf32> {loom.param = "w"}, %t: tensor<2x4x3x3xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.conv2d %x, %w strides [2, 2] pads [1, 1, 1, 1] dilations [1, 1] groups 2 : (tensor<2x2x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x3x3xf32>
      %1 = loom.mse %0, %t : tensor<2x4x3x3xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"conv2d_dilated", R"(func.func @main(%x: tensor<1x2x6x6xf32> {loom.param = "x"}, %w: tensor<3x2x2x2xf32> {loom.param = "w"}, %t: tensor<1x3x4x4xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.conv2d %x, %w strides [1, 1] pads [0, 0, 0, 0] dilations [2, 2] groups 1 : (tensor<1x2x6x6xf32>, tensor<3x2x2x2xf32>) -> tensor<1x3x4x4xf32>
      %1 = loom.mse %0, %t : tensor<1x3x4x4xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"attention_causal", R"(func.func @main(%q: tensor<1x2x3x4xf32> {loom.param = "q"}, %k: tensor<1x2x3x4xf32> {loom.param = "k"}, %v: tensor<1x2x3x2xf32> {loom.param = "v"}, %t: tensor<1x2x3x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.attention %q, %k, %v {causal, scale = 0.5 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32>
      %1 = loom.mse %0, %t : tensor<1x2x3x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"attention_full", R"(func.func @main(%q: tensor<2x2x4xf32> {loom.param = "q"}, %k: tensor<2x3x4xf32> {loom.param = "k"}, %v: tensor<2x3x2xf32> {loom.param = "v"}, %t: tensor<2x2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.attention %q, %k, %v {scale = 0.7 : f64} : (tensor<2x2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x2xf32>) -> tensor<2x2x2xf32>
      %1 = loom.mse %0, %t : tensor<2x2x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })"},
    {"max_pool2d", R"(func.func @main(%x: tensor<1x2x4x4xf32> {loom.param = "x"}, %t: tensor<1x2x2x2xf32> {loom.target}) -> (tensor<f32> {loom.loss}) {
      %0 = loom.max_pool2d %x kernel [3, 3] strides [2, 2] pads [1, 1, 1, 1] : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
      %1 = loom.mse %0, %t : tensor<1x2x2x2xf32> -> tensor<f32>
      return %1 : tensor<f32> })", /*distinct=*/true},
};

INSTANTIATE_TEST_SUITE_P(
    EveryOp, GradientCheck, ::testing::ValuesIn(kCases),
    [](const ::testing::TestParamInfo<GradCase> &info) {
      return std::string(info.param.name);
    });

} // namespace
