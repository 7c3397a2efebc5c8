//===- PlanCostTest.cpp - The lowered step as the planner's request -------===//

#include "compiler/PlanCost.h"
#include "ir/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;

namespace {

class PlanCostTest : public ::testing::Test {
protected:
  PlanCostTest() {
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// The FLOPs of each op of `@main` in `source`, in order.
  std::vector<double> flopsOf(llvm::StringRef source) {
    module = parseSourceString<ModuleOp>(source, &ctx);
    EXPECT_TRUE(module);
    std::vector<double> flops;
    if (!module)
      return flops;
    auto func = module->lookupSymbol<func::FuncOp>("main");
    for (Operation &op : func.getBody().front())
      if (!isa<func::ReturnOp>(op))
        flops.push_back(contractionFlops(&op));
    return flops;
  }

  DialectRegistry registry;
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

TEST_F(PlanCostTest, GemmFlopsOfEveryGemmOp) {
  std::vector<double> flops = flopsOf(R"(
func.func @main(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>,
                %y: tensor<2x8x32xf32>, %l: tensor<3x5x7xf32>, %r: tensor<3x5x4xf32>) {
  %0 = loom.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %1 = loom.linear %x, %w, %b : (tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %2 = loom.matmul %x, %y {transpose_lhs} : (tensor<2x8x16xf32>, tensor<2x8x32xf32>) -> tensor<16x32xf32>
  %3 = loom.batch_matmul %l, %r {transpose_lhs} : (tensor<3x5x7xf32>, tensor<3x5x4xf32>) -> tensor<3x7x4xf32>
  %4 = loom.relu %x : tensor<2x8x16xf32>
  return
}
)");
  ASSERT_EQ(flops.size(), 5u);
  EXPECT_EQ(flops[0], 2.0 * 2 * 8 * 32 * 16);
  EXPECT_EQ(flops[1], 2.0 * 2 * 8 * 32 * 16);
  // dW = x^T dy: the contraction runs over the 16 flattened rows of x.
  EXPECT_EQ(flops[2], 2.0 * 16 * 32 * 16);
  EXPECT_EQ(flops[3], 2.0 * 3 * 7 * 4 * 5);
  EXPECT_EQ(flops[4], 0);
}

TEST_F(PlanCostTest, AttentionFlopsHalveWhenCausal) {
  // [batch 2, heads 3, S 64, D 16]: S = Q K^T and P V forward; the gradient
  // recomputes S and forms dV, dP, dQ and dK.
  std::vector<double> flops = flopsOf(R"(
func.func @main(%q: tensor<2x3x64x16xf32>, %k: tensor<2x3x64x16xf32>, %v: tensor<2x3x64x16xf32>) {
  %o = loom.attention %q, %k, %v {scale = 2.500000e-01 : f64} : (tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>) -> tensor<2x3x64x16xf32>
  %g:3 = loom.attention_grad %o, %q, %k, %v {scale = 2.500000e-01 : f64} : (tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>) -> (tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>)
  %c = loom.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64} : (tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>) -> tensor<2x3x64x16xf32>
  %cg:3 = loom.attention_grad %o, %q, %k, %v {causal, scale = 2.500000e-01 : f64} : (tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>) -> (tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>, tensor<2x3x64x16xf32>)
  return
}
)");
  ASSERT_EQ(flops.size(), 4u);
  double pairs = 2.0 * 3 * 64 * 64;
  EXPECT_EQ(flops[0], 2 * pairs * (16 + 16));
  EXPECT_EQ(flops[1], 2 * pairs * (3 * 16 + 2 * 16));
  EXPECT_EQ(flops[2], pairs * (16 + 16));
  EXPECT_EQ(flops[3], pairs * (3 * 16 + 2 * 16));
}

TEST_F(PlanCostTest, ConvFlopsAndBothGradients) {
  // 2 images, 3 -> 4 channels, 8x8 with a padded 3x3 filter: each of the
  // 2*4*8*8 outputs takes 3*3*3 multiply-adds, and so do both gradients.
  std::vector<double> flops = flopsOf(R"(
func.func @main(%x: tensor<2x3x8x8xf32>, %f: tensor<4x3x3x3xf32>, %g: tensor<2x4x8x8xf32>) {
  %y = loom.conv2d %x, %f strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %dx = loom.conv2d_grad_input %g, %f, %x strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %df = loom.conv2d_grad_filter %g, %x, %f strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 : (tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32>
  return
}
)");
  ASSERT_EQ(flops.size(), 3u);
  double expected = 2.0 * (2 * 4 * 8 * 8) * (3 * 3 * 3);
  EXPECT_EQ(flops[0], expected);
  EXPECT_EQ(flops[1], expected);
  EXPECT_EQ(flops[2], expected);
}

/// The CPU kernels' records of a convolution and its two gradients over
/// `images` NCHW images of 3 x `side` x `side` (4 filters of 3 x 3, padded
/// by 1), and the device's records of the same ops.
static std::pair<planner::StepRequest, planner::StepRequest>
convolutionRecords(MLIRContext &ctx, OwningOpRef<ModuleOp> &module, int images,
                   int side) {
  std::string x = "tensor<" + std::to_string(images) + "x3x" +
                  std::to_string(side) + "x" + std::to_string(side) + "xf32>";
  std::string g = "tensor<" + std::to_string(images) + "x4x" +
                  std::to_string(side) + "x" + std::to_string(side) + "xf32>";
  std::string f = "tensor<4x3x3x3xf32>";
  std::string attrs =
      " strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 : ";
  std::string text =
      "func.func @main(%x: " + x + ", %f: " + f + ", %g: " + g + ") {\n" +
      "  %y = loom.conv2d %x, %f" + attrs + "(" + x + ", " + f + ") -> " + g +
      "\n  %dx = loom.conv2d_grad_input %g, %f, %x" + attrs + "(" + g + ", " +
      f + ", " + x + ") -> " + x +
      "\n  %df = loom.conv2d_grad_filter %g, %x, %f" + attrs + "(" + g + ", " +
      x + ", " + f + ") -> " + f + "\n  return\n}\n";
  module = parseSourceString<ModuleOp>(text, &ctx);
  if (!module)
    return {};
  return {stepRequestOf(*module, planner::Precision::Fp32,
                        /*hostKernels=*/true),
          stepRequestOf(*module, planner::Precision::Fp32)};
}

static std::vector<double> productShape(const planner::OpRecord &r) {
  return {r.gemmM, r.gemmN, r.gemmK};
}

TEST_F(PlanCostTest, HostConvolutionsRunAProductAnImage) {
  // 5 images of 8 x 8: 320 columns, more than one stacked product takes.
  // The CPU kernels run one product an image: [4 x 27] by [27 x 64] for
  // the convolution, [27 x 4] by [4 x 64] for its input's gradient and
  // [4 x 64] by [64 x 27] for its filter's; the filter (432 B) passes
  // through memory once an image (its gradient twice), and im2col's
  // columns (27 x 64 floats) are written and read an image.
  auto [host, device] = convolutionRecords(ctx, module, 5, 8);
  ASSERT_TRUE(module);
  ASSERT_EQ(host.ops.size(), 3u);
  ASSERT_EQ(device.ops.size(), 3u);
  EXPECT_EQ(productShape(host.ops[0]), (std::vector<double>{4, 64, 27}));
  EXPECT_EQ(productShape(host.ops[1]), (std::vector<double>{27, 64, 4}));
  EXPECT_EQ(productShape(host.ops[2]), (std::vector<double>{4, 27, 64}));
  double filter = 4 * 27 * 4, columns = 2 * 5 * 27 * 64 * 4;
  EXPECT_EQ(host.ops[0].bytes, device.ops[0].bytes + 4 * filter + columns);
  EXPECT_EQ(host.ops[1].bytes, device.ops[1].bytes + 4 * filter + columns);
  EXPECT_EQ(host.ops[2].bytes, device.ops[2].bytes + 9 * filter + columns);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(host.ops[i].flops, device.ops[i].flops);
  EXPECT_EQ(host.ops[0].kind, "conv2d");
}

TEST_F(PlanCostTest, HostConvolutionsOfSmallImagesRunOneProduct) {
  // 2 images of 2 x 2: 8 columns, stacked side by side into one product
  // (runtime/ConvLayout.h): [4 x 27] by [27 x 8], [27 x 4] by [4 x 8] and
  // [4 x 8] by [8 x 27]. The filter passes once; the stacked columns
  // (27 x 8 floats) and the stacked output (4 x 8) are written and read.
  auto [host, device] = convolutionRecords(ctx, module, 2, 2);
  ASSERT_TRUE(module);
  ASSERT_EQ(host.ops.size(), 3u);
  EXPECT_EQ(productShape(host.ops[0]), (std::vector<double>{4, 8, 27}));
  EXPECT_EQ(productShape(host.ops[1]), (std::vector<double>{27, 8, 4}));
  EXPECT_EQ(productShape(host.ops[2]), (std::vector<double>{4, 27, 8}));
  double stacked = 2 * (27 + 4) * 8 * 4;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(host.ops[i].bytes, device.ops[i].bytes + stacked);
    EXPECT_EQ(host.ops[i].flops, device.ops[i].flops);
  }
}

TEST_F(PlanCostTest, BroadcastingElementwiseOpsAreMarked) {
  module = parseSourceString<ModuleOp>(R"(
func.func @main(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>) {
  %0 = loom.mul %a, %b : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %1 = loom.sub %0, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
)",
                                       &ctx);
  ASSERT_TRUE(module);
  planner::StepRequest request =
      stepRequestOf(*module, planner::Precision::Fp32, /*hostKernels=*/true);
  ASSERT_EQ(request.ops.size(), 2u);
  EXPECT_TRUE(request.ops[0].broadcast);
  EXPECT_FALSE(request.ops[1].broadcast);
}

TEST_F(PlanCostTest, RequestHasOpsCollectivesAndMesh) {
  module = parseSourceString<ModuleOp>(R"(
shard.grid @mesh(shape = 1x4x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
func.func @main(%x: tensor<8x4xbf16>, %g: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = loom.relu %x : tensor<8x4xbf16>
  %1 = loom.reshape %0 [32] : tensor<8x4xbf16> -> tensor<32xbf16>
  %2 = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %2 : tensor<4x4xf32>
}
)",
                                       &ctx);
  ASSERT_TRUE(module);
  planner::StepRequest request =
      stepRequestOf(*module, planner::Precision::Bf16);
  // The reshape is a view and runs nothing.
  ASSERT_EQ(request.ops.size(), 1u);
  EXPECT_EQ(request.ops[0].bytes, 2.0 * 8 * 4 * 2); // bf16 in and out
  EXPECT_EQ(request.ops[0].precision, planner::Precision::Bf16);
  ASSERT_EQ(request.collectives.size(), 1u);
  EXPECT_EQ(request.collectives[0].kind, planner::CollectiveKind::AllReduce);
  EXPECT_EQ(request.collectives[0].bytes, 4.0 * 4 * 4);
  ASSERT_EQ(request.collectives[0].axes.size(), 1u);
  EXPECT_EQ(request.collectives[0].axes[0], 1u);

  auto cluster = parseCluster("h100:2x2");
  ASSERT_TRUE(static_cast<bool>(cluster));
  planner::MeshTopology mesh = meshTopologyOf(*module, *cluster);
  ASSERT_EQ(mesh.axes().size(), 3u);
  EXPECT_EQ(mesh.axes()[1].name, "dp");
  // dp = 4 over nodes of 2 devices: the ring crosses nodes.
  planner::AxisGroup dp = mesh.group(1);
  EXPECT_EQ(dp.size, 4);
  EXPECT_EQ(dp.level, LinkLevel::InterNode);
}

} // namespace
