//===- LoomShapeOps.td - Layout and indexing ops ------------*- tablegen -*-===//

#ifndef LOOM_SHAPE_OPS_TD
#define LOOM_SHAPE_OPS_TD

def Loom_TransposeOp : Loom_Op<"transpose", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Permute dimensions";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`.

    ```mlir
    %y = loom.transpose %x [0, 2, 1, 3] : tensor<2x64x4x32xf32> -> tensor<2x4x64x32xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_ExpandOp : Loom_Op<"expand", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Broadcast to a shape (NumPy rules)";
  let description = [{
    `shape` is right-aligned against the input's shape like NumPy
    broadcasting; an entry `-1` keeps the input's dimension at that position,
    so the op follows batch re-sizing.

    ```mlir
    %y = loom.expand %x [-1, 4, -1, -1] : tensor<2x1x64x32xf32> -> tensor<2x4x64x32xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input $shape attr-dict `:` type($input) `->` type($result)";
}

def Loom_BroadcastLikeOp : Loom_Op<"broadcast_like", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Broadcast to the shape of `like` (NumPy rules)";
  let description = [{
    The backward of `loom.sum_to`. Only `like`'s shape is used.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$like);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $like attr-dict `:` `(` type($input) `,` type($like) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_SliceOp : Loom_Op<"slice", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Strided slice along some axes";
  let description = [{
    For each listed axis, takes `start, start+step, ...` below `end`.
    `start` and `end` are clamped to `[0, dim]` (so an `end` past the
    dimension means "to the end", also after the batch shrinks); `step` is
    positive.

    ```mlir
    %y = loom.slice %x axes [2] starts [0] ends [128] steps [1] : tensor<2x64x384xf32> -> tensor<2x64x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$ends,
                       DenseI64ArrayAttr:$steps);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `axes` $axes `starts` $starts `ends` $ends `steps` $steps attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_SliceGradOp : Loom_Op<"slice_grad", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.slice`: zeros shaped like `like` with `grad` at the slice";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$like,
                       DenseI64ArrayAttr:$axes, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs Loom_FloatTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $like `axes` $axes `starts` $starts `ends` $ends `steps` $steps attr-dict `:` `(` type($grad) `,` type($like) `)` `->` type($result)
  }];
}

def Loom_ConcatOp : Loom_Op<"concat", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Concatenate along an axis";
  let arguments = (ins Variadic<Loom_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$inputs `axis` $axis attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

def Loom_GatherOp : Loom_Op<"gather", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Gather slices of `data` along `axis` at integer `indices` (ONNX Gather)";
  let description = [{
    The result is `data.shape[:axis] + indices.shape + data.shape[axis+1:]`.
    Negative indices count from the end. An embedding lookup is a gather
    along axis 0.

    ```mlir
    %e = loom.gather %table, %ids axis 0 : (tensor<512x128xf32>, tensor<2x64xi64>) -> tensor<2x64x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$data, Loom_IdTensor:$indices, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `axis` $axis attr-dict `:` `(` type($data) `,` type($indices) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_GatherGradOp : Loom_Op<"gather_grad", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.gather`: scatter-add `grad` into zeros shaped like `like`";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_IdTensor:$indices,
                       Loom_FloatTensor:$like, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices `,` $like `axis` $axis attr-dict `:` `(` type($grad) `,` type($indices) `,` type($like) `)` `->` type($result)
  }];
}

def Loom_GatherElementsOp : Loom_Op<"gather_elements", [Pure,
    Loom_SameFloatOperands, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Gather elements of `data` along `axis` (ONNX GatherElements)";
  let description = [{
    `result[..., j, ...] = data[..., indices[..., j, ...], ...]`, the index
    replacing the coordinate along `axis`. `indices` has `data`'s shape except
    along `axis` (the importer slices `data` first where ONNX's indices are
    smaller); the result has the indices' shape. Negative indices count from
    the end.

    ```mlir
    %p = loom.gather_elements %logp, %t axis 1 : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$data, Loom_IdTensor:$indices, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `axis` $axis attr-dict `:` `(` type($data) `,` type($indices) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_GatherElementsGradOp : Loom_Op<"gather_elements_grad", [Pure,
    Loom_SameFloatOperands, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.gather_elements`: scatter-add `grad` into zeros shaped like `like`";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_IdTensor:$indices,
                       Loom_FloatTensor:$like, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices `,` $like `axis` $axis attr-dict `:` `(` type($grad) `,` type($indices) `,` type($like) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_ScatterNdOp : Loom_Op<"scatter_nd", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Write slices of `updates` into a copy of `data` at index tuples (ONNX ScatterND)";
  let description = [{
    `indices` is `[..., k]`: each row of `k` indices (negative ones count from
    the end) names a slice `data[i0, ..., ik-1]` of shape `data.shape[k:]`,
    which the matching slice of `updates` (shape `indices.shape[:-1] +
    data.shape[k:]`) replaces (`reduction = "none"`), is added to (`"add"`)
    or multiplies (`"mul"`), row after row in order.

    ```mlir
    %y = loom.scatter_nd %x, %i, %u {reduction = "add"} : (tensor<4x8xf32>, tensor<2x1xi64>, tensor<2x8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$data, Loom_IdTensor:$indices,
                       Loom_FloatTensor:$updates, StrAttr:$reduction);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `,` $updates attr-dict `:` `(` type($data) `,` type($indices) `,` type($updates) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_GatherNdOp : Loom_Op<"gather_nd", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Read slices of `data` at index tuples (ONNX GatherND, batch_dims 0)";
  let description = [{
    `indices` is `[..., k]`; the result, `indices.shape[:-1] + data.shape[k:]`,
    holds the slice `data[i0, ..., ik-1]` of each row (negative indices count
    from the end). It is also the gradient of `loom.scatter_nd`'s updates.
  }];
  let arguments = (ins Loom_FloatTensor:$data, Loom_IdTensor:$indices);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` `(` type($data) `,` type($indices) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_ConvertOp : Loom_Op<"convert", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Convert elements to another numeric type";
  let description = [{
    Converts each element of an `i64`, `f32` or `bf16` tensor to `to`
    (`f32` or `bf16`, different from the input's element type), or an `f32`
    tensor that holds integers (position ids the importer computed in f32)
    to `i64`, rounding to the nearest integer. Integers convert exactly up to
    2^24 (f32) or 2^8 (bf16); `f32` to `bf16` rounds to nearest even. The
    result keeps the input's shape, so the op re-infers when the shape
    changes.

    ```mlir
    %m = loom.convert %ids to f32 : tensor<2x64xi64> -> tensor<2x64xf32>
    %h = loom.convert %w to bf16 : tensor<128x512xf32> -> tensor<128x512xbf16>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I64, F32, BF16]>:$input, TypeAttr:$to);
  let results = (outs RankedTensorOf<[I64, F32, BF16]>:$result);
  let assemblyFormat = "$input `to` $to attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif // LOOM_SHAPE_OPS_TD
