//===- LoomOps.td - loom dialect operations ----------------*- tablegen -*-===//

#ifndef LOOM_OPS_TD
#define LOOM_OPS_TD

include "ir/LoomDialect.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Loom_F32Tensor : RankedTensorOf<[F32]>;
// Compute ops run in f32 or, under mixed precision, in bf16.
def Loom_FloatTensor : RankedTensorOf<[F32, BF16]>;
def Loom_IdTensor : RankedTensorOf<[I64]>;
def Loom_ScalarF32 : 0DTensorOf<[F32]>;

// All float operands share one element type (the op's precision); integer
// operands (indices, class targets) are not constrained. Verified before
// result-type inference, which takes the element type from those operands.
def Loom_SameFloatOperands : NativeOpTrait<"SameFloatOperandElementType"> {
  let cppNamespace = "::mlir::loom::trait";
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

def Loom_ConstantOp : Loom_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant tensor";
  let description = [{
    ```mlir
    %c = loom.constant dense<2.0> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Loom_MatmulOp : Loom_Op<"matmul", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Matrix product of operands viewed as 2-D matrices";
  let description = [{
    Each operand is viewed as a row-major matrix by collapsing all leading
    dimensions into rows. The result is `op(lhs) * op(rhs)` where `op`
    transposes when `transpose_lhs` / `transpose_rhs` is set. Without
    `transpose_lhs`, the result keeps the leading dimensions of `lhs`
    (`[..., M, K] x [K, N] -> [..., M, N]`); with it, the result is 2-D.

    ```mlir
    %y = loom.matmul %x, %w {transpose_rhs} : (tensor<64x784xf32>, tensor<512x784xf32>) -> tensor<64x512xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

class Loom_BinaryOp<string mnemonic, string desc>
    : Loom_Op<mnemonic, [Pure, Loom_SameFloatOperands, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = desc # " with NumPy broadcasting";
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
}

def Loom_AddOp : Loom_BinaryOp<"add", "Element-wise sum">;
def Loom_SubOp : Loom_BinaryOp<"sub", "Element-wise difference">;
def Loom_MulOp : Loom_BinaryOp<"mul", "Element-wise product">;
def Loom_DivOp : Loom_BinaryOp<"div", "Element-wise quotient">;

class Loom_UnaryOp<string mnemonic, string desc>
    : Loom_Op<mnemonic, [Pure, Loom_SameFloatOperands, SameOperandsAndResultType,
                         DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = desc;
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Loom_ReluOp : Loom_UnaryOp<"relu", "Rectified linear unit">;
def Loom_TanhOp : Loom_UnaryOp<"tanh", "Hyperbolic tangent">;
def Loom_SigmoidOp : Loom_UnaryOp<"sigmoid", "Logistic sigmoid">;

def Loom_ScaleOp : Loom_Op<"scale", [Pure, Loom_SameFloatOperands, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Multiplication by a compile-time factor";
  let arguments = (ins Loom_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
}

class Loom_ActivationGradOp<string mnemonic, string desc>
    : Loom_Op<mnemonic, [Pure, Loom_SameFloatOperands, SameOperandsAndResultType,
                         DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = desc;
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$saved);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $saved attr-dict `:` type($grad)";
}

def Loom_ReluGradOp : Loom_ActivationGradOp<"relu_grad",
    "Backward of relu: `grad` where the forward input `saved` is positive">;
def Loom_TanhGradOp : Loom_ActivationGradOp<"tanh_grad",
    "Backward of tanh: `grad * (1 - saved^2)`, `saved` the forward output">;
def Loom_SigmoidGradOp : Loom_ActivationGradOp<"sigmoid_grad",
    "Backward of sigmoid: `grad * saved * (1 - saved)`, `saved` the forward output">;

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

def Loom_ReshapeOp : Loom_Op<"reshape", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Reshape with ONNX's shape specification";
  let description = [{
    `shape` follows ONNX `Reshape`: `0` copies the input's dimension at the
    same position and one `-1` takes the remaining elements. Keeping `0` for
    the batch dimension lets the op follow batch re-sizing under data
    parallelism.

    ```mlir
    %y = loom.reshape %x [0, -1] : tensor<64x1x28x28xf32> -> tensor<64x784xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input $shape attr-dict `:` type($input) `->` type($result)";
}

def Loom_SumToOp : Loom_Op<"sum_to", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Sum over broadcast dimensions down to the shape of `like`";
  let description = [{
    The backward of NumPy broadcasting: sums `input` over the dimensions that
    broadcasting added or expanded to turn a tensor shaped like `like` into
    one shaped like `input`. Only `like`'s shape is used.

    ```mlir
    %db = loom.sum_to %dy, %b : (tensor<64x512xf32>, tensor<512xf32>) -> tensor<512xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$like);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $like attr-dict `:` `(` type($input) `,` type($like) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

include "ir/LoomMathOps.td"
include "ir/LoomShapeOps.td"
include "ir/LoomNNOps.td"

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Mean softmax cross-entropy over the last dimension";
  let description = [{
    `logits` is `[..., C]`, `target` holds class ids shaped like the leading
    dimensions. The result is the mean over all rows of
    `-log_softmax(logits)[target]`. `count`, when set, is the number of rows
    the mean divides by instead: the rows of the whole batch, on a device
    that holds a block of them (its results are then summed).

    ```mlir
    %l = loom.cross_entropy %logits, %t : (tensor<64x10xf32>, tensor<64xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IdTensor:$target,
                       OptionalAttr<I64Attr>:$count);
  let results = (outs Loom_ScalarF32:$result);
  let assemblyFormat = [{
    $logits `,` $target attr-dict `:` `(` type($logits) `,` type($target) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_CrossEntropyGradOp : Loom_Op<"cross_entropy_grad", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Gradient of `loom.cross_entropy` with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(target)) / rows`, or `/ count` when set
    (as `loom.cross_entropy`).
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IdTensor:$target,
                       OptionalAttr<I64Attr>:$count);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $target attr-dict `:` `(` type($logits) `,` type($target) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_MseOp : Loom_Op<"mse", [Pure, Loom_SameFloatOperands, AllTypesMatch<["prediction", "target"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Mean squared error over all elements";
  let description = [{
    `count`, when set, is the number of elements the mean divides by (the
    whole batch's, on a device that holds a block of it).
  }];
  let arguments = (ins Loom_FloatTensor:$prediction, Loom_FloatTensor:$target,
                       OptionalAttr<I64Attr>:$count);
  let results = (outs Loom_ScalarF32:$result);
  let assemblyFormat = [{
    $prediction `,` $target attr-dict `:` type($prediction) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_MseGradOp : Loom_Op<"mse_grad", [Pure, Loom_SameFloatOperands, AllTypesMatch<["prediction", "target", "result"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Gradient of `loom.mse`: `2 (prediction - target) / numel`";
  let description = [{
    Divides by `count` instead of the element count when set (as `loom.mse`).
  }];
  let arguments = (ins Loom_FloatTensor:$prediction, Loom_FloatTensor:$target,
                       OptionalAttr<I64Attr>:$count);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` type($prediction)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

def Loom_SgdOp : Loom_Op<"sgd", [Pure, AllTypesMatch<["param", "grad"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "One step of PyTorch's SGD on one parameter";
  let description = [{
    Returns the updated parameter and, when `momentum` is non-zero, the
    updated momentum buffer (which must then be given). The runtime performs
    the update in place.

    ```mlir
    %p2 = loom.sgd %p, %g {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<10xf32>
    ```
  }];
  let arguments = (ins Loom_F32Tensor:$param, Loom_F32Tensor:$grad,
                       Optional<Loom_F32Tensor>:$momentum_buffer,
                       F64Attr:$lr, F64Attr:$momentum, F64Attr:$weight_decay,
                       F64Attr:$dampening, UnitAttr:$nesterov);
  let results = (outs Variadic<Loom_F32Tensor>:$results);
  let assemblyFormat = [{
    $param `,` $grad (`,` $momentum_buffer^ `:` type($momentum_buffer))? attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def Loom_AdamwOp : Loom_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "One step of PyTorch's AdamW on one parameter";
  let description = [{
    Returns the updated parameter, first and second moment. The step count
    for bias correction is the runtime's (1-based) step number. The runtime
    performs the update in place.

    ```mlir
    %p2, %m2, %v2 = loom.adamw %p, %g, %m, %v {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<10xf32>
    ```
  }];
  let arguments = (ins Loom_F32Tensor:$param, Loom_F32Tensor:$grad,
                       Loom_F32Tensor:$exp_avg, Loom_F32Tensor:$exp_avg_sq,
                       F64Attr:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs Loom_F32Tensor:$new_param, Loom_F32Tensor:$new_exp_avg,
                      Loom_F32Tensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Overlapped communication
//===----------------------------------------------------------------------===//

def Loom_AllReduceStartOp : Loom_Op<"all_reduce_start",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Start summing a bucket of tensors over mesh axes";
  let description = [{
    Starts one sum all-reduce (upstream `shard.all_reduce`) of all its
    operands together, a bucket: the plan places them side by side in the
    arena and the runtime reduces that one range, without waiting for the
    result. The results are the operands in flight: each has exactly one
    use, the `loom.all_reduce_wait` of the same `bucket`, whose results are
    the sums. Ops between the two run while the bucket is reduced
    (`loom-bucket-all-reduces`).

    ```mlir
    %f:2 = loom.all_reduce_start %g1, %g2 on @mesh grid_axes = [1] bucket 0 : tensor<4x3xf32>, tensor<3xf32>
    // ... more of the backward pass
    %s:2 = loom.all_reduce_wait %f#0, %f#1 bucket 0 : tensor<4x3xf32>, tensor<3xf32>
    ```
  }];
  let arguments = (ins Variadic<Loom_F32Tensor>:$inputs,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes,
                       I64Attr:$bucket);
  let results = (outs Variadic<Loom_F32Tensor>:$in_flight);
  let assemblyFormat = [{
    $inputs `on` $grid `grid_axes` `=` $grid_axes `bucket` $bucket attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
}

def Loom_AllReduceWaitOp : Loom_Op<"all_reduce_wait",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Wait for a bucket's all-reduce and take its sums";
  let description = [{
    The operands are all the results of the `loom.all_reduce_start` of the
    same `bucket`, in order; the results are their sums over the start's
    mesh axes. The runtime waits here until the bucket's reduction is done.

    ```mlir
    %s:2 = loom.all_reduce_wait %f#0, %f#1 bucket 0 : tensor<4x3xf32>, tensor<3xf32>
    ```
  }];
  let arguments = (ins Variadic<Loom_F32Tensor>:$in_flight, I64Attr:$bucket);
  let results = (outs Variadic<Loom_F32Tensor>:$results);
  let assemblyFormat = [{
    $in_flight `bucket` $bucket attr-dict `:` type($in_flight)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The start whose bucket this waits for.
    AllReduceStartOp getStart() {
      return getInFlight().front().getDefiningOp<AllReduceStartOp>();
    }
  }];
}

/// A bucket of block collectives (ZeRO's gradient reduce-scatters and
/// parameter all-gathers): one start, one wait.
class Loom_BlockStartOp<string mnemonic, string upstream, string what>
    : Loom_Op<mnemonic> {
  let arguments = (ins Variadic<Loom_FloatTensor>:$inputs,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes,
                       DenseI64ArrayAttr:$dims, I64Attr:$bucket);
  let results = (outs Variadic<Loom_FloatTensor>:$in_flight);
  let assemblyFormat = [{
    $inputs `on` $grid `grid_axes` `=` $grid_axes `dims` `=` $dims `bucket`
    $bucket attr-dict `:` type($inputs) `->` type($in_flight)
  }];
  let hasVerifier = 1;
  let summary = "Start " # what # " a bucket of tensors over mesh axes";
}

def Loom_ReduceScatterStartOp
    : Loom_BlockStartOp<"reduce_scatter_start", "shard.reduce_scatter",
                        "reduce-scattering"> {
  let description = [{
    Starts the sum reduce-scatter (upstream `shard.reduce_scatter`) of each
    operand along its entry of `dims`, all of them as one collective, a
    bucket: the runtime packs each operand's blocks into one send buffer,
    block by block, and reduce-scatters it without waiting. The results are
    this rank's blocks in flight: each has exactly one use, the
    `loom.reduce_scatter_wait` of the same `bucket`, whose results are the
    blocks. Ops between the two run while the bucket is reduced
    (`loom-bucket-block-collectives`); the operands may be reused at once.

    ```mlir
    %f:2 = loom.reduce_scatter_start %g1, %g2 on @mesh grid_axes = [1] dims = [0, 1] bucket 0 : tensor<4x3xf32>, tensor<3x4xf32> -> tensor<2x3xf32>, tensor<3x2xf32>
    // ... more of the backward pass
    %s:2 = loom.reduce_scatter_wait %f#0, %f#1 bucket 0 : tensor<2x3xf32>, tensor<3x2xf32>
    ```
  }];
}

def Loom_AllGatherStartOp
    : Loom_BlockStartOp<"all_gather_start", "shard.all_gather", "gathering"> {
  let description = [{
    Starts the all-gather (upstream `shard.all_gather`) of each operand
    along its entry of `dims`, all of them as one collective, a bucket:
    the runtime copies the operands side by side into one send buffer and
    gathers it without waiting. The results are the whole tensors in
    flight: each has exactly one use, the `loom.all_gather_wait` of the
    same `bucket`, whose results are the whole tensors. ZeRO-3 starts the
    next bucket of parameters while the ops that read this one run
    (`loom-bucket-block-collectives`).

    ```mlir
    %f = loom.all_gather_start %w on @mesh grid_axes = [1] dims = [0] bucket 1 : tensor<2x4xf32> -> tensor<4x4xf32>
    // ... ops that read earlier parameters
    %w_all = loom.all_gather_wait %f bucket 1 : tensor<4x4xf32>
    ```
  }];
}

class Loom_BlockWaitOp<string mnemonic, string start>
    : Loom_Op<mnemonic, [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Wait for a bucket's " # start # " and take its results";
  let description = [{
    The operands are all the results of the `loom.}] # start # [{` of the
    same `bucket`, in order; the results are its tensors, done. The runtime
    waits here until the bucket's collective is done.
  }];
  let arguments = (ins Variadic<Loom_FloatTensor>:$in_flight, I64Attr:$bucket);
  let results = (outs Variadic<Loom_FloatTensor>:$results);
  let assemblyFormat = [{
    $in_flight `bucket` $bucket attr-dict `:` type($in_flight)
  }];
  let hasVerifier = 1;
}

def Loom_ReduceScatterWaitOp
    : Loom_BlockWaitOp<"reduce_scatter_wait", "reduce_scatter_start">;
def Loom_AllGatherWaitOp
    : Loom_BlockWaitOp<"all_gather_wait", "all_gather_start">;

//===----------------------------------------------------------------------===//
// Micro-batches
//===----------------------------------------------------------------------===//

def Loom_MicroBatchOp : Loom_Op<"micro_batch",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Micro-batch `index` of `count`: a block of a tensor along one axis";
  let description = [{
    The `index`-th of `count` equal blocks of `input` along `axis`, for any
    element type: one micro-batch of a value that exists once but is read
    split along the batch, such as a constant mask
    (`loom-unroll-micro-batches`). When the block is contiguous in memory
    (every dimension before `axis` has size 1) and 64-byte aligned, the
    plan makes it a view of the input's bytes and runs no instruction;
    otherwise an f32 block is a `slice`.

    ```mlir
    %x1 = loom.micro_batch %x axis 0 index 1 of 4 : tensor<8x64xi64> -> tensor<2x64xi64>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis, I64Attr:$index,
                       I64Attr:$count);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis `index` $index `of` $count attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // LOOM_OPS_TD
