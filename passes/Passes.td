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
    Option<"loss", "loss", "std::string", "\"cross_entropy\"",
           "cross_entropy | mse | output">,
    Option<"outputName", "output-name", "std::string", "\"\"",
           "graph output the loss is computed from (default: the first)">,
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
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"", "adamw | sgd">,
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

//===----------------------------------------------------------------------===//
// plan: annotate
//===----------------------------------------------------------------------===//

def LoomChooseMeshPass : Pass<"loom-choose-mesh", "mlir::ModuleOp"> {
  let summary = "Choose the device mesh (pp x dp x tp) and record it as a shard.grid";
  let description = [{
    Pre: a module with one training-step function `@main`.
    Post: `shard.grid @mesh(shape = PPxDPxTP)` at the top of the module and
    `loom.mesh_axes = ["pp", "dp", "tp"]` on it. Only data parallelism is
    planned so far: `dp = devices`, `pp = tp = 1`. The batch (dimension 0
    of every `loom.input` / `loom.target` argument) must divide by `dp`.

    ```mlir
    shard.grid @mesh(shape = 1x4x1) {loom.mesh_axes = ["pp", "dp", "tp"]}
    ```
  }];
  let options = [
    Option<"devices", "devices", "int64_t", "1", "number of devices">,
    Option<"dp", "dp", "int64_t", "0", "force the data-parallel degree (0: choose)">,
    Option<"tp", "tp", "int64_t", "1", "force the tensor-parallel degree">,
    Option<"pp", "pp", "int64_t", "1", "force the pipeline-parallel degree">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

//===----------------------------------------------------------------------===//
// lower: rewrite
//===----------------------------------------------------------------------===//

def LoomPartitionDataParallelPass
    : Pass<"loom-partition-data-parallel", "mlir::ModuleOp"> {
  let summary = "Rewrite the training step into one data-parallel rank's program";
  let description = [{
    Pre: `shard.grid @mesh` from `loom-choose-mesh`; `@main` a training step
    (after `loom-append-optimizer`).
    Post: every `loom.input` / `loom.target` argument has its batch dimension
    divided by `dp`, all types are re-inferred, each gradient is summed over
    the `dp` axis with `shard.all_reduce` and scaled by `1/dp` before the
    optimizer, and the returned loss is likewise averaged, so every rank holds
    global-batch means. A mesh with `dp = 1` leaves the function unchanged.

    ```mlir
    %s = shard.all_reduce %g on @mesh grid_axes = [1] : tensor<8x3xf32> -> tensor<8x3xf32>
    %a = loom.scale %s by 2.500000e-01 : tensor<8x3xf32>
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect", "::mlir::loom::LoomDialect"];
}

#endif // LOOM_PASSES_TD
