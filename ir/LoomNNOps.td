//===- LoomNNOps.td - Neural-network layers and their backward -*- tablegen -*-===//

#ifndef LOOM_NN_OPS_TD
#define LOOM_NN_OPS_TD

def Loom_SoftmaxOp : Loom_Op<"softmax", [Pure, Loom_SameFloatOperands, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Softmax along `axis`";
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Loom_SoftmaxGradOp : Loom_Op<"softmax_grad", [Pure, Loom_SameFloatOperands, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of softmax: `y * (grad - sum(grad * y, axis))`";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$output, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output `axis` $axis attr-dict `:` type($grad)";
}

def Loom_GeluOp : Loom_Op<"gelu", [Pure, Loom_SameFloatOperands, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "GELU, exact (`erf`) or with the tanh approximation";
  let description = [{
    `approximate = false`: `0.5 x (1 + erf(x / sqrt(2)))`; `true`:
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
  }];
  let arguments = (ins Loom_FloatTensor:$input, UnitAttr:$approximate);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Loom_GeluGradOp : Loom_Op<"gelu_grad", [Pure, Loom_SameFloatOperands, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.gelu` given the forward input";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input, UnitAttr:$approximate);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($grad)";
}

def Loom_LayerNormOp : Loom_Op<"layer_norm", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Layer normalisation over the dimensions from `axis` on";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias`, mean and (biased)
    variance over dimensions `[axis, rank)`; `scale` and `bias` are shaped
    like those dimensions.

    ```mlir
    %y = loom.layer_norm %x, %g, %b axis 2 {epsilon = 1.0e-05 : f64} : (tensor<2x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<2x64x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Optional<Loom_FloatTensor>:$bias, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? `axis` $axis attr-dict `:` `(` type($input) `,` type($scale) (`,` type($bias)^)? `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_LayerNormGradOp : Loom_Op<"layer_norm_grad", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.layer_norm`: gradients of input, scale and bias";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                       Loom_FloatTensor:$scale, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$grad_input, Loom_FloatTensor:$grad_scale,
                      Loom_FloatTensor:$grad_bias);
  let assemblyFormat = [{
    $grad `,` $input `,` $scale `axis` $axis attr-dict `:` `(` type($grad) `,` type($input) `,` type($scale) `)` `->` `(` type(results) `)`
  }];
}

def Loom_RmsNormOp : Loom_Op<"rms_norm", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "RMS normalisation over the dimensions from `axis` on";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale` (LLaMA's RMSNorm), mean over
    dimensions `[axis, rank)`.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `axis` $axis attr-dict `:` `(` type($input) `,` type($scale) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_RmsNormGradOp : Loom_Op<"rms_norm_grad", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.rms_norm`: gradients of input and scale";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                       Loom_FloatTensor:$scale, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$grad_input, Loom_FloatTensor:$grad_scale);
  let assemblyFormat = [{
    $grad `,` $input `,` $scale `axis` $axis attr-dict `:` `(` type($grad) `,` type($input) `,` type($scale) `)` `->` `(` type(results) `)`
  }];
}

def Loom_BatchNormOp : Loom_Op<"batch_norm", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Training-mode batch normalisation of NC... tensors";
  let description = [{
    Normalises each channel (dimension 1) with the mean and biased variance
    of this rank's batch over all other dimensions, then applies `scale` and
    `bias` `[C]`. Under data parallelism `loom-sync-batch-norm` writes it
    out so that the statistics are the global batch's.

    `running_mean` and `running_var`, when set, name the ONNX initializers
    of the running statistics that the batch's statistics update with
    `momentum` (ONNX's: `running * momentum + batch * (1 - momentum)`);
    `loom-append-running-stats` makes them state of the training step and
    removes the attributes.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$bias, F64Attr:$epsilon,
                       OptionalAttr<F64Attr>:$momentum,
                       OptionalAttr<StrAttr>:$running_mean,
                       OptionalAttr<StrAttr>:$running_var);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias attr-dict `:` `(` type($input) `,` type($scale) `,` type($bias) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_BatchNormGradOp : Loom_Op<"batch_norm_grad", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.batch_norm`: gradients of input, scale and bias";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                       Loom_FloatTensor:$scale, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$grad_input, Loom_FloatTensor:$grad_scale,
                      Loom_FloatTensor:$grad_bias);
  let assemblyFormat = [{
    $grad `,` $input `,` $scale attr-dict `:` `(` type($grad) `,` type($input) `,` type($scale) `)` `->` `(` type(results) `)`
  }];
}

def Loom_Conv2dOp : Loom_Op<"conv2d", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "2-D convolution, NCHW input, OIHW filter";
  let description = [{
    `pads` are `[top, left, bottom, right]`; `groups` splits channels.
    Output `[N, O, (H + top + bottom - dH (kH - 1) - 1) / sH + 1, ...]`.

    ```mlir
    %y = loom.conv2d %x, %w strides [2, 2] pads [3, 3, 3, 3] dilations [1, 1] groups 1 : (tensor<8x3x32x32xf32>, tensor<64x3x7x7xf32>) -> tensor<8x64x16x16xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter `strides` $strides `pads` $pads `dilations` $dilations `groups` $groups attr-dict `:` `(` type($input) `,` type($filter) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_Conv2dGradInputOp : Loom_Op<"conv2d_grad_input", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.conv2d` with respect to its input (shaped like `like`)";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$filter,
                       Loom_FloatTensor:$like, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       I64Attr:$groups);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $filter `,` $like `strides` $strides `pads` $pads `dilations` $dilations `groups` $groups attr-dict `:` `(` type($grad) `,` type($filter) `,` type($like) `)` `->` type($result)
  }];
}

def Loom_Conv2dGradFilterOp : Loom_Op<"conv2d_grad_filter", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.conv2d` with respect to its filter (shaped like `like`)";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                       Loom_FloatTensor:$like, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       I64Attr:$groups);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input `,` $like `strides` $strides `pads` $pads `dilations` $dilations `groups` $groups attr-dict `:` `(` type($grad) `,` type($input) `,` type($like) `)` `->` type($result)
  }];
}

def Loom_MaxPool2dOp : Loom_Op<"max_pool2d", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "2-D max pooling of NCHW tensors (padding never wins)";
  let arguments = (ins Loom_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `kernel` $kernel `strides` $strides `pads` $pads attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_MaxPool2dGradOp : Loom_Op<"max_pool2d_grad", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.max_pool2d`: `grad` routed to each window's first maximum";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input `kernel` $kernel `strides` $strides `pads` $pads attr-dict `:` `(` type($grad) `,` type($input) `)` `->` type($result)
  }];
}

def Loom_AttentionOp : Loom_Op<"attention", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Scaled dot-product attention, optionally causal";
  let description = [{
    `softmax(scale * q k^T + causal mask) v` over the last two dimensions of
    `q`, `k`, `v` `[..., S, D]` (the leading dimensions — batch and heads —
    must be equal). With `causal`, query `i` attends to keys `j <= i`.
    Produced by `loom-raise-attention`; backends compute it without
    materialising the `S x S` scores.

    ```mlir
    %o = loom.attention %q, %k, %v {causal, scale = 0.17677669529663687 : f64} : (tensor<2x4x64x32xf32>, tensor<2x4x64x32xf32>, tensor<2x4x64x32xf32>) -> tensor<2x4x64x32xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value, F64Attr:$scale, UnitAttr:$causal);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` `(` type($query) `,` type($key) `,` type($value) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_AttentionGradOp : Loom_Op<"attention_grad", [Pure, Loom_SameFloatOperands,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Backward of `loom.attention`: gradients of query, key and value";
  let description = [{
    Recomputes the attention probabilities from `q` and `k` (nothing of the
    forward pass is saved besides its inputs).
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$query,
                       Loom_FloatTensor:$key, Loom_FloatTensor:$value,
                       F64Attr:$scale, UnitAttr:$causal);
  let results = (outs Loom_FloatTensor:$grad_query, Loom_FloatTensor:$grad_key,
                      Loom_FloatTensor:$grad_value);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value attr-dict `:` `(` type($grad) `,` type($query) `,` type($key) `,` type($value) `)` `->` `(` type(results) `)`
  }];
}

#endif // LOOM_NN_OPS_TD
