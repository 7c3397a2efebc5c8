//===- VerifyPlanTest.cpp - A plan's run beside its one-device program ---===//
//
// A data-parallel plan of two linear layers (the batch split, gradients
// all-reduced) trains beside its one-device program and matches it; a
// reference that differs (another learning rate, so the second step's loss
// differs) is caught at that step. test/e2e/sharding_parity.sh runs it on
// every tp and ZeRO plan through loomc --verify-plan.
//
//===----------------------------------------------------------------------===//

#include "emit/PlanEmitter.h"
#include "ir/LoomDialect.h"
#include "passes/Passes.h"
#include "runtime/driver/Verify.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "TestModels.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;
using ::loom::runtime::verifyPlans;
using mlir::loom::test::kTwoLinears;
using ::loom::runtime::VerifyResult;
using ::loom::runtime::VerifyRunOptions;

namespace {


/// The plan of kTwoLinears on `devices` CPU ranks as tp = `tp`, trained
/// with SGD at `lr`; its weights come from their init rules.
FailureOr<::loom::plan::Plan> planOf(int64_t devices, int64_t tp, double lr) {
  DialectRegistry registry;
  registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kTwoLinears, &ctx);
  if (!module)
    return failure();
  PassManager pm(&ctx);
  TrainPipelineOptions train;
  train.optimizer = OptimizerKind::Sgd;
  train.lr = lr;
  buildLoomTrainPipeline(pm, train);
  PlanPipelineOptions plan;
  plan.devices = devices;
  plan.tp = tp;
  plan.cluster = "cpu:" + std::to_string(devices);
  buildLoomPlanPipeline(pm, plan);
  if (failed(pm.run(*module)))
    return failure();
  EmitOptions options;
  options.modelPath = "/m.onnx";
  options.storedWeights = false;
  options.training.set_optimizer("sgd");
  options.training.set_lr(lr);
  options.training.set_global_batch(8);
  options.training.set_micro_batch(8 / (devices / tp));
  options.training.set_num_micro_batches(1);
  return emitPlan(*module, options);
}

VerifyRunOptions randomWeights() {
  VerifyRunOptions options;
  options.init.random = true;
  options.init.seed = 1;
  return options;
}

TEST(VerifyPlanTest, DataParallelPlanMatchesOneDevice) {
  FailureOr<::loom::plan::Plan> plan = planOf(2, 1, 0.1);
  FailureOr<::loom::plan::Plan> reference = planOf(1, 1, 0.1);
  ASSERT_TRUE(succeeded(plan) && succeeded(reference));
  auto report = verifyPlans(*plan, *reference, randomWeights());
  ASSERT_TRUE(report.isOk()) << report.status().message();
  EXPECT_EQ(report->verdict, VerifyResult::Matches) << report->message;
  EXPECT_NE(report->message.find("3 steps on 2 CPU ranks match"),
            std::string::npos)
      << report->message;
}

TEST(VerifyPlanTest, ALossThatDiffersIsCaughtAtItsStep) {
  FailureOr<::loom::plan::Plan> plan = planOf(2, 2, 0.1);
  FailureOr<::loom::plan::Plan> reference = planOf(1, 1, 0.5);
  ASSERT_TRUE(succeeded(plan) && succeeded(reference));
  auto report = verifyPlans(*plan, *reference, randomWeights());
  ASSERT_TRUE(report.isOk()) << report.status().message();
  EXPECT_EQ(report->verdict, VerifyResult::Differs);
  EXPECT_NE(report->message.find("step 2's loss is"), std::string::npos)
      << report->message;
}

} // namespace
