//===- LoomDialect.td - The loom dialect definition --------*- tablegen -*-===//

#ifndef LOOM_DIALECT_TD
#define LOOM_DIALECT_TD

include "mlir/IR/OpBase.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::mlir::loom";
  let summary = "Training-step operations for distributed deep learning";
  let description = [{
    The `loom` dialect holds what upstream MLIR lacks for a training step:
    neural-network operators imported from ONNX, their backward operators,
    losses and optimizer updates. Tensors are ranked with static shapes.
    Sharding uses the upstream `shard` dialect.

    Function arguments and results carry the roles of the values they hold:
    `loom.param = "NAME"` (a weight, initialised from the ONNX initializer
    `NAME`, or from `loom.initializer = "OTHER"` when the exporter merged it
    into another one), `loom.input = "NAME"` (graph input `NAME`), `loom.target`
    (the loss target; with `loom.sample_offset = N` on either, the argument
    holds one micro-batch, whose first sample is sample N of the rank's
    share of the batch), `loom.output = "NAME"` (graph output `NAME`;
    `loom.onnx_type = "bool"`, `"uint8"`, `"float64"`, ... on an input or
    output says the graph value has that ONNX element type, held in f32 or
    i64),
    `loom.loss`, `loom.grad = "NAME"` (the gradient of parameter `NAME`) and
    `loom.state = "SLOT"` with `loom.param` (an optimizer state slot of a
    parameter), `loom.running_mean = "NAME"` / `loom.running_var = "NAME"`
    (a batch norm's running statistic, state of the step that is not
    trained, initialised from and written back to the ONNX initializer
    `NAME`). Operations may carry `loom.mesh_axes` (on the `shard.grid`:
    one name per mesh axis), `loom.model_path`, `loom.opset` and `loom.tied`
    (on the module: the ONNX model it was imported from, and its
    initializers that are copies of a parameter), and the planner's marks
    `loom.stage` (pipeline stage, >= 0), `loom.backward` (an op of the
    backward pass), `loom.micro_batch` (the micro-batch an op runs for, >= 0),
    `loom.tag` (on `shard.send` / `shard.recv`: the transfer's tag, 0 to
    32767), `loom.pipeline_device` (on a stage function: the pp coordinate of
    the devices that run it), `loom.recompute = G` (on a
    forward op: run it again in the backward, with the other ops of group
    G), `loom.recomputed` (an op so run again), `loom.remat` (on a program
    function: loom-choose-recompute's choice), `loom.zero_stage` (0 to 3) and `loom.num_micro_batches`
    (on the `shard.grid`: the micro-batches a step runs, >= 1) and
    `loom.pipeline` (on the `shard.grid`: the stages' layers and schedule,
    `loom-partition-stages`). The dialect verifies each
    where it appears, and rejects a `loom.` attribute it does not know.

    Every op implements upstream `shard::ShardingInterface`
    (ir/sharding/): its loops, their kinds and which of them a device split
    may cut, so upstream's `sharding-propagation` and `shard-partition`
    passes split a training step across a mesh.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect"];

  // Roles of function arguments and results, the plan's marks, and the
  // importer's facts; each is checked by the dialect's verifiers
  // (LoomDialect.cpp) wherever it appears.
  let discardableAttrs = (ins
    // Arguments and results.
    "StringAttr":$param,
    "StringAttr":$initializer,
    "StringAttr":$input,
    "UnitAttr":$target,
    "StringAttr":$output,
    "UnitAttr":$loss,
    "StringAttr":$grad,
    "StringAttr":$state,
    "StringAttr":$running_mean,
    "StringAttr":$running_var,
    // An argument's split as partition leaves it: per dimension, the mesh
    // axes (array<i64>) its global size is split over.
    "ArrayAttr":$split_axes,
    // A parameter viewed with a fused dimension's blocks as a dimension of
    // their own (loom-split-fused-projections): [D, B], the initializer's
    // dimension D is the view's D (B blocks) and D + 1.
    "DenseI64ArrayAttr":$fused_blocks,
    // A data argument that holds one micro-batch: its first sample's offset
    // in the rank's share of the global batch.
    "IntegerAttr":$sample_offset,
    // A graph input or output whose ONNX element type the program holds in
    // another one (docs/frontend.md, "Element types"): "bool", "int8",
    // "uint8", "int16", "uint16", "int32", "uint32", "uint64", "float16",
    // "bfloat16" or "float64". The runtime converts at the boundary.
    "StringAttr":$onnx_type,
    // Operations: the mesh axes' names on the `shard.grid`, the module's
    // model, and what the planner decides per op.
    "ArrayAttr":$mesh_axes,
    "StringAttr":$model_path,
    "IntegerAttr":$opset,
    "DictionaryAttr":$tied,
    "IntegerAttr":$stage,
    // A backward op of the step (loom-partition-stages), the micro-batch an
    // op runs for (loom-unroll-micro-batches, with pipeline stages), a
    // pipeline transfer's tag (on shard.send / shard.recv) and the pp
    // coordinate of the devices that run a stage function.
    "UnitAttr":$backward,
    "IntegerAttr":$micro_batch,
    "IntegerAttr":$tag,
    "IntegerAttr":$pipeline_device,
    // A forward op that loom-recompute runs again in the backward (its
    // group: loom-choose-recompute), a clone so made, and the choice on a
    // program function.
    "IntegerAttr":$recompute,
    "UnitAttr":$recomputed,
    "DictionaryAttr":$remat,
    "IntegerAttr":$zero_stage,
    "IntegerAttr":$num_micro_batches,
    "DictionaryAttr":$pipeline
  );
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
}

class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic, traits>;

#endif // LOOM_DIALECT_TD
