//===- RaiseNumericsTest.cpp - Raised ops compute what they replace -------===//
//
// For every pattern of the raising passes: take the decomposed forward IR as
// the importer writes it, emit a plan of it as is and one after the
// `loom-raise` pipeline (checking that the fused op did appear), run both on
// the CPU runtime with the same random inputs and compare the outputs
// (relative 1e-5, plus 1e-6 absolute for values that cross zero).
//
//===----------------------------------------------------------------------===//

#include "RunForward.h"
#include "emit/PlanEmitter.h"
#include "ir/EntryFunction.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
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

struct RaiseCase {
  const char *name;
  /// The op the raise must produce (e.g. `loom.gelu`), `count` times.
  const char *fusedOp;
  const char *mlir; // @main(inputs...) -> (y)
  int count = 1;
};

void PrintTo(const RaiseCase &c, std::ostream *os) { *os << c.name; }

class RaiseNumerics : public ::testing::TestWithParam<RaiseCase> {
protected:
  RaiseNumerics() {
    DialectRegistry registry;
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Runs the forward plan of `module` on `inputs`; returns output "y".
  std::vector<float> run(ModuleOp module,
                         const std::map<std::string, rt::HostTensor> &inputs) {
    auto outputs = ::loom::test::runForward(module, inputs);
    EXPECT_TRUE(outputs.count("y"));
    return outputs.count("y") ? outputs["y"].toF32() : std::vector<float>();
  }

  MLIRContext ctx;
};

TEST_P(RaiseNumerics, FusedMatchesDecomposed) {
  const RaiseCase &c = GetParam();
  OwningOpRef<ModuleOp> decomposed = parseSourceString<ModuleOp>(c.mlir, &ctx);
  ASSERT_TRUE(decomposed);
  OwningOpRef<ModuleOp> raised = decomposed->clone();

  PassManager pm(&ctx);
  buildLoomRaisePipeline(pm);
  ASSERT_TRUE(succeeded(pm.run(*raised)));
  int fused = 0;
  raised->walk([&](Operation *op) {
    if (op->getName().getStringRef() == c.fusedOp)
      ++fused;
  });
  ASSERT_EQ(fused, c.count)
      << c.name << ": expected " << c.fusedOp << " after loom-raise";

  // Random inputs in [-2, 2] for every argument.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  std::map<std::string, rt::HostTensor> inputs;
  auto func = lookupEntryFunction(*decomposed);
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  mlir::loom::attr::kInput);
    ASSERT_TRUE(name) << "every argument must be a loom.input";
    std::vector<float> v(type.getNumElements());
    for (float &x : v)
      x = uni(rng);
    inputs[name.str()] = rt::HostTensor::fromF32(
        std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
        v);
  }

  std::vector<float> want = run(*decomposed, inputs);
  std::vector<float> got = run(*raised, inputs);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  // Fused and decomposed ops round differently in f32 (a few ulps: ~1e-7
  // relative for these order-1 outputs); 1e-5 leaves a factor 10 or more.
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 + 1e-5 * std::fabs(want[i]))
        << c.name << ": y[" << i << "]";
}

const RaiseCase kCases[] = {
    {"gelu_exact", "loom.gelu", R"(
func.func @main(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<1.41421354> : tensor<f32>
  %1 = loom.div %arg0, %0 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %2 = loom.erf %1 : tensor<2x4x8xf32>
  %3 = loom.constant dense<1.000000e+00> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %5 = loom.mul %arg0, %4 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %6 = loom.constant dense<5.000000e-01> : tensor<f32>
  %7 = loom.mul %5, %6 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  return %7 : tensor<2x4x8xf32>
})"},
    {"gelu_tanh_torch", "loom.gelu", R"(
func.func @main(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.mul %arg0, %arg0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %1 = loom.mul %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %2 = loom.constant dense<4.471500e-02> : tensor<f32>
  %3 = loom.mul %2, %1 : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %4 = loom.add %arg0, %3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %5 = loom.constant dense<0.797884583> : tensor<f32>
  %6 = loom.mul %5, %4 : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %7 = loom.tanh %6 : tensor<2x4x8xf32>
  %8 = loom.constant dense<1.000000e+00> : tensor<f32>
  %9 = loom.add %8, %7 : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %10 = loom.mul %arg0, %9 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %11 = loom.constant dense<5.000000e-01> : tensor<f32>
  %12 = loom.mul %11, %10 : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %12 : tensor<2x4x8xf32>
})"},
    {"gelu_new_pow", "loom.gelu", R"(
func.func @main(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<5.000000e-01> : tensor<f32>
  %1 = loom.mul %arg0, %0 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %2 = loom.constant dense<3.000000e+00> : tensor<f32>
  %3 = loom.pow %arg0, %2 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %4 = loom.constant dense<4.471500e-02> : tensor<f32>
  %5 = loom.mul %3, %4 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %6 = loom.add %arg0, %5 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %7 = loom.constant dense<0.797884583> : tensor<f32>
  %8 = loom.mul %6, %7 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %9 = loom.tanh %8 : tensor<2x4x8xf32>
  %10 = loom.constant dense<1.000000e+00> : tensor<f32>
  %11 = loom.add %9, %10 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %12 = loom.mul %1, %11 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %12 : tensor<2x4x8xf32>
})"},
    {"layer_norm_affine", "loom.layer_norm", R"(
func.func @main(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.input = "g"}, %arg2: tensor<8xf32> {loom.input = "b"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %2 = loom.constant dense<2.000000e+00> : tensor<f32>
  %3 = loom.pow %1, %2 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %4 = loom.reduce_mean %3 axes [2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %5 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %7 = loom.sqrt %6 : tensor<2x4x1xf32>
  %8 = loom.div %1, %7 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %9 = loom.mul %8, %arg1 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %10 = loom.add %9, %arg2 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %10 : tensor<2x4x8xf32>
})"},
    {"layer_norm_two_axes_reciprocal", "loom.layer_norm", R"(
func.func @main(%arg0: tensor<2x4x8xf32> {loom.input = "x"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.reduce_mean %arg0 axes [1, 2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
  %1 = loom.sub %arg0, %0 : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %2 = loom.mul %1, %1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %3 = loom.reduce_mean %2 axes [1, 2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
  %4 = loom.constant dense<1.000000e-03> : tensor<f32>
  %5 = loom.add %4, %3 : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %6 = loom.sqrt %5 : tensor<2x1x1xf32>
  %7 = loom.reciprocal %6 : tensor<2x1x1xf32>
  %8 = loom.mul %7, %1 : (tensor<2x1x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %8 : tensor<2x4x8xf32>
})"},
    {"rms_norm_llama", "loom.rms_norm", R"(
func.func @main(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<8xf32> {loom.input = "weight"}) -> (tensor<2x4x8xf32> {loom.output = "y"}) {
  %0 = loom.constant dense<2.000000e+00> : tensor<f32>
  %1 = loom.pow %arg0, %0 : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %2 = loom.reduce_mean %1 axes [2] {keep_dims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %3 = loom.constant dense<9.99999997E-7> : tensor<f32>
  %4 = loom.add %2, %3 : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %5 = loom.sqrt %4 : tensor<2x4x1xf32>
  %6 = loom.constant dense<1.000000e+00> : tensor<f32>
  %7 = loom.div %6, %5 : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %8 = loom.mul %arg0, %7 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %9 = loom.mul %arg1, %8 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %9 : tensor<2x4x8xf32>
})"},
    {"rms_norm_rsqrt_no_weight", "loom.rms_norm", R"(
func.func @main(%arg0: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.mul %arg0, %arg0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = loom.reduce_mean %0 axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %2 = loom.constant dense<9.99999974E-6> : tensor<f32>
  %3 = loom.add %2, %1 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %4 = loom.rsqrt %3 : tensor<4x1xf32>
  %5 = loom.mul %4, %arg0 : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %5 : tensor<4x8xf32>
})"},
    {"linear_3d", "loom.linear", R"(
func.func @main(%arg0: tensor<2x4x8xf32> {loom.input = "x"}, %arg1: tensor<6xf32> {loom.input = "bias"}, %arg2: tensor<8x6xf32> {loom.input = "w"}) -> (tensor<2x4x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg2 : (tensor<2x4x8xf32>, tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %1 = loom.add %arg1, %0 : (tensor<6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %1 : tensor<2x4x6xf32>
})"},
    {"linear_gemm_bias_1xn", "loom.linear", R"(
func.func @main(%arg0: tensor<3x8xf32> {loom.input = "x"}, %arg1: tensor<6x8xf32> {loom.input = "w"}, %arg2: tensor<1x6xf32> {loom.input = "bias"}) -> (tensor<3x6xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg1 {transpose_rhs} : (tensor<3x8xf32>, tensor<6x8xf32>) -> tensor<3x6xf32>
  %1 = loom.add %0, %arg2 : (tensor<3x6xf32>, tensor<1x6xf32>) -> tensor<3x6xf32>
  return %1 : tensor<3x6xf32>
})"},
    {"mlp_block", "loom.linear", R"(
func.func @main(%arg0: tensor<4x8xf32> {loom.input = "x"}, %arg1: tensor<16x8xf32> {loom.input = "w1"}, %arg2: tensor<16xf32> {loom.input = "b1"}, %arg3: tensor<16x8xf32> {loom.input = "w2"}, %arg4: tensor<8xf32> {loom.input = "b2"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
  %0 = loom.matmul %arg0, %arg1 {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = loom.add %0, %arg2 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = loom.constant dense<1.41421354> : tensor<f32>
  %3 = loom.div %1, %2 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %4 = loom.erf %3 : tensor<4x16xf32>
  %5 = loom.constant dense<1.000000e+00> : tensor<f32>
  %6 = loom.add %4, %5 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %7 = loom.mul %1, %6 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %8 = loom.constant dense<5.000000e-01> : tensor<f32>
  %9 = loom.mul %7, %8 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %10 = loom.matmul %9, %arg3 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %11 = loom.add %10, %arg4 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %11 : tensor<4x8xf32>
})",
     2},
};

INSTANTIATE_TEST_SUITE_P(EveryPattern, RaiseNumerics,
                         ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<RaiseCase> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
