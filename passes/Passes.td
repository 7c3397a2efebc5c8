//===- Passes.td - Loom passes ------------------------------*- tablegen -*-===//

#ifndef LOOM_PASSES_TD
#define LOOM_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// train: forward graph -> training step
//===----------------------------------------------------------------------===//

def LoomAppendLossPass : Pass<"loom-append-loss", "mlir::func::FuncOp"> {
  let summary = "Append the loss to a forward function";
  let description = [{
    Pre: a function whose results are graph outputs (`loom.output`).
    Post: a new argument `loom.target` and a single result, the scalar loss
    (`loom.loss`), computed from the output named by `output` (the first one
    by default). `cross_entropy` takes class ids (`i64`) over the last
    dimension; `mse` takes a target shaped like the output; `output` uses the
    model's own scalar output as the loss.

    ```mlir
    // before
    func.func @main(%x: tensor<4x3xf32> {loom.input = "x"}) -> (tensor<4x3xf32> {loom.output = "y"})
    // after (loss=cross_entropy)
    func.func @main(%x: tensor<4x3xf32> {loom.input = "x"}, %t: tensor<4xi64> {loom.target})
        -> (tensor<f32> {loom.loss}) {
      %l = loom.cross_entropy %y, %t : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"loss", "loss", "mlir::loom::LossKind",
           "mlir::loom::LossKind::CrossEntropy", "the loss to append",
           [{::llvm::cl::values(LOOM_LOSS_VALUES)}]>,
    Option<"outputName", "output-name", "std::string", "\"\"",
           "graph output the loss is computed from (default: the first)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomMixedPrecisionPass : Pass<"loom-mixed-precision", "mlir::func::FuncOp"> {
  let summary = "Compute in bf16, keep f32 master weights (autocast-like)";
  let description = [{
    Pre: a forward function (graph outputs) or a forward function with its
    loss (after `loom-append-loss`), before `loom-autodiff`; all floats f32.
    Post (`precision=bf16`): every f32 operand of a compute op (a parameter,
    a float graph input or target, a constant, or an f32 result such as a
    loss) is read through one `loom.convert ... to bf16`, placed before its
    first use and shared by all uses; integer-to-f32 conversions convert to
    bf16 directly; every compute op's result is re-inferred and so becomes
    bf16, except losses, which stay f32 scalars (their kernels reduce in f32
    or wider). Float results are converted back to f32, so a forward plan's
    outputs and the loss stay f32. Parameters themselves stay f32: after
    `loom-autodiff`, the gradient of each conversion converts back, so
    parameter gradients, their all-reduce and the optimizer are f32.
    `precision=fp32` leaves the function unchanged.

    ```mlir
    // before
    %y = loom.linear %x, %w : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32>
    %l = loom.cross_entropy %y, %t : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
    // after
    %xb = loom.convert %x to bf16 : tensor<4x8xf32> -> tensor<4x8xbf16>
    %wb = loom.convert %w to bf16 : tensor<3x8xf32> -> tensor<3x8xbf16>
    %y = loom.linear %xb, %wb : (tensor<4x8xbf16>, tensor<3x8xbf16>) -> tensor<4x3xbf16>
    %l = loom.cross_entropy %y, %t : (tensor<4x3xbf16>, tensor<4xi64>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"precision", "precision", "mlir::loom::Precision",
           "mlir::loom::Precision::Bf16", "the compute precision (fp32 changes nothing)",
           [{::llvm::cl::values(LOOM_PRECISION_VALUES)}]>,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomAutodiffPass : Pass<"loom-autodiff", "mlir::func::FuncOp"> {
  let summary = "Build the backward graph by reverse-mode differentiation";
  let description = [{
    Pre: a function whose only result is the scalar loss (`loom.loss`).
    Post: the function also returns the gradient of the loss with respect to
    every `loom.param` argument, in argument order, each marked
    `loom.grad = NAME`. Backward ops are appended after the forward ops;
    forward values needed by the backward are reused, not recomputed.

    ```mlir
    // after
    %g = loom.relu_grad %dy, %h : tensor<4x8xf32>
    return %loss, %dw : tensor<f32>, tensor<8x3xf32>   // {loom.loss}, {loom.grad = "w"}
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomFoldSliceGradsPass : InterfacePass<"loom-fold-slice-grads", "mlir::FunctionOpInterface"> {
  let summary = "Write a sum of slice gradients that tile an axis as one concat";
  let description = [{
    Pre: a training step after `loom-autodiff` (any function works).
    Post: every tree of `loom.add`s (inner additions single-use, all of the
    root's type) whose summands are `loom.slice_grad`s along one axis with
    unit steps, whose windows are disjoint and cover the axis, is one
    `loom.concat` of the slice gradients' inputs in window order. Other sums
    (overlapping windows, gaps, several axes, other summands) stay as they
    are. The value is the same; a split into q/k/v costs one copy instead
    of three zero-filled full-size tensors and two additions.

    ```mlir
    // before
    %a = loom.slice_grad %dq, %qkv axes [2] starts [0] ends [4] steps [1] : ...
    %b = loom.slice_grad %dk, %qkv axes [2] starts [4] ends [8] steps [1] : ...
    %s = loom.add %a, %b : ...
    // after
    %s = loom.concat %dq, %dk axis 2 : ...
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomAppendOptimizerPass : Pass<"loom-append-optimizer", "mlir::func::FuncOp"> {
  let summary = "Apply the optimizer update to every parameter";
  let description = [{
    Pre: a function returning the loss and one `loom.grad` per parameter.
    Post: one optimizer-state argument per state slot and parameter
    (`loom.state = "exp_avg" | "exp_avg_sq" | "momentum"`, `loom.param = NAME`)
    and results: the loss, then every updated parameter (`loom.param`), then
    every updated state, in argument order. Defaults follow PyTorch.

    ```mlir
    %p2, %m2, %v2 = loom.adamw %p, %g, %m, %v {lr = 1.0e-3 : f64, ...} : tensor<8x3xf32>
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "mlir::loom::OptimizerKind",
           "mlir::loom::OptimizerKind::AdamW", "the optimizer",
           [{::llvm::cl::values(LOOM_OPTIMIZER_VALUES)}]>,
    Option<"lr", "lr", "double", "1e-3", "learning rate">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", "-1",
           "weight decay (default: 0.01 for adamw, 0 for sgd)">,
    Option<"momentum", "momentum", "double", "0", "SGD momentum">,
    Option<"dampening", "dampening", "double", "0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomAppendRunningStatsPass : Pass<"loom-append-running-stats", "mlir::func::FuncOp"> {
  let summary = "Update batch norms' running statistics in the training step";
  let description = [{
    Pre: a training step (after `loom-append-optimizer`) whose
    `loom.batch_norm` ops may name their running statistics (`running_mean`,
    `running_var`, `momentum`: the importer sets them for ONNX
    BatchNormalization in training mode whose statistics are initializers).
    Post: each named statistic is an argument `loom.running_mean = NAME` or
    `loom.running_var = NAME` (f32 `[C]`) and its update a result with the
    same attribute, after the existing results, in op order; the batch
    norms no longer carry the attributes. The update is torch.nn.BatchNorm's:
    `running * momentum + batch * (1 - momentum)` (ONNX's momentum, torch's
    is 1 minus it), the batch's mean and, for the variance, its unbiased
    variance (N / (N - 1) times the biased one that normalises), N the
    elements per channel of the global batch. The statistics are built
    after the batch norm with the ops `loom-sync-batch-norm` uses, so under
    data parallelism CSE leaves one copy and they are the global batch's.
    A batch with one value per channel is an error (torch refuses it too).

    ```mlir
    // after
    %m2 = loom.add %kept, %added : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %loss, ..., %m2, %v2 : ...   // {loom.running_mean = "bn.running_mean"}, {loom.running_var = "bn.running_var"}
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

//===----------------------------------------------------------------------===//
// plan: annotate
//===----------------------------------------------------------------------===//

def LoomChooseMeshPass : Pass<"loom-choose-mesh", "mlir::ModuleOp"> {
  let summary = "Choose the device mesh (pp x dp x tp) and record it as a shard.grid";
  let description = [{
    Pre: a module with one training-step function `@main`.
    Post: `shard.grid @mesh(shape = PPxDPxTP)` at the top of the module and
    `loom.mesh_axes = ["pp", "dp", "tp"]` on it; `dp = devices / (tp x pp)`
    unless forced. The batch (dimension 0 of every `loom.input` /
    `loom.target` argument) must divide by `dp`.

    When the step runs in micro-batches (`micro` > 1, or a `micro-batch`
    smaller than the rank's block of the batch), the mesh has a fourth
    axis, `micro`, of that size: the batch must divide by `dp x micro`.
    The partition then types the step for one micro-batch, and
    `loom-unroll-micro-batches` runs it once per micro-batch and removes the
    axis.

    ```mlir
    shard.grid @mesh(shape = 1x4x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
    shard.grid @mesh(shape = 1x2x1x4) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
    ```
  }];
  let options = [
    Option<"devices", "devices", "int64_t", "1", "number of devices">,
    Option<"dp", "dp", "int64_t", "0", "force the data-parallel degree (0: choose)">,
    Option<"tp", "tp", "int64_t", "1", "force the tensor-parallel degree">,
    Option<"pp", "pp", "int64_t", "1", "force the pipeline-parallel degree">,
    Option<"micro", "micro", "int64_t", "1",
           "micro-batches a step accumulates gradients over">,
    Option<"microBatch", "micro-batch", "int64_t", "0",
           "samples per rank per micro-batch (0: from `micro`)">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomPartitionStagesPass : Pass<"loom-partition-stages", "mlir::ModuleOp"> {
  let summary = "Cut the training step's layers into pipeline stages and fix their schedule";
  let description = [{
    Pre: `shard.grid @mesh` from `loom-choose-mesh` and the training step
    `@main` (its first result the loss). With `pp = 1` the pass does
    nothing.
    Post, with `pp > 1`: every op of `@main` has `loom.stage = S`, the ops of
    the backward pass also `loom.backward`, and the grid has `loom.pipeline = {schedule, virtual_stages, layers,
    stage_seconds, order}`. A forward op's layer is the outermost numbered
    module in its ONNX node name or in a parameter it reads (`/h.3/attn/Add`
    is layer `h.3`, `/layer2/layer2.0/conv1/Conv` layer `layer2.0`,
    passes/LayerKey.h; an op without one belongs to the
    layer before it, ops before the first layer to the first stage, the
    head and the loss after the last to the last stage); a backward op has
    the stage of the forward op whose location it has, an optimizer update
    its parameter's (the stage of the parameter's first use). The layers
    are cut into `pp x virtual-stages` contiguous stages whose slowest stage
    (forward and backward of one micro-batch, roofline costs of the
    cluster's device) is fastest among the cuts that fit the device memory,
    each stage holding its parameters, gradients and optimizer state and as
    many micro-batches' activations as the schedule keeps in flight on its
    device (`layers`: each stage's first and last layer). Stage S runs on
    the devices whose pp coordinate is S mod pp (`virtual-stages` > 1:
    interleaved, model chunk S / pp). `order` is each pp device's schedule
    (`F3` forward of micro-batch 3, `B` backward, `W` weight gradients,
    `.c` the chunk): `gpipe`, `1f1b` (PipeDream-flush), `interleaved`
    (Megatron-LM's) or `zb-h1` (zero bubble, weight gradients deferred into
    the bubbles); docs/planner.md gives each rule.

    ```mlir
    shard.grid @mesh(shape = 2x1x1x4) {loom.mesh_axes = ["pp", "dp", "tp", "micro"],
      loom.pipeline = {layers = [array<i64: 0, 1>, array<i64: 2, 3>],
                       order = ["F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"],
                       schedule = "1f1b", stage_seconds = array<f64: ...>, virtual_stages = 1 : i64}}
    %0 = loom.linear %x, %w0, %b0 {loom.stage = 0 : i64} ... loc("/h.0/fc/Gemm")
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved or zb-h1">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "model chunks a device (interleaved only)">,
    Option<"cluster", "cluster", "std::string", "\"cpu:1\"",
           "the cluster whose devices cost the layers (docs/cluster-spec.md)">,
    Option<"memoryBudgetGib", "memory-budget-gib", "double", "0",
           "bytes a device may hold, in GiB (0: the cluster's device memory; "
           "negative: no limit, the stage count was chosen by a search that "
           "checked the memory)">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomSyncBatchNormPass : Pass<"loom-sync-batch-norm", "mlir::ModuleOp"> {
  let summary = "Normalise batches with the statistics of the global batch";
  let description = [{
    Pre: `shard.grid @mesh` from `loom-choose-mesh`, before
    `loom-shard-data-parallel`; the entry function a training step (or a
    forward function).
    Post, when `dp > 1`: no `loom.batch_norm` or `loom.batch_norm_grad`
    is left in the entry function. Each is written out in reductions and
    element-wise ops: per channel, the mean is `reduce_sum` over every
    dimension but 1 scaled by 1/N, the biased variance the centred sum of
    squares scaled the same way, N the elements per channel of the whole
    (global) batch; `y = (x - mean) * rsqrt(var + epsilon) * scale + bias`.
    The backward is the closed form with the same N: `dbias = sum(dy)`,
    `dscale = sum(dy * xhat)`, `dx = scale * rstd * (dy - dbias / N - xhat *
    dscale / N)`, reusing the forward's `xhat` and `rstd`. Ops and loops
    are in f32 (bf16 operands are converted, results converted back).
    After propagation and partition each of the four sums over the split
    batch is one sum all-reduce of C values, so every rank uses the global
    batch's statistics and sums, and the two backward ones are also the
    scale and bias gradients' data-parallel all-reduces. With `dp = 1` (or
    `loomc --local-batchnorm`, which leaves this pass out) the fused ops
    stay.

    ```mlir
    // before
    %y = loom.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4x6x6xf32>
    // after
    %s = loom.reduce_sum %x axes [0, 2, 3] {keep_dims} : tensor<8x4x6x6xf32> -> tensor<1x4x1x1xf32>
    %mean = loom.scale %s by 0.003472222222222222 : tensor<1x4x1x1xf32>
    %c = loom.sub %x, %mean : (tensor<8x4x6x6xf32>, tensor<1x4x1x1xf32>) -> tensor<8x4x6x6xf32>
    ...
    %y = loom.add %scaled, %b4 : (tensor<8x4x6x6xf32>, tensor<1x4x1x1xf32>) -> tensor<8x4x6x6xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomShardDataParallelPass
    : Pass<"loom-shard-data-parallel", "mlir::ModuleOp"> {
  let summary = "Annotate the data-parallel split at the training step's boundary";
  let description = [{
    Pre: `shard.grid @mesh` from `loom-choose-mesh`; the entry function a
    training step or a forward function.
    Post: every ranked tensor argument is annotated with `shard.shard`: the
    batch (dimension 0) of each `loom.input` / `loom.target` argument split
    over the `dp` axis, every other argument (parameters, optimizer state)
    replicated; every returned tensor is annotated replicated for its user,
    the return. Upstream `sharding-propagation` then annotates every op
    (loom ops implement `ShardingInterface`) and `shard-partition` rewrites
    the step into one rank's program, with the gradients and the loss summed
    over `dp` by `shard.all_reduce` (the losses' `count` is the global
    batch's, so the sums are the global means). Nothing changes when
    `dp = 1`.

    ```mlir
    %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
    %x = shard.shard %arg0 to %s : tensor<8x4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomShardZeroPass : Pass<"loom-shard-zero", "mlir::ModuleOp"> {
  let summary = "ZeRO: split the optimizer's state (and gradients, parameters) over dp";
  let description = [{
    Pre: a fully annotated step (after `sharding-propagation`, and
    `loom-auto-shard` when `tp > 1`).
    Post: `loom.zero_stage` on the `shard.grid`; with `dp > 1` and a stage
    from 1 to 3, every optimizer update (`loom.adamw`, `loom.sgd` with
    momentum; at stage 3 plain SGD too) runs on the rank's block of its
    parameter along `dp`: `dp` is added as the last axis of the first
    dimension whose block under the other splits it divides (a parameter
    too small for that stays replicated). Stage 1: the update's operands
    and results, and the optimizer-state arguments and returns, take that
    sharding; the parameter's block is sliced from the whole parameter and
    the updated blocks are gathered back. Stage 2: the same (the lowering
    turns the gradient's all-reduce and slice into a reduce-scatter,
    `loom-fuse-reduce-scatter`). Stage 3: the parameter argument and its
    return too, so every use gathers it whole. Only annotations change.

    ```mlir
    %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
    %m = shard.shard %exp_avg to %s : tensor<64x16xf32>
    ```
  }];
  let options = [
    Option<"stage", "stage", "int64_t", "0", "the ZeRO stage (0 to 3)">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomSplitFusedProjectionsPass
    : Pass<"loom-split-fused-projections", "mlir::func::FuncOp"> {
  let summary = "One linear per block of a fused projection, its weight viewed by blocks";
  let description = [{
    Pre: a raised forward function (before `loom-train`); run when the mesh
    has `tp > 1`.
    Post: a linear whose parameter weight (and bias) only it reads, and
    whose result only equal slices of its last dimension read (through
    reshapes that keep that dimension) — q, k and v as one `Linear(d, 3d)`
    and a Split — is one linear per block. The weight argument `[K, B*n]`
    becomes `[K, B, n]` (a transposed `[B*n, K]`: `[B, n, K]`, a bias
    `[B*n]`: `[B, n]`), the same bytes, with `loom.fused_blocks =
    array<i64: D, B>` (the initializer's dimension D is the view's D and
    D + 1); each block's linear reads `reshape(slice(weight))`. Then `n`
    can split over `tp` with the blocks whole: each rank holds its heads of
    q, of k and of v, and the slices are local (docs/auto-shard.md). The
    plan describes the buffer in the initializer's shape with a
    several-block split.

    ```mlir
    %w0 = loom.slice %w axes [1] starts [0] ends [1] steps [1] : tensor<8x3x8xf32> -> tensor<8x1x8xf32>
    %q = loom.linear %x, %w0r, %b0r : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
  }];
}

def LoomAutoShardPass : Pass<"loom-auto-shard", "mlir::ModuleOp"> {
  let summary = "Choose each op's tensor-parallel split with an integer program";
  let description = [{
    Pre: `shard.grid @mesh` (pp x dp x tp) from `loom-choose-mesh`, and the
    data-parallel split propagated through the step
    (`loom-shard-data-parallel`, then `sharding-propagation`).
    Post, when `tp > 1`: every op of the entry function, every argument and
    every returned value carries the sharding it chose, as `shard.shard`
    pairs (the producer's sharding, then one `annotate_for_users` per use)
    that `shard-partition` turns into local shapes and collectives; the
    data-parallel split is kept and the `tp` axis added. Nothing else
    changes, and nothing at all when `tp = 1`.

    An op's strategies are its loop nest's (`ShardingInterface`): no `tp`
    split, or one splittable loop that `dp` does not split and whose every
    dimension `tp` divides. A split reduction loop all-reduces the op's
    results over `tp`. A parameter's (and its optimizer state's) strategies
    are its dimensions, and each updated parameter keeps its argument's
    layout. The costs come from LoomPlanner: an op's roofline time divided
    by the devices that share it, the all-reduce of a split reduction, and
    per edge the resharding between the producer's and the user's layout
    (`all_gather` to replicate, `all_to_all` to move the split, a local
    slice to split). CBC minimises the sum, with the parameters' and the
    optimizer state's bytes within `memory-budget-gib` per device
    (docs/auto-shard.md). The choice is deterministic.

    ```mlir
    %s = shard.sharding @mesh split_axes = [[], [2]] : !shard.sharding
    %w = shard.shard %arg1 to %s : tensor<64x16xf32>
    ```
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", "\"cpu:1\"",
           "the cluster spec the costs come from (docs/cluster-spec.md)">,
    Option<"memoryBudgetGib", "memory-budget-gib", "double", "0",
           "per-device memory for parameters and optimizer state, in GiB "
           "(0: the cluster's device memory)">,
    Option<"searched", "searched", "bool", "false",
           "a plan search that weighed the whole plan's memory chose the "
           "mesh: when no sharding fits the budget, take the fastest of "
           "those that hold the least (the plan's arena is checked after) "
           "instead of failing">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

//===----------------------------------------------------------------------===//
// lower: rewrite
//===----------------------------------------------------------------------===//

def LoomStepReshardsPass : Pass<"loom-step-reshards", "mlir::func::FuncOp"> {
  let summary = "Split a value over more mesh axes one axis at a time";
  let description = [{
    Pre: a fully annotated step, before `shard-partition`.
    Post: where a value annotated with one sharding is read with a sharding
    that splits some dimension over two or more further mesh axes (a
    replicated constant read split over `dp` and `micro`), the annotation
    pair becomes a chain that adds one axis per step, which
    `shard-partition` lowers (one `shard.all_slice` each). Other pairs are
    left alone.

    ```mlir
    // before
    %r = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %s = shard.sharding @mesh split_axes = [[1, 3]] : !shard.sharding
    %0 = shard.shard %c to %r : tensor<8x4xf32>
    %1 = shard.shard %0 to %s annotate_for_users : tensor<8x4xf32>
    // after
    %0 = shard.shard %c to %r : tensor<8x4xf32>
    %a = shard.shard %0 to %s1 annotate_for_users : tensor<8x4xf32>  // [[1]]
    %b = shard.shard %a to %s1 : tensor<8x4xf32>
    %1 = shard.shard %b to %s annotate_for_users : tensor<8x4xf32>   // [[1, 3]]
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomRecordArgShardingsPass
    : Pass<"loom-record-arg-shardings", "mlir::func::FuncOp"> {
  let summary = "Write each split argument's sharding as loom.split_axes";
  let description = [{
    Pre: a fully annotated step, before `shard-partition`.
    Post: every parameter, optimizer-state and running-statistic argument
    whose `shard.shard` splits it carries `loom.split_axes`, the mesh axes
    splitting each dimension, so the plan
    emitter can give its buffer the global shape and the split
    (`Buffer.global_shape`, `Buffer.dim_shardings`) after partition has made
    its type local. Replicated arguments get nothing.

    ```mlir
    func.func @main(%w: tensor<64x16xf32> {loom.param = "w",
                                           loom.split_axes = [array<i64>, array<i64: 2>]})
    ```
  }];
}

def LoomFoldAllSlicesPass : InterfacePass<"loom-fold-all-slices", "mlir::FunctionOpInterface"> {
  let summary = "Compute a replicated value's local slice instead of slicing it";
  let description = [{
    Pre: a partitioned step (after `shard-partition`). Propagation leaves a
    value that depends on no split input (a constant batch of token type
    ids, and what is computed from it) replicated, and the partition slices
    it where it meets split values (`shard.all_slice`).
    Post: an all-slice of a uniform constant is the smaller constant, and an
    all-slice of a single-use loom op's result along a splittable parallel
    loop is the op on slices of its operands (the slices move towards the
    constants and arguments). Values are the same; each rank computes only
    its block.

    ```mlir
    // before
    %c = loom.constant dense<0> : tensor<8x64xi64>
    %e = loom.gather %table, %c axis 0 : (tensor<2x128xf32>, tensor<8x64xi64>) -> tensor<8x64x128xf32>
    %s = shard.all_slice %e on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x64x128xf32> -> tensor<4x64x128xf32>
    // after
    %c = loom.constant dense<0> : tensor<4x64xi64>
    %s = loom.gather %table, %c axis 0 : (tensor<2x128xf32>, tensor<4x64xi64>) -> tensor<4x64x128xf32>
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomVerifyShardingPass : InterfacePass<"loom-verify-sharding", "mlir::FunctionOpInterface"> {
  let summary = "Check that sharding propagation annotated every value";
  let description = [{
    Pre: a step after `sharding-propagation`. `shard-partition` needs every
    tensor value annotated: each operand of an op read through a
    `shard.shard ... annotate_for_users`, each result used once, by a
    `shard.shard` without it, and each argument used once, by a
    `shard.shard` (constants, 0-d tensors and results nobody reads, such
    as the input gradient of a norm over the data, excepted: partition
    types those like the operands they come from). A function without
    `shard.shard` ops (one rank) is not partitioned and not checked.
    Post: unchanged; a value that is not annotated is an error at the op
    (and the ONNX node) that holds it, instead of a failure inside
    partition. A mesh with pp > 1 is an error too: pipeline stages are
    planned (`loom-partition-stages`) but not lowered yet.
  }];
}

def LoomFuseReduceScatterPass
    : InterfacePass<"loom-fuse-reduce-scatter", "mlir::FunctionOpInterface"> {
  let summary = "Turn a sum all-reduce that only a slice reads into a reduce-scatter";
  let description = [{
    Pre: a partitioned step.
    Post: a `shard.all_reduce` (sum) whose one user is a `shard.all_slice`
    over the same mesh axes is gone, and the slice is a
    `shard.reduce_scatter` along its axis: the same values, half the
    traffic. The plan pipeline runs it under tensor parallelism (a
    row-parallel linear's sum that a sequence-split op reads: sequence
    parallelism) and at ZeRO stage 2 and 3, where each rank updates its
    block of every gradient; `data-parallel=false` leaves sums over `dp`
    alone (ZeRO-1 keeps whole gradients).

    ```mlir
    // before
    %r = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
    %s = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
    // after
    %s = shard.reduce_scatter %g on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
    ```
  }];
  let options = [
    Option<"dataParallel", "data-parallel", "bool", "true",
           "also fuse sums over the dp axis">,
  ];
}

def LoomRegatherParametersPass
    : Pass<"loom-regather-parameters", "mlir::func::FuncOp"> {
  let summary = "Gather ZeRO-3 parameters again for the backward pass";
  let description = [{
    Pre: a partitioned step (after CSE).
    Post: a copy of a parameter made from its shard alone — a
    `shard.all_gather` over `dp` of an argument, and any `loom.convert`,
    `loom.reshape` or `loom.transpose` of it — that both the forward pass
    (ops before the loss) and the backward pass read is made again just
    before its first backward use, which reads the new copy: each whole
    parameter lives during one pass, not from its forward use to its
    backward one (ZeRO-3's memory, at its 1.5x traffic). With micro-batches
    (`loom-unroll-micro-batches`) every pass of every micro-batch makes its
    own copy, as DeepSpeed's ZeRO-3 gathers per micro-batch: a pass ends at
    a micro-batch's loss or just before the next micro-batch's first read of
    its data (`loom.sample_offset` arguments). On a pipeline device's
    program (`loom-split-stages`), which has no loss and interleaves the
    micro-batches' passes, the ops' `loom.micro_batch` and `loom.backward`
    marks say which pass each use is in. The plan pipeline runs it at ZeRO
    stage 3.

    ```mlir
    // before
    %w = shard.all_gather %arg1 on @mesh grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
    %y = loom.matmul %x, %w ...            // forward
    %loss = ...
    %dx = loom.matmul %dy, %w {transpose_rhs} ...   // backward
    // after
    %w = shard.all_gather %arg1 ...
    %y = loom.matmul %x, %w ...
    %loss = ...
    %w2 = shard.all_gather %arg1 ...
    %dx = loom.matmul %dy, %w2 {transpose_rhs} ...
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomSinkAllReducesPass : InterfacePass<"loom-sink-all-reduces", "mlir::FunctionOpInterface"> {
  let summary = "Move sum all-reduces past the linear ops that consume them";
  let description = [{
    Pre: a partitioned step (after `shard-partition`), whose partial sums
    are all-reduced right where they are made.
    Post: a single-use sum `shard.all_reduce` feeding a `loom.transpose`,
    `loom.reshape`, `loom.scale` or a widening `loom.convert` (bf16 to f32)
    comes after it, and two such all-reduces added together are one
    all-reduce of the sum. The value is the same up to rounding; a weight
    used twice (tied embeddings) costs one all-reduce, and mixed-precision
    gradients are summed in f32.

    ```mlir
    // before
    %r = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<4x3xbf16> -> tensor<4x3xbf16>
    %f = loom.convert %r to f32 : tensor<4x3xbf16> -> tensor<4x3xf32>
    // after
    %c = loom.convert %g to f32 : tensor<4x3xbf16> -> tensor<4x3xf32>
    %f = shard.all_reduce %c on @mesh grid_axes = [1] : tensor<4x3xf32> -> tensor<4x3xf32>
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomUnrollMicroBatchesPass
    : Pass<"loom-unroll-micro-batches", "mlir::ModuleOp"> {
  let summary = "Run the partitioned step once per micro-batch, accumulating the sums over them";
  let description = [{
    Pre: a partitioned step whose mesh has the `micro` axis of
    `loom-choose-mesh` (size m > 1): each data argument typed for one
    micro-batch, collectives over the micro axis where values of all the
    micro-batches meet. Without that axis the pass does nothing.
    Post: a `pp x dp x tp` mesh with `loom.num_micro_batches = m`; each data
    argument is m arguments, one a micro-batch, micro-batch j with
    `loom.sample_offset = j b` (b samples a micro-batch: its place in the
    rank's share of the batch, where the plan's data feeder fills it from).
    Every op that
    depends on the data is run m times, micro-batch after micro-batch, in
    the step's order, so one micro-batch's activations are freed before the
    next one's are made; ops that depend on parameters only run once,
    before their first use. A sum all-reduce over the micro axis becomes
    an accumulation: micro-batch j's value is added to the sum of the ones
    before it as soon as it is made, and the total is all-reduced over the
    mesh axes that remain (if any). An all-gather over it concatenates the
    micro-batches' blocks, an all-slice over it takes micro-batch j's
    block (`loom.micro_batch`). What reads an accumulated sum (the optimizer, the loss) runs
    once, after the last micro-batch. With pipeline stages (pp > 1) each op
    run for micro-batch j is marked `loom.micro_batch = j`, for
    `loom-split-stages` to place it in the schedule.

    The losses and gradients are those of the whole batch: the loss and its
    gradient are scaled by the global element count (`count`), so the sum
    over micro-batches is the mean over the batch. A micro-batch whose
    forward needs the others' (batch statistics over the whole batch) is
    refused.

    ```mlir
    // before: micro = 2, a micro-batch of 2 samples
    shard.grid @mesh(shape = 1x1x1x2) {loom.mesh_axes = ["pp", "dp", "tp", "micro"]}
    func.func @main(%x: tensor<2x8xf32> {loom.input = "x"}, %w: tensor<8x8xf32> {loom.param = "w"}) ... {
      %y = loom.matmul %x, %w ...
      %g = loom.matmul %x, %y {transpose_lhs} ...
      %s = shard.all_reduce %g on @mesh grid_axes = [3] : tensor<8x8xf32> -> tensor<8x8xf32>
      %p = loom.sgd %w, %s ...
    // after
    shard.grid @mesh(shape = 1x1x1) {loom.mesh_axes = ["pp", "dp", "tp"], loom.num_micro_batches = 2 : i64}
    func.func @main(%x0: tensor<2x8xf32> {loom.input = "x", loom.sample_offset = 0 : i64},
                    %x1: tensor<2x8xf32> {loom.input = "x", loom.sample_offset = 2 : i64},
                    %w: tensor<8x8xf32> {loom.param = "w"}) ... {
      %y0 = loom.matmul %x0, %w ...
      %g0 = loom.matmul %x0, %y0 {transpose_lhs} ...
      %y1 = loom.matmul %x1, %w ...
      %g1 = loom.matmul %x1, %y1 {transpose_lhs} ...
      %s = loom.add %g0, %g1 ...
      %p = loom.sgd %w, %s ...
    ```

    `written-micro-batches = k` (k >= 2; 0, the default: all) writes out
    only micro-batches 0 to k-2 and the last, each with its own index and
    sample offset, for the memory estimate (passes/MemoryEstimate.h): every
    micro-batch after the second and before the last holds the buffers the
    second holds, so the shortened step reaches the whole step's peak but
    for the data of the micro-batches it leaves out. A step that gathers a value of
    every micro-batch (an all-gather over the micro axis) is written out
    whole.
  }];
  let options = [
    Option<"writtenMicroBatches", "written-micro-batches", "int64_t",
           /*default=*/"0",
           "micro-batches to write out: 0 to k-2 and the last (0: all)">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomSplitStagesPass : Pass<"loom-split-stages", "mlir::ModuleOp"> {
  let summary = "Cut the step into one function per pipeline device, with send/recv between them";
  let description = [{
    Pre: a `pp x dp x tp` mesh with `loom.pipeline` (loom-partition-stages)
    and `@main` partitioned and written out micro-batch after micro-batch
    (loom-unroll-micro-batches), its ops marked `loom.stage`, the backward
    ones `loom.backward`, those of micro-batch j `loom.micro_batch = j`.
    With `pp = 1` the pass does nothing.
    Post: `@main` is replaced by `@main_stage0` ... `@main_stage<pp-1>`,
    each with `loom.pipeline_device = d`, holding the ops of the stages that
    run on pp device d (stage S runs on device S mod pp) in the order of
    the device's schedule: an op of micro-batch j runs in its forward (F),
    backward (B) or, with `zb-h1`, weight-gradient (W) turn (W: the backward
    ops that make no value another device reads), and no earlier than what
    it reads. A value made on one device and read on another is sent right
    after it is made (`shard.send ... grid_axes = [0] destination = [d]
    {loom.tag = T}`) and received just before its first reader
    (`shard.recv`, of a `tensor.empty`), after whatever its sender sent this
    device before it (transfers between two devices arrive in the order
    they were sent, as transports without tags need), in a turn that starts after the
    sender's (`PipelineSchedule::startTimes`), so the devices' orders are
    parts of one order of the whole step and never wait on each other for
    ever. Parameters and optimizer states are arguments of the device that
    updates them (a tied embedding read on the last device is sent there,
    its gradient sent back); data arguments of every device that reads
    them; constants are made on every device that reads them. Every stage
    function returns the loss (the last stage sends it to the others) and
    the updates it makes.

    ```mlir
    func.func @main_stage0(%x: tensor<4x8xf32> {loom.input = "x"}, %w0: ... {loom.param = "w0"})
        -> (tensor<f32> {loom.loss}, ... {loom.param = "w0"}) attributes {loom.pipeline_device = 0 : i64} {
      %h = loom.matmul %x, %w0 ...
      %s = shard.send %h on @mesh grid_axes = [0] destination = [1] {loom.tag = 0 : i64} ...
      %e = tensor.empty() : tensor<4x8xf32>
      %gh = shard.recv %e on @mesh grid_axes = [0] source = [1] {loom.tag = 1 : i64} ...
      ...
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LoomChooseRecomputePass : Pass<"loom-choose-recompute", "mlir::ModuleOp"> {
  let summary = "Choose which layers' activations the backward pass recomputes";
  let description = [{
    Pre: lowered program functions (`@main`, or `@main_stage<d>` with
    pipeline stages), one device's step in the order it runs. Each program
    is planned on its own. A layer is a set of forward ops with one layer
    key (the outermost numbered module of the ONNX node name, as loom-partition-stages reads
    them) joined by the values they pass each other: one instance per
    micro-batch. Per layer, `none` keeps what the backward reads; `selective`
    recomputes the ops without a contraction (norms, activations, copies)
    whose operands are kept anyway, so the backward keeps their inputs
    instead of their results; `full` keeps only the layer's inputs and runs
    the layer again in the backward. (Loom's attention never stores its
    scores: their recomputation, Korthikanti et al.'s selective choice, is
    built into `loom.attention_grad`.) A value another layer reads in the
    forward pass is a checkpoint and never recomputed, nor are collectives,
    transfers and constants, but for one: a gather over `tp` alone of an
    activation (sequence parallelism's, before a column-parallel linear)
    that the backward reads is made again there when a contraction runs in
    between, so a sequence-parallel layer keeps its 1/tp share (Korthikanti
    et al.). `selective` and `full` always do so, and `selective` runs the
    cheap ops only such a gather reads (the split norm) again with it;
    `none` and `auto` only when the program without it does not fit the
    budget (each costs a gather). The head's gathers, of no layer, are made
    again the same way. The clones of a
    layer instance run just before the first backward op that reads one of
    them; an original nothing reads any more is erased by loom-recompute.

    `mode = auto` takes, among the plans that recompute `full` on the first
    F layers and `selective` on the next S, the one whose recomputed ops
    cost the least time (roofline costs of the `cluster`'s device) whose
    peak fits `memory-budget-gib`; none fits: the one of least peak. The
    peak is the live bytes of the program as the plan emitter places its
    buffers (RecomputePlan.h), so the choice sees the micro-batches in
    flight of a pipeline schedule. `none` recomputes nothing (and marks
    nothing when it gathers nothing again).
    Post: every op to recompute has `loom.recompute = G` (its group, one a
    layer instance), and each program function `loom.remat = {mode,
    full_layers, selective_layers, layers, peak_bytes, recompute_seconds,
    regathered}` (the gathers made again).

    ```mlir
    func.func @main(...) attributes {loom.remat = {full_layers = 0 : i64, layers = 4 : i64, mode = "selective", ...}} {
      %h = loom.layer_norm %x, %s, %b axis 2 {loom.recompute = 0 : i64} ... loc("/h.0/ln_2/...")
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "none, selective, full or auto">,
    Option<"cluster", "cluster", "std::string", "\"cpu:1\"",
           "the cluster whose device costs the recomputation (docs/cluster-spec.md)">,
    Option<"memoryBudgetGib", "memory-budget-gib", "double", "0",
           "bytes a device may hold, in GiB (0: the cluster's device memory)">,
  ];
}

def LoomRecomputePass : Pass<"loom-recompute", "mlir::func::FuncOp"> {
  let summary = "Clone the ops loom-choose-recompute marked into the backward pass";
  let description = [{
    Each group of ops marked `loom.recompute = G` is cloned, in order, just
    before the first backward op that reads one of their results (the
    losses' gradients, ops marked `loom.backward` and what reads them are
    the backward pass); every use at or after that point reads the clone,
    so the originals' buffers die with the forward pass; an original that
    nothing reads then (a gather only the backward read) is erased. The
    clones carry `loom.recomputed`; the marks are removed. CSE must not run
    after it.

    ```mlir
    // before
    %a = loom.gelu %h {loom.recompute = 0 : i64} ...
    %y = loom.linear %a, %w, %b ...
    ...
    %gw = loom.matmul %a, %gy {transpose_lhs} ...
    // after
    %a = loom.gelu %h ...
    %y = loom.linear %a, %w, %b ...
    ...
    %a2 = loom.gelu %h {loom.recomputed} ...
    %gw = loom.matmul %a2, %gy {transpose_lhs} ...
    ```
  }];
}

def LoomBucketAllReducesPass
    : Pass<"loom-bucket-all-reduces", "mlir::func::FuncOp"> {
  let summary = "Group sum all-reduces into buckets overlapped with the ops after them";
  let description = [{
    Pre: a partitioned step (after CSE), one `shard.all_reduce` per
    gradient.
    Post: the f32 sum all-reduces over the same mesh axes whose operand is
    made by an op of its own and read by nothing else are grouped, in the
    order their operands are made, into buckets of about `bucket-bytes`
    (0: what the cluster's link needs to reach its bandwidth,
    `10 n alpha B`, within 64 KiB to 25 MiB and at most a quarter of the
    group's bytes; -1: no buckets). Each bucket is one
    `loom.all_reduce_start` right after its last operand is made and one
    `loom.all_reduce_wait` just before the first use of any of its sums. A
    sum read before the group's last operand is made (inside the backward
    pass) is a bucket of its own.
    A lone sum read right after it is made stays a `shard.all_reduce`. The
    sums are the same; the ops between start and wait run while the bucket
    is reduced.

    ```mlir
    // before
    %a = shard.all_reduce %ga on @mesh grid_axes = [1] : tensor<8xf32> -> tensor<8xf32>
    %gb = loom.matmul ...
    %b = shard.all_reduce %gb on @mesh grid_axes = [1] : tensor<8x8xf32> -> tensor<8x8xf32>
    %x = loom.matmul ...                // more backward
    %p = loom.sgd %w, %a ...
    // after
    %gb = loom.matmul ...
    %f:2 = loom.all_reduce_start %ga, %gb on @mesh grid_axes = [1] bucket 0 : tensor<8xf32>, tensor<8x8xf32>
    %x = loom.matmul ...                // runs while the bucket is reduced
    %s:2 = loom.all_reduce_wait %f#0, %f#1 bucket 0 : tensor<8xf32>, tensor<8x8xf32>
    %p = loom.sgd %w, %s#0 ...
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "0",
           "bytes per bucket (0: from the cluster's link, -1: no buckets)">,
    Option<"cluster", "cluster", "std::string", "\"cpu:1\"",
           "the cluster spec whose links size the buckets (docs/cluster-spec.md)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomBucketBlockCollectivesPass
    : Pass<"loom-bucket-block-collectives", "mlir::func::FuncOp"> {
  let summary = "Group reduce-scatters and all-gathers into overlapped buckets; prefetch ZeRO-3's gathers";
  let description = [{
    Pre: a partitioned step (after CSE and `loom-bucket-all-reduces`).
    Post: the static sum `shard.reduce_scatter`s of f32 tensors and the
    `shard.all_gather`s of f32 or bf16 tensors are grouped by kind, mesh
    axes and element type into buckets of about `bucket-bytes` (as
    `loom-bucket-all-reduces` sizes them; -1: no buckets), each one
    `loom.reduce_scatter_start` or `loom.all_gather_start` and one wait
    just before the first use of any of its results. A bucket of values the
    step makes (gradients; the blocks ZeRO-1 and 2 gather after the update)
    starts where the last of its collectives was (right after its operand
    is made), in the order of the collectives, and a member read before
    the group's last collective goes alone; a start never moves above a
    collective it replaces, so a gather that recomputation placed late (to
    free its result in between) stays late. Gathers of arguments (ZeRO-3's parameter
    shards) are prefetched: in the order the step first reads them, the
    first bucket starts where its earliest gather was and each next one
    right after the wait of the one before, so one bucket is in flight
    while the ops that read the previous one run. A lone collective with
    nothing to overlap stays as it is. Bucket ids follow those of the sums'
    buckets.

    ```mlir
    // before
    %g = loom.matmul ...
    %b = shard.reduce_scatter %g on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
    %x = loom.matmul ...                // more backward
    %p = loom.sgd %w, %b ...
    // after
    %g = loom.matmul ...
    %f = loom.reduce_scatter_start %g on @mesh grid_axes = [1] dims = [0] bucket 0 : tensor<8x4xf32> -> tensor<4x4xf32>
    %x = loom.matmul ...                // runs while the bucket is reduced
    %b = loom.reduce_scatter_wait %f bucket 0 : tensor<4x4xf32>
    %p = loom.sgd %w, %b ...
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "0",
           "bytes per bucket (0: from the cluster's link, -1: no buckets)">,
    Option<"cluster", "cluster", "std::string", "\"cpu:1\"",
           "the cluster spec whose links size the buckets (docs/cluster-spec.md)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

//===----------------------------------------------------------------------===//
// raise: recognise fused ops in imported element-wise graphs
//===----------------------------------------------------------------------===//

def LoomRaiseGeluPass : InterfacePass<"loom-raise-gelu", "mlir::FunctionOpInterface"> {
  let summary = "Recognise GELU written out in element-wise ops";
  let description = [{
    Pre: loom ops as the importer maps ONNX nodes (one op per node, scalar
    constants as `loom.constant`).
    Post: every `0.5 * x * (1 + erf(x / sqrt(2)))` (PyTorch's `nn.GELU()`)
    is a `loom.gelu`, and every `0.5 * x * (1 + tanh(sqrt(2/pi) * (x +
    0.044715 * x^3)))` (`approximate='tanh'`, Hugging Face's `gelu_new`) a
    `loom.gelu {approximate}`. Accepted: the three factors `x`, `0.5`,
    `1 + f` grouped either way; each commutative op's operands in either
    order; `x * (1/sqrt(2))` for the division; `x^3` as `loom.pow x, 3` or
    `x * x * x`. Constants are f32 scalars or splats matched within a
    relative 1e-6. A candidate whose intermediate values have other uses,
    or whose product broadcasts beyond `x`, is left alone.

    ```mlir
    // before
    %0 = loom.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %1 = loom.erf %0 : tensor<2x8xf32>
    %2 = loom.add %1, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %3 = loom.mul %x, %2 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %4 = loom.mul %3, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    // after
    %4 = loom.gelu %x : tensor<2x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomRaiseLayerNormPass : InterfacePass<"loom-raise-layer-norm", "mlir::FunctionOpInterface"> {
  let summary = "Recognise layer normalisation written out in element-wise ops";
  let description = [{
    Pre: loom ops as the importer maps ONNX nodes.
    Post: every `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`, both
    means `loom.reduce_mean` over the same trailing axes `[k, rank)` with
    `keep_dims`, is a `loom.layer_norm axis k` with `epsilon = eps`; a
    following `* gamma` and `+ beta` (shaped like the normalized dimensions,
    possibly with leading 1s) become its scale and bias. Without `gamma` the
    scale is a `loom.constant` of ones; without `beta` there is no bias.
    Accepted: the square as `loom.pow d, 2` or `d * d`; the division as
    `d / sqrt(v)` or `d * rsqrt(v)`, `d * reciprocal(sqrt(v))`,
    `d * (1 / sqrt(v))`; commutative operands in either order. Means over
    other axes, a negative or non-constant `eps`, and intermediate values
    with other uses leave the ops alone.

    ```mlir
    // before
    %m = loom.reduce_mean %x axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = loom.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %p = loom.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %v = loom.reduce_mean %p axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
    %a = loom.add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
    %s = loom.sqrt %a : tensor<4x1xf32>
    %n = loom.div %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %y = loom.mul %n, %gamma : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %z = loom.add %y, %beta : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    // after
    %z = loom.layer_norm %x, %gamma, %beta axis 1 {epsilon = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomRaiseRmsNormPass : InterfacePass<"loom-raise-rms-norm", "mlir::FunctionOpInterface"> {
  let summary = "Recognise RMS normalisation (LLaMA's RMSNorm) written out";
  let description = [{
    Pre: loom ops as the importer maps ONNX nodes.
    Post: every `x * rsqrt(mean(x^2) + eps)`, the mean a `loom.reduce_mean`
    over trailing axes `[k, rank)` with `keep_dims`, is a
    `loom.rms_norm axis k` with `epsilon = eps`; a following `* weight`
    (shaped like the normalized dimensions, possibly with leading 1s) becomes
    its scale, else the scale is a `loom.constant` of ones. Accepted: the
    square as `loom.pow x, 2` or `x * x`; `rsqrt(v)`, `reciprocal(sqrt(v))`,
    `1 / sqrt(v)` as a factor in either order, or `x / sqrt(v)`. Means over
    other axes, a negative or non-constant `eps`, intermediate values with
    other uses, and an `x` that is `y - mean(y)` over the same axes (a layer
    norm, for `loom-raise-layer-norm`) leave the ops alone.

    ```mlir
    // before
    %p = loom.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %v = loom.reduce_mean %p axes [1] {keep_dims} : tensor<4x8xf32> -> tensor<4x1xf32>
    %a = loom.add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
    %r = loom.rsqrt %a : tensor<4x1xf32>
    %n = loom.mul %x, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %y = loom.mul %w, %n : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    // after
    %y = loom.rms_norm %x, %w axis 1 {epsilon = 9.9999999999999995E-7 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomRaiseLinearPass : InterfacePass<"loom-raise-linear", "mlir::FunctionOpInterface"> {
  let summary = "Fuse a matmul and its bias add into `loom.linear`";
  let description = [{
    Pre: loom ops as the importer maps ONNX nodes (`Gemm` is
    `loom.matmul {transpose_rhs}` + `loom.add`, `MatMul` + `Add` stay two ops).
    Post: every `loom.add` of a `loom.matmul` without `transpose_lhs`, with a
    2-D right operand and no other use, and a bias `[N]` (or `[1, ..., 1, N]`,
    reshaped to `[N]`) that does not change the result's shape, is a
    `loom.linear` (`transpose_weight` from `transpose_rhs`). A linear whose
    input flattens `[D..., K]` to `[prod(D), K]` and whose one user restores
    `[D..., N]` (Hugging Face's `Conv1D`) reads `[D..., K]` itself, so each
    leading dimension (the batch, the sequence) stays a loop of its own.

    ```mlir
    // before
    %0 = loom.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
    %1 = loom.add %0, %b : (tensor<2x4x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
    // after
    %1 = loom.linear %x, %w, %b {transpose_weight} : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomRaiseAttentionPass : InterfacePass<"loom-raise-attention", "mlir::FunctionOpInterface"> {
  let summary = "Fuse scaled dot-product attention into `loom.attention`";
  let description = [{
    Pre: loom ops as the importer maps ONNX nodes.
    Post: every `P V` product whose `P` is a softmax over the keys of
    `scale * Q K^T` — `K^T` as `batch_matmul {transpose_rhs}` or a transpose
    whose last two dimensions are K's swapped, the scale a division or product by a scalar
    constant (or absent), masked by nothing, a constant all-zero additive
    mask, or a constant causal mask (a lower-triangular 0/1 `select`
    condition filled with a value <= -1e4, or an additive mask that is 0 on
    and below the diagonal and <= -1e4 above) — with every intermediate used
    once and `q`, `k`, `v` sharing their leading dimensions, is a
    `loom.attention`. Masks computed from inputs are left alone.

    ```mlir
    // before
    %s = loom.batch_matmul %q, %k {transpose_rhs} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    %d = loom.div %s, %c4 : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    %m = loom.select %tril, %d, %min : (tensor<1x1x8x8xf32>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    %p = loom.softmax %m axis 3 : tensor<2x4x8x8xf32>
    %o = loom.batch_matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
    // after
    %o = loom.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64} : (...) -> tensor<2x4x8x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

#endif // LOOM_PASSES_TD
