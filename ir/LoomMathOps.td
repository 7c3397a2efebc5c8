//===- LoomMathOps.td - Element-wise, reductions, batched matmul -*- tablegen -*-===//

#ifndef LOOM_MATH_OPS_TD
#define LOOM_MATH_OPS_TD

def Loom_BatchMatmulOp : Loom_Op<"batch_matmul", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Batched matrix product with broadcast batch dimensions";
  let description = [{
    NumPy `matmul` on operands of rank >= 2: the last two dimensions are the
    matrices (swapped first when `transpose_lhs` / `transpose_rhs` is set),
    the leading dimensions broadcast.

    ```mlir
    %s = loom.batch_matmul %q, %k {transpose_rhs} : (tensor<2x4x64x32xf32>, tensor<2x4x64x32xf32>) -> tensor<2x4x64x64xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
}

def Loom_LinearOp : Loom_Op<"linear", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Fully connected layer: `matmul(input, weight) + bias`";
  let description = [{
    `input` `[..., K]` (leading dimensions collapsed into rows), `weight`
    `[K, N]` or `[N, K]` with `transpose_weight`, optional `bias` `[N]`.
    Produced by `loom-raise-linear` from a matmul followed by a bias add, so
    backends can fuse the bias into the GEMM.

    ```mlir
    %y = loom.linear %x, %w, %b {transpose_weight} : (tensor<2x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>) -> tensor<2x64x512xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                       Optional<Loom_FloatTensor>:$bias, UnitAttr:$transpose_weight);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` `(` type($input) `,` type($weight) (`,` type($bias)^)? `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_PowOp : Loom_BinaryOp<"pow", "Element-wise power">;
def Loom_MaxOp : Loom_BinaryOp<"max", "Element-wise maximum">;
def Loom_MinOp : Loom_BinaryOp<"min", "Element-wise minimum">;

// Comparisons: 1.0 where the relation holds, 0.0 elsewhere (a mask, as
// `loom.select` takes it); no gradient flows through them. Greater and
// greater-or-equal are these with the operands swapped.
def Loom_EqualOp : Loom_BinaryOp<"equal", "Element-wise `lhs == rhs` as 1.0 / 0.0">;
def Loom_LessOp : Loom_BinaryOp<"less", "Element-wise `lhs < rhs` as 1.0 / 0.0">;
def Loom_LessEqualOp : Loom_BinaryOp<"less_equal", "Element-wise `lhs <= rhs` as 1.0 / 0.0">;

def Loom_ExpOp : Loom_UnaryOp<"exp", "Exponential">;
def Loom_LogOp : Loom_UnaryOp<"log", "Natural logarithm">;
def Loom_SqrtOp : Loom_UnaryOp<"sqrt", "Square root">;
def Loom_RsqrtOp : Loom_UnaryOp<"rsqrt", "Reciprocal square root">;
def Loom_NegOp : Loom_UnaryOp<"neg", "Negation">;
def Loom_ReciprocalOp : Loom_UnaryOp<"reciprocal", "Reciprocal">;
def Loom_ErfOp : Loom_UnaryOp<"erf", "Error function">;
def Loom_SinOp : Loom_UnaryOp<"sin", "Sine">;
def Loom_CosOp : Loom_UnaryOp<"cos", "Cosine">;
def Loom_TruncOp : Loom_UnaryOp<"trunc", "Round toward zero">;
def Loom_RoundF16Op : Loom_UnaryOp<"round_f16",
    "Round to the nearest float16 value (ties to even, overflow to infinity), held in f32">;

def Loom_SelectOp : Loom_Op<"select", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "`condition != 0 ? on_true : on_false`, all three broadcast";
  let description = [{
    The condition is an f32 mask (ONNX `Where`'s boolean condition is
    converted to 0/1 by the importer).
  }];
  let arguments = (ins Loom_FloatTensor:$condition, Loom_FloatTensor:$on_true,
                       Loom_FloatTensor:$on_false);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` `(` type($condition) `,` type($on_true) `,` type($on_false) `)` `->` type($result)
  }];
}

class Loom_ReduceOp<string mnemonic, string desc>
    : Loom_Op<mnemonic, [Pure, Loom_SameFloatOperands, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = desc # " over `axes`";
  let description = [{
    Reduces the listed axes (non-negative, sorted, unique); `keep_dims`
    keeps them with size 1. The gradient of `reduce_max` is shared evenly by
    the elements equal to the max (PyTorch's `amax`).

    ```mlir
    %m = loom.}] # mnemonic # [{ %x axes [2] {keep_dims} : tensor<2x64x128xf32> -> tensor<2x64x1xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keep_dims);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `axes` $axes attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_ReduceSumOp : Loom_ReduceOp<"reduce_sum", "Sum">;
def Loom_ReduceMeanOp : Loom_ReduceOp<"reduce_mean", "Mean">;
def Loom_ReduceMaxOp : Loom_ReduceOp<"reduce_max", "Maximum">;

#endif // LOOM_MATH_OPS_TD
