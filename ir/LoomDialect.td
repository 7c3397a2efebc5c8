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
    `NAME`), `loom.input = "NAME"` (graph input `NAME`), `loom.target`
    (the loss target), `loom.output = "NAME"` (graph output `NAME`),
    `loom.loss`, `loom.grad = "NAME"` (the gradient of parameter `NAME`) and
    `loom.state = "SLOT"` with `loom.param` (an optimizer state slot of a
    parameter).

    Every op implements upstream `shard::ShardingInterface`
    (ir/sharding/): its loops, their kinds and which of them a device split
    may cut, so upstream's `sharding-propagation` and `shard-partition`
    passes split a training step across a mesh.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect"];
}

class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic, traits>;

#endif // LOOM_DIALECT_TD
