//===- PlanEmitterTest.cpp - Lowered IR to plans --------------------------===//

#include "emit/PlanEmitter.h"
#include "ir/LoomDialect.h"
#include "passes/Passes.h"
#include "runtime/Plan.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "TestModels.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <map>
#include <set>

using namespace mlir;
using namespace mlir::loom;
using mlir::loom::test::kTwoLinears;

namespace {

class PlanEmitterTest : public ::testing::Test {
protected:
  PlanEmitterTest() {
    registry.insert<LoomDialect, func::FuncDialect, shard::ShardDialect,
                    tensor::TensorDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Parses `forward`, builds the training step and partitions it over
  /// `devices` ranks.
  OwningOpRef<ModuleOp> trainStep(llvm::StringRef forward, int64_t devices,
                                  int64_t tp = 1, int64_t zero = 0,
                                  Precision precision = Precision::Fp32,
                                  int64_t blockBucketBytes = 0) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(forward, &ctx);
    if (!module)
      return nullptr;
    PassManager pm(&ctx);
    TrainPipelineOptions train;
    train.precision = precision;
    buildLoomTrainPipeline(pm, train);
    PlanPipelineOptions plan;
    plan.devices = devices;
    plan.tp = tp;
    plan.zero = zero;
    plan.cluster = "cpu:" + std::to_string(devices);
    plan.blockBucketBytes = blockBucketBytes;
    buildLoomPlanPipeline(pm, plan);
    if (failed(pm.run(*module)))
      return nullptr;
    return module;
  }

  DialectRegistry registry;
  MLIRContext ctx;
};

constexpr llvm::StringLiteral kMlp = R"(
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %w: tensor<3x4xf32> {loom.param = "w"},
                %b: tensor<3xf32> {loom.param = "b"}) -> (tensor<8x3xf32> {loom.output = "y"}) {
  %0 = loom.matmul %x, %w {transpose_rhs} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %1 = loom.add %0, %b : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %2 = loom.tanh %1 : tensor<8x3xf32>
  return %2 : tensor<8x3xf32>
}
)";

const ::loom::plan::Buffer *findBuffer(const ::loom::plan::Program &p,
                                       ::loom::plan::Role role,
                                       llvm::StringRef binding,
                                       llvm::StringRef state = "") {
  for (const ::loom::plan::Buffer &b : p.buffers())
    if (b.role() == role && b.binding() == binding && b.state() == state)
      return &b;
  return nullptr;
}

constexpr llvm::StringLiteral kNormLinear = R"(
func.func @main(%x: tensor<8x4xf32> {loom.input = "x"}, %g: tensor<4xf32> {loom.param = "g"},
                %beta: tensor<4xf32> {loom.param = "beta"}, %w: tensor<4x3xf32> {loom.param = "w"},
                %b: tensor<3xf32> {loom.param = "b"}, %s: tensor<3xf32> {loom.param = "s"})
    -> (tensor<8x3xf32> {loom.output = "y"}) {
  %0 = loom.layer_norm %x, %g, %beta axis 1 {epsilon = 1.0e-05 : f64} : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %1 = loom.linear %0, %w, %b : (tensor<8x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %2 = loom.mul %1, %s : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  return %2 : tensor<8x3xf32>
}
)";

/// The plan of a step at global batch 8, checked against the plan format.
FailureOr<::loom::plan::Plan> validPlan(ModuleOp module,
                                        MemoryBreakdown &memory) {
  EmitOptions options;
  options.modelPath = "/m.onnx";
  FailureOr<::loom::plan::Plan> plan = emitPlan(module, options, &memory);
  if (failed(plan))
    return failure();
  plan->mutable_training()->set_global_batch(8);
  ::loom::runtime::Status valid = ::loom::runtime::validatePlan(*plan, "p");
  EXPECT_TRUE(valid.isOk()) << valid.message();
  return plan;
}

TEST_F(PlanEmitterTest, TensorParallelBuffersCarryTheirSplit) {
  // dp = 2 x tp = 2: whatever the ILP splits, each parameter and optimizer
  // state buffer holds its block: the global shape is the local one times
  // the ranks of each dimension's axes, a state is split as its parameter,
  // and only tp (mesh axis 2) splits them.
  OwningOpRef<ModuleOp> module = trainStep(kTwoLinears, 4, 2);
  ASSERT_TRUE(module);
  MemoryBreakdown memory;
  FailureOr<::loom::plan::Plan> plan = validPlan(*module, memory);
  ASSERT_TRUE(succeeded(plan));
  // The trained elements are counted whole, not per rank.
  EXPECT_EQ(memory.numParameters, 64 * 128 + 128 + 128 * 64 + 64);
  const ::loom::plan::Program &p = plan->programs(0);
  std::map<std::string, std::vector<std::vector<int32_t>>> splitOf;
  int split = 0;
  for (const ::loom::plan::Buffer &b : p.buffers()) {
    if (b.role() != ::loom::plan::PARAMETER &&
        b.role() != ::loom::plan::OPTIMIZER_STATE)
      continue;
    ASSERT_EQ(b.global_shape_size(), b.shape_size()) << b.name();
    std::vector<std::vector<int32_t>> axes(b.shape_size());
    for (int d = 0; d < b.shape_size(); ++d) {
      int64_t n = 1;
      if (d < b.dim_shardings_size())
        for (int32_t axis : b.dim_shardings(d).axes()) {
          EXPECT_EQ(axis, 2) << b.name() << " dim " << d;
          axes[d].push_back(axis);
          n *= 2;
        }
      EXPECT_EQ(b.global_shape(d), b.shape(d) * n) << b.name() << " dim " << d;
    }
    if (b.role() == ::loom::plan::PARAMETER) {
      splitOf[b.binding()] = axes;
      split += b.dim_shardings_size() > 0;
    }
  }
  EXPECT_GT(split, 0) << "the ILP split no parameter over tp";
  for (const ::loom::plan::Buffer &b : p.buffers())
    if (b.role() == ::loom::plan::OPTIMIZER_STATE) {
      std::vector<std::vector<int32_t>> axes(b.shape_size());
      for (int d = 0; d < b.dim_shardings_size(); ++d)
        axes[d].assign(b.dim_shardings(d).axes().begin(),
                       b.dim_shardings(d).axes().end());
      EXPECT_EQ(axes, splitOf[b.binding()]) << b.name();
    }
  // The gradients are summed over dp (axis 1), alone or in buckets.
  bool dpSum = false;
  for (const ::loom::plan::Instruction &inst : p.instructions())
    if (inst.op() == "all_reduce" || inst.op() == "all_reduce_start") {
      const auto &axes = inst.attrs().at("axes").ints().values();
      dpSum |= std::vector<int64_t>(axes.begin(), axes.end()) ==
               std::vector<int64_t>{1};
    }
  EXPECT_TRUE(dpSum);
}

TEST_F(PlanEmitterTest, ZeroStagesHoldTheirClosedFormBytes) {
  // ZeRO's per-rank bytes for Psi parameters over N = dp ranks, with f32
  // parameters, gradients and AdamW state (also under bf16, whose masters
  // are f32): P = 4 Psi, G = 4 Psi and O = 8 Psi, each divided by N from
  // stage 3, 2 and 1 on. Every tensor of the MLP divides by 4. The same
  // with ZeRO's reduce-scatters and gathers in buckets.
  const double psi = 64 * 128 + 128 + 128 * 64 + 64, n = 4;
  for (Precision precision : {Precision::Fp32, Precision::Bf16}) {
    // Arena bytes by stage, with the ZeRO collectives blocking and in
    // buckets; the buckets' staging bytes.
    std::map<int64_t, int64_t> arena, bucketed, staging;
    for (int64_t zero = 0; zero <= 3; ++zero)
      for (bool buckets : {false, true}) {
        SCOPED_TRACE("zero " + std::to_string(zero) +
                     (precision == Precision::Bf16 ? " bf16" : " fp32") +
                     (buckets ? " in buckets" : ""));
        OwningOpRef<ModuleOp> module =
            trainStep(kTwoLinears, 4, 1, zero, precision, buckets ? 0 : -1);
        ASSERT_TRUE(module);
        MemoryBreakdown memory;
        FailureOr<::loom::plan::Plan> plan = validPlan(*module, memory);
        ASSERT_TRUE(succeeded(plan));
        // What the runtime allocates for them: the plan's buffers by role.
        double params = 0, states = 0;
        for (const ::loom::plan::Buffer &b : plan->programs(0).buffers()) {
          if (b.role() == ::loom::plan::PARAMETER)
            params += b.size_bytes();
          if (b.role() == ::loom::plan::OPTIMIZER_STATE)
            states += b.size_bytes();
          llvm::StringRef name = b.name();
          if (name.starts_with("bucket ") &&
              (name.ends_with(" send") || name.ends_with(" recv")))
            staging[zero] += b.size_bytes();
        }
        EXPECT_EQ(params, 4 * psi / (zero >= 3 ? n : 1));
        EXPECT_EQ(memory.parameters, params);
        EXPECT_EQ(memory.gradients, 4 * psi / (zero >= 2 ? n : 1));
        EXPECT_EQ(states, 8 * psi / (zero >= 1 ? n : 1));
        EXPECT_EQ(memory.optimizerState, states);
        EXPECT_EQ(memory.numParameters, psi);
        (buckets ? bucketed : arena)[zero] = plan->programs(0).arena_bytes();
      }
    // Each stage's arena is smaller than the one before.
    for (int64_t zero = 1; zero <= 3; ++zero)
      EXPECT_LT(arena[zero], arena[zero - 1]) << "zero " << zero;
    // Buckets cost at most their staging buffers (here one bucket of the
    // whole model: its 64 KiB floor; a real model's is the link's, at most
    // 25 MiB), and none without ZeRO's collectives.
    EXPECT_EQ(bucketed[0], arena[0]);
    for (int64_t zero = 1; zero <= 3; ++zero) {
      EXPECT_GT(staging[zero], 0) << "zero " << zero;
      EXPECT_LE(bucketed[zero], arena[zero] + staging[zero]) << "zero " << zero;
    }
  }
}

TEST_F(PlanEmitterTest, InitRulesWithoutStoredWeights) {
  // On one device, and as ZeRO-3 shards on two, each gathered (in a
  // prefetched bucket) before its use.
  for (int64_t devices : {1, 2}) {
    SCOPED_TRACE(devices);
    OwningOpRef<ModuleOp> module =
        trainStep(kNormLinear, devices, 1, devices > 1 ? 3 : 0);
    ASSERT_TRUE(module);
    EmitOptions options;
    options.storedWeights = false;
    FailureOr<::loom::plan::Plan> plan = emitPlan(*module, options);
    ASSERT_TRUE(succeeded(plan));
    plan->mutable_training()->set_global_batch(8);
    ::loom::runtime::Status valid = ::loom::runtime::validatePlan(*plan, "p");
    EXPECT_TRUE(valid.isOk()) << valid.message();
    if (devices > 1)
      EXPECT_TRUE(llvm::any_of(plan->programs(0).instructions(),
                               [](const ::loom::plan::Instruction &i) {
                                 return i.op() == "all_gather_start";
                               }));
    using Rule = ::loom::plan::InitRule;
    struct Want {
      const char *name;
      Rule::Kind kind;
      double std;
    } wants[] = {{"g", Rule::ONES, 0},
                 {"beta", Rule::ZEROS, 0},
                 {"w", Rule::NORMAL, 0.02},
                 {"b", Rule::ZEROS, 0},
                 {"s", Rule::ZEROS, 0}};
    for (const Want &want : wants) {
      const auto *p =
          findBuffer(plan->programs(0), ::loom::plan::PARAMETER, want.name);
      ASSERT_TRUE(p) << want.name;
      EXPECT_EQ(p->init_case(), ::loom::plan::Buffer::INIT_NOT_SET)
          << want.name;
      EXPECT_EQ(p->init_rule().kind(), want.kind) << want.name;
      EXPECT_EQ(p->init_rule().std(), want.std) << want.name;
    }
  }
}

TEST_F(PlanEmitterTest, TrainingStepRolesAndInPlaceUpdates) {
  OwningOpRef<ModuleOp> module = trainStep(kMlp, 2);
  ASSERT_TRUE(module);
  EmitOptions options;
  options.modelPath = "/m.onnx";
  MemoryBreakdown memory;
  FailureOr<::loom::plan::Plan> plan = emitPlan(*module, options, &memory);
  ASSERT_TRUE(succeeded(plan));
  EXPECT_EQ(plan->world_size(), 2);
  EXPECT_TRUE(plan->is_training());
  plan->mutable_training()->set_global_batch(8);
  ::loom::runtime::Status valid = ::loom::runtime::validatePlan(*plan, "p");
  EXPECT_TRUE(valid.isOk()) << valid.message();
  // Both ranks run one program; the batch of 8 splits into 4 + 4 by each
  // rank's dp coordinate.
  ASSERT_EQ(plan->programs_size(), 1);
  const ::loom::plan::Program &p0 = plan->programs(0);
  EXPECT_EQ(p0.ranks_size(), 2);
  ASSERT_EQ(plan->mesh_size(), 3);
  EXPECT_EQ(plan->mesh(1).name(), "dp");
  EXPECT_EQ(plan->mesh(1).size(), 2);
  const auto *x0 = findBuffer(p0, ::loom::plan::INPUT, "x");
  ASSERT_TRUE(x0);
  EXPECT_EQ(x0->shape(0), 4);
  EXPECT_EQ(x0->sample_offset(), 0);

  const auto *w = findBuffer(p0, ::loom::plan::PARAMETER, "w");
  const auto *m = findBuffer(p0, ::loom::plan::OPTIMIZER_STATE, "w", "exp_avg");
  const auto *v =
      findBuffer(p0, ::loom::plan::OPTIMIZER_STATE, "w", "exp_avg_sq");
  ASSERT_TRUE(w && m && v);
  EXPECT_EQ(w->onnx_initializer(), "w");
  EXPECT_TRUE(m->zeros());
  EXPECT_EQ(memory.numParameters, 15);

  // adamw writes the parameter and both states in place. The two
  // gradients and the loss are summed as one bucket: one buffer, started
  // and waited for in place, that holds each gradient side by side.
  int adamw = 0, starts = 0, waits = 0, bucket = -1;
  std::vector<int32_t> grads;
  for (const auto &inst : p0.instructions()) {
    if (inst.op() == "adamw" && inst.inputs(0) == w->id()) {
      ++adamw;
      ASSERT_EQ(inst.outputs_size(), 3);
      EXPECT_EQ(inst.outputs(0), w->id());
      EXPECT_EQ(inst.outputs(1), m->id());
      EXPECT_EQ(inst.outputs(2), v->id());
    }
    if (inst.op() == "adamw") {
      grads.push_back(inst.inputs(1));
      EXPECT_EQ(waits, 1) << "an update reads its gradient before the wait";
    }
    if (inst.op() == "all_reduce_start") {
      ++starts;
      bucket = inst.inputs(0);
      EXPECT_EQ(inst.outputs(0), bucket);
      EXPECT_EQ(inst.attrs().at("bucket").i(), 0);
    }
    if (inst.op() == "all_reduce_wait") {
      ++waits;
      EXPECT_EQ(inst.inputs(0), bucket);
    }
    EXPECT_NE(inst.op(), "all_reduce");
  }
  EXPECT_EQ(adamw, 1);
  ASSERT_EQ(starts, 1);
  EXPECT_EQ(waits, 1);
  const ::loom::plan::Buffer &b = p0.buffers(bucket);
  EXPECT_EQ(b.name(), "bucket 0");
  EXPECT_EQ(b.role(), ::loom::plan::TEMPORARY);
  ASSERT_EQ(grads.size(), 2u);
  std::vector<std::pair<int64_t, int64_t>> inside;
  for (int32_t id : grads) {
    const ::loom::plan::Buffer &g = p0.buffers(id);
    EXPECT_GE(g.offset(), b.offset()) << g.name();
    EXPECT_LE(g.offset() + g.size_bytes(), b.offset() + b.size_bytes())
        << g.name();
    inside.push_back({g.offset(), g.offset() + g.size_bytes()});
  }
  std::sort(inside.begin(), inside.end());
  EXPECT_LE(inside[0].second, inside[1].first) << "gradients overlap";
  ASSERT_GE(p0.loss_buffer(), 0);
  EXPECT_EQ(p0.buffers(p0.loss_buffer()).role(), ::loom::plan::LOSS);

  // Every buffer lies inside the arena, 64-byte aligned.
  for (const auto &b : p0.buffers()) {
    EXPECT_EQ(b.offset() % 64, 0);
    EXPECT_LE(b.offset() + b.size_bytes(), p0.arena_bytes());
  }
}

TEST_F(PlanEmitterTest, ForwardPlanBindsOutputs) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kMlp, &ctx);
  ASSERT_TRUE(module);
  FailureOr<::loom::plan::Plan> plan = emitPlan(*module, EmitOptions());
  ASSERT_TRUE(succeeded(plan));
  EXPECT_FALSE(plan->is_training());
  EXPECT_EQ(plan->world_size(), 1);
  const ::loom::plan::Program &p = plan->programs(0);
  EXPECT_EQ(p.loss_buffer(), -1);
  const auto *y = findBuffer(p, ::loom::plan::OUTPUT, "y");
  ASSERT_TRUE(y);
  EXPECT_EQ(y->shape(0), 8);
  EXPECT_EQ(p.instructions(p.instructions_size() - 1).op(), "tanh");
}

TEST_F(PlanEmitterTest, OutputThatIsAnInputIsCopied) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
    func.func @main(%x: tensor<2xf32> {loom.input = "x"}) -> (tensor<2xf32> {loom.output = "y"}) {
      return %x : tensor<2xf32>
    })",
                                                             &ctx);
  ASSERT_TRUE(module);
  FailureOr<::loom::plan::Plan> plan = emitPlan(*module, EmitOptions());
  ASSERT_TRUE(succeeded(plan));
  const ::loom::plan::Program &p = plan->programs(0);
  ASSERT_EQ(p.instructions_size(), 1);
  EXPECT_EQ(p.instructions(0).op(), "copy");
  EXPECT_NE(findBuffer(p, ::loom::plan::OUTPUT, "y"), nullptr);
}

} // namespace

namespace {

TEST_F(PlanEmitterTest, ReshapesAreViewsWithoutInstructions) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
    func.func @main(%x: tensor<2x6xf32> {loom.input = "x"}) -> (tensor<3x4xf32> {loom.output = "y"}) {
      %0 = loom.relu %x : tensor<2x6xf32>
      %1 = loom.reshape %0 [3, 4] : tensor<2x6xf32> -> tensor<3x4xf32>
      %2 = loom.tanh %1 : tensor<3x4xf32>
      return %2 : tensor<3x4xf32>
    })",
                                                             &ctx);
  ASSERT_TRUE(module);
  FailureOr<::loom::plan::Plan> plan = emitPlan(*module, EmitOptions());
  ASSERT_TRUE(succeeded(plan));
  const ::loom::plan::Program &p = plan->programs(0);
  ASSERT_EQ(p.instructions_size(), 2); // relu, tanh: no copy
  const auto &relu = p.instructions(0), &tanh = p.instructions(1);
  const auto &relued = p.buffers(relu.outputs(0));
  const auto &view = p.buffers(tanh.inputs(0));
  EXPECT_NE(relued.id(), view.id());
  EXPECT_EQ(view.offset(), relued.offset());
  EXPECT_EQ(view.shape(0), 3);
  // The tanh output may not reuse the bytes its (viewed) input still needs.
  const auto &out = p.buffers(tanh.outputs(0));
  EXPECT_TRUE(out.offset() + out.size_bytes() <= view.offset() ||
              view.offset() + view.size_bytes() <= out.offset());
  ::loom::runtime::Status valid = ::loom::runtime::validatePlan(*plan, "p");
  EXPECT_TRUE(valid.isOk()) << valid.message();
}

} // namespace

namespace {

// A micro-batch along dimension 0 is a view at its block's offset; one
// along an inner dimension is a strided slice.
TEST_F(PlanEmitterTest, MicroBatchesOfTheBatchAreViews) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
    func.func @main(%x: tensor<4x16xf32> {loom.input = "x"}) -> (tensor<2x16xf32> {loom.output = "y"}, tensor<4x8xf32> {loom.output = "z"}) {
      %0 = loom.micro_batch %x axis 0 index 1 of 2 : tensor<4x16xf32> -> tensor<2x16xf32>
      %1 = loom.tanh %0 : tensor<2x16xf32>
      %2 = loom.micro_batch %x axis 1 index 1 of 2 : tensor<4x16xf32> -> tensor<4x8xf32>
      %3 = loom.tanh %2 : tensor<4x8xf32>
      return %1, %3 : tensor<2x16xf32>, tensor<4x8xf32>
    })",
                                                             &ctx);
  ASSERT_TRUE(module);
  FailureOr<::loom::plan::Plan> plan = emitPlan(*module, EmitOptions());
  ASSERT_TRUE(succeeded(plan));
  const ::loom::plan::Program &p = plan->programs(0);
  ASSERT_EQ(p.instructions_size(), 3); // tanh, slice, tanh
  const auto *input = findBuffer(p, ::loom::plan::INPUT, "x");
  ASSERT_TRUE(input);
  const auto &view = p.buffers(p.instructions(0).inputs(0));
  EXPECT_EQ(p.instructions(0).op(), "tanh");
  EXPECT_EQ(view.offset(), input->offset() + 2 * 16 * 4);
  EXPECT_EQ(view.shape(0), 2);
  const auto &slice = p.instructions(1);
  EXPECT_EQ(slice.op(), "slice");
  EXPECT_EQ(slice.inputs(0), input->id());
  EXPECT_EQ(slice.attrs().at("starts").ints().values(0), 8);
  EXPECT_EQ(slice.attrs().at("ends").ints().values(0), 16);
  ::loom::runtime::Status valid = ::loom::runtime::validatePlan(*plan, "p");
  EXPECT_TRUE(valid.isOk()) << valid.message();
}

// Two stage functions become two programs, one a pp coordinate: the send
// of the activation, whose buffer lives to the end of the step (the runtime
// waits for the send there), the receive into a buffer of its own, the loss
// sent back to the first stage, a sent parameter copied first (its update
// would write it under the send), and the micro-batch and backward marks on
// the instructions.
TEST_F(PlanEmitterTest, PipelineStagesAreProgramsWithTransfers) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
    shard.grid @mesh(shape = 2x1x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
    func.func @main_stage0(%x: tensor<4x8xf32> {loom.input = "x"}, %w: tensor<8x8xf32> {loom.param = "w"})
        -> (tensor<f32> {loom.loss}, tensor<8x8xf32> {loom.param = "w"}) attributes {loom.pipeline_device = 0 : i64} {
      %sw = shard.send %w on @mesh grid_axes = [0] destination = [1] {loom.tag = 3 : i64} : (tensor<8x8xf32>) -> tensor<8x8xf32>
      %h = loom.matmul %x, %w {loom.micro_batch = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %s = shard.send %h on @mesh grid_axes = [0] destination = [1] {loom.tag = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %t = loom.tanh %x : tensor<4x8xf32>
      %e = tensor.empty() : tensor<4x8xf32>
      %g = shard.recv %e on @mesh grid_axes = [0] source = [1] {loom.tag = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %dw = loom.matmul %x, %g {loom.backward, loom.micro_batch = 0 : i64, transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
      %nw = loom.sgd %w, %dw {dampening = 0.0 : f64, lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<8x8xf32>
      %e1 = tensor.empty() : tensor<1xf32>
      %l1 = shard.recv %e1 on @mesh grid_axes = [0] source = [1] {loom.tag = 2 : i64} : (tensor<1xf32>) -> tensor<1xf32>
      %l = loom.reshape %l1 [] : tensor<1xf32> -> tensor<f32>
      return %l, %nw : tensor<f32>, tensor<8x8xf32>
    }
    func.func @main_stage1(%y: tensor<4x8xf32> {loom.target}) -> (tensor<f32> {loom.loss}) attributes {loom.pipeline_device = 1 : i64} {
      %e = tensor.empty() : tensor<4x8xf32>
      %h = shard.recv %e on @mesh grid_axes = [0] source = [0] {loom.tag = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %ew = tensor.empty() : tensor<8x8xf32>
      %w = shard.recv %ew on @mesh grid_axes = [0] source = [0] {loom.tag = 3 : i64} : (tensor<8x8xf32>) -> tensor<8x8xf32>
      %l = loom.mse %h, %y {count = 32 : i64, loom.micro_batch = 0 : i64} : tensor<4x8xf32> -> tensor<f32>
      %l1 = loom.reshape %l [1] : tensor<f32> -> tensor<1xf32>
      %s = shard.send %l1 on @mesh grid_axes = [0] destination = [0] {loom.tag = 2 : i64} : (tensor<1xf32>) -> tensor<1xf32>
      %g = loom.mse_grad %h, %y {count = 32 : i64, loom.backward, loom.micro_batch = 0 : i64} : tensor<4x8xf32>
      %s2 = shard.send %g on @mesh grid_axes = [0] destination = [0] {loom.tag = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
      return %l : tensor<f32>
    })",
                                                             &ctx);
  ASSERT_TRUE(module);
  MemoryBreakdown memory;
  EmitOptions options;
  options.storedWeights = false;
  FailureOr<::loom::plan::Plan> plan = emitPlan(*module, options, &memory);
  ASSERT_TRUE(succeeded(plan));
  ASSERT_EQ(plan->programs_size(), 2);
  EXPECT_EQ(plan->programs(0).ranks(0), 0);
  EXPECT_EQ(plan->programs(1).ranks(0), 1);
  EXPECT_TRUE(plan->is_training());
  EXPECT_EQ(memory.numParameters, 64); // the first stage's w, held once
  const ::loom::plan::Program &p = plan->programs(0);
  EXPECT_GE(p.loss_buffer(), 0);
  EXPECT_GE(plan->programs(1).loss_buffer(), 0);
  std::vector<std::string> ops;
  for (const auto &inst : p.instructions())
    ops.push_back(inst.op());
  EXPECT_EQ(ops,
            (std::vector<std::string>{"copy", "send", "matmul", "send", "tanh",
                                      "recv", "matmul", "sgd", "recv"}));
  const auto *w = findBuffer(p, ::loom::plan::PARAMETER, "w");
  ASSERT_TRUE(w);
  EXPECT_EQ(p.instructions(0).inputs(0), w->id());
  EXPECT_EQ(p.instructions(1).inputs(0), p.instructions(0).outputs(0));
  const auto &send = p.instructions(3);
  EXPECT_EQ(send.outputs_size(), 0);
  EXPECT_EQ(send.attrs().at("peer_stage").i(), 1);
  EXPECT_EQ(send.attrs().at("tag").i(), 0);
  EXPECT_EQ(p.instructions(2).micro_batch(), 1);
  EXPECT_FALSE(p.instructions(2).backward());
  EXPECT_TRUE(p.instructions(6).backward());
  EXPECT_EQ(p.instructions(6).attrs().count("loom.micro_batch"), 0u);
  // The sent activation is not reused by the tanh after the send.
  const auto &sent = p.buffers(send.inputs(0));
  const auto &tanh = p.buffers(p.instructions(4).outputs(0));
  EXPECT_TRUE(sent.offset() + sent.size_bytes() <= tanh.offset() ||
              tanh.offset() + tanh.size_bytes() <= sent.offset());
  EXPECT_EQ(p.instructions(5).attrs().at("peer_stage").i(), 1);
  EXPECT_EQ(p.instructions(5).attrs().at("tag").i(), 1);
  plan->mutable_training()->set_global_batch(4);
  ::loom::runtime::Status valid = ::loom::runtime::validatePlan(*plan, "p");
  EXPECT_TRUE(valid.isOk()) << valid.message();
}

// An unaligned block of integers has no view and no kernel: refused.
TEST_F(PlanEmitterTest, UnalignedIntegerMicroBatchIsRefused) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
    func.func @main(%x: tensor<4x3xi64> {loom.input = "x"}) -> (tensor<2x3xi64> {loom.output = "y"}) {
      %0 = loom.micro_batch %x axis 0 index 1 of 2 : tensor<4x3xi64> -> tensor<2x3xi64>
      return %0 : tensor<2x3xi64>
    })",
                                                             &ctx);
  ASSERT_TRUE(module);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    diagnostics += d.str();
    return success();
  });
  EXPECT_TRUE(failed(emitPlan(*module, EmitOptions())));
  EXPECT_NE(diagnostics.find("cannot emit micro-batch 1 of 'tensor<4x3xi64>': "
                             "it is not a 64-byte aligned block"),
            std::string::npos)
      << diagnostics;
}

TEST_F(PlanEmitterTest, MixedPrecisionHalvesActivationBuffers) {
  auto build = [&](const std::string &precision,
                   MemoryBreakdown &memory) -> FailureOr<::loom::plan::Plan> {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kMlp, &ctx);
    if (!module)
      return failure();
    PassManager pm(&ctx);
    TrainPipelineOptions train;
    train.loss = LossKind::Mse;
    train.precision = *parsePrecision(precision);
    buildLoomTrainPipeline(pm, train);
    buildLoomPlanPipeline(pm, PlanPipelineOptions());
    if (failed(pm.run(*module)))
      return failure();
    EmitOptions options;
    options.training.set_global_batch(8);
    options.training.set_precision(precision);
    options.modelPath = "model.onnx";
    return emitPlan(*module, options, &memory);
  };
  MemoryBreakdown m32, m16;
  FailureOr<::loom::plan::Plan> fp32 = build("fp32", m32);
  FailureOr<::loom::plan::Plan> bf16 = build("bf16", m16);
  ASSERT_TRUE(succeeded(fp32) && succeeded(bf16));
  const ::loom::plan::Program &p = bf16->programs(0);
  int bf16Buffers = 0, converts = 0;
  for (const ::loom::plan::Buffer &b : p.buffers()) {
    int64_t numel = 1;
    for (int64_t d : b.shape())
      numel *= d;
    if (b.dtype() == ::loom::plan::BF16) {
      ++bf16Buffers;
      EXPECT_EQ(b.size_bytes(), 2 * numel) << b.name();
      EXPECT_EQ(b.role(), ::loom::plan::TEMPORARY) << b.name();
    } else if (b.role() != ::loom::plan::TEMPORARY) {
      EXPECT_NE(b.dtype(), ::loom::plan::BF16) << b.name();
    }
  }
  for (const auto &inst : p.instructions()) {
    if (inst.op() == "convert") {
      ++converts;
      // The types are the buffers'; no attribute carries them.
      EXPECT_TRUE(inst.attrs().empty());
      EXPECT_NE(p.buffers(inst.inputs(0)).dtype(),
                p.buffers(inst.outputs(0)).dtype());
    }
    if (inst.op() == "adamw")
      for (int32_t id : inst.inputs())
        EXPECT_EQ(p.buffers(id).dtype(), ::loom::plan::F32);
  }
  EXPECT_GT(bf16Buffers, 0);
  // x, w, b and the target in; dw and db back to f32.
  EXPECT_EQ(converts, 6);
  EXPECT_EQ(m16.parameters, m32.parameters);
  EXPECT_EQ(m16.gradients, m32.gradients);
  EXPECT_EQ(m16.optimizerState, m32.optimizerState);
  EXPECT_LT(m16.arena, m32.arena);
  ::loom::runtime::Status valid = ::loom::runtime::validatePlan(*bf16, "p");
  EXPECT_TRUE(valid.isOk()) << valid.message();
}

} // namespace
