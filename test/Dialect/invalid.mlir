// RUN: loom-opt %s -split-input-file -verify-diagnostics

// Contraction sizes must agree.
func.func @matmul_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{loom.matmul contraction sizes differ: 3 vs 4}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// gather_elements' indices have the data's shape outside the axis.
func.func @gather_elements_shape(%a: tensor<2x3xf32>, %i: tensor<3x1xi64>) {
  // expected-error @+1 {{'loom.gather_elements' op indices shape (3, 1) differs from the data's (2, 3) outside axis 1}}
  %0 = loom.gather_elements %a, %i axis 1 : (tensor<2x3xf32>, tensor<3x1xi64>) -> tensor<3x1xf32>
  return
}

// -----

func.func @gather_elements_axis(%a: tensor<2x3xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{'loom.gather_elements' op axis 2 is out of range}}
  %0 = loom.gather_elements %a, %i axis 2 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_elements_grad_shape(%g: tensor<2x2xf32>, %i: tensor<2x1xi64>, %a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.gather_elements_grad' op gradient and indices differ in shape}}
  %0 = loom.gather_elements_grad %g, %i, %a axis 1 : (tensor<2x2xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scatter_nd_reduction(%a: tensor<4x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.scatter_nd' op reduction 'max' is not one of none, add, mul}}
  %0 = loom.scatter_nd %a, %i, %u {reduction = "max"} : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @scatter_nd_updates(%a: tensor<4x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{'loom.scatter_nd' op updates of shape (2, 4) for slices of shape (2, 3)}}
  %0 = loom.scatter_nd %a, %i, %u {reduction = "none"} : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @gather_nd_rows(%a: tensor<4x3xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{'loom.gather_nd' op indices of shape (2, 3) do not name slices of data of rank 2}}
  %0 = loom.gather_nd %a, %i : (tensor<4x3xf32>, tensor<2x3xi64>) -> tensor<2xf32>
  return
}

// -----

// The stated result type must be the inferred one.
func.func @wrong_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.relu' op requires the same type for all operands and results}}
  %0 = "loom.relu"(%a) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

// Broadcasting follows NumPy rules.
func.func @no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{operand shapes 2x3 and 4 do not broadcast}}
  // expected-error @+1 {{'loom.add' op failed to infer returned types}}
  %0 = loom.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Class-id targets drop the class dimension.
func.func @bad_target(%l: tensor<4x3xf32>, %t: tensor<3xi64>) {
  // expected-error @+1 {{target shape 3 must equal the logits shape 4x3 without its last (class) dimension}}
  %0 = loom.cross_entropy %l, %t : (tensor<4x3xf32>, tensor<3xi64>) -> tensor<f32>
  return
}

// -----

// A transpose needs a permutation.
func.func @bad_perm(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation is not a permutation of [0, rank)}}
  %0 = "loom.transpose"(%a) <{permutation = array<i64: 0, 0>}> : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

// Layer norm parameters are shaped like the normalised dimensions.
func.func @bad_norm(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{scale shape 4 must equal the normalised dimensions 8}}
  %0 = loom.layer_norm %x, %g axis 1 {epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Reduction axes are sorted, unique and in range.
func.func @bad_axes(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'loom.reduce_sum' op axis 2 is out of range for rank 2}}
  %0 = loom.reduce_sum %x axes [2] : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

// Convolution channels must match the filter and groups.
func.func @bad_conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{loom.conv2d: channels 3 do not match filter 2 x groups 1}}
  // expected-error @+1 {{'loom.conv2d' op failed to infer returned types}}
  %0 = loom.conv2d %x, %w strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// SGD needs its momentum buffer exactly when momentum is non-zero.
func.func @sgd_buffer(%p: tensor<3xf32>) {
  // expected-error @+1 {{a momentum buffer is required exactly when momentum is non-zero (momentum = 9.000000e-01)}}
  %0 = loom.sgd %p, %p {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64, dampening = 0.0 : f64} : tensor<3xf32>
  return
}

// -----

// AdamW betas lie in [0, 1).
func.func @adamw_betas(%p: tensor<3xf32>) {
  // expected-error @+1 {{betas must lie in [0, 1), got 1.000000e+00, 9.990000e-01}}
  %0:3 = loom.adamw %p, %p, %p, %p {lr = 1.0e-3 : f64, beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<3xf32>
  return
}

// -----

// Float operands of one op must have one precision.
func.func @mixed_precision_operands(%a: tensor<2x3xf32>, %b: tensor<2x3xbf16>) {
  // expected-error @+1 {{'loom.add' op operand #1 is 'bf16' but operand #0 is 'f32': float operands must have one precision (convert one with loom.convert)}}
  %0 = loom.add %a, %b : (tensor<2x3xf32>, tensor<2x3xbf16>) -> tensor<2x3xf32>
  return
}

// -----

// The result follows the operands' precision.
func.func @bf16_result_declared_f32(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>) {
  // expected-error @+2 {{'loom.matmul' op inferred type(s) 'tensor<2x4xbf16>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// Every float operand counts, the condition of a select included.
func.func @select_mixed(%a: tensor<2x3xbf16>, %b: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.select' op operand #2 is 'f32' but operand #0 is 'bf16'}}
  %0 = loom.select %a, %a, %b : (tensor<2x3xbf16>, tensor<2x3xbf16>, tensor<2x3xf32>) -> tensor<2x3xbf16>
  return
}

// -----

// Optimizer updates keep f32 master weights.
func.func @adamw_bf16(%p: tensor<4xbf16>) {
  // expected-error @+1 {{'loom.adamw' op operand #0 must be ranked tensor of 32-bit float values}}
  %0:3 = loom.adamw %p, %p, %p, %p {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<4xbf16>
  return
}

// -----

// A conversion changes the element type.
func.func @convert_to_itself(%a: tensor<2x3xbf16>) {
  // expected-error @+1 {{'loom.convert' op converts 'bf16' to itself}}
  %0 = loom.convert %a to bf16 : tensor<2x3xbf16> -> tensor<2x3xbf16>
  return
}

// -----

// The result type is the target type.
func.func @convert_result_mismatch(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'loom.convert' op result element type 'f32' differs from the target type 'bf16'}}
  %0 = loom.convert %a to bf16 : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// Only f32 (holding integers) converts to i64.
func.func @convert_to_integer(%a: tensor<2x3xbf16>) {
  // expected-error @+1 {{'loom.convert' op converts to i64 from f32 only, not from 'bf16'}}
  %0 = loom.convert %a to i64 : tensor<2x3xbf16> -> tensor<2x3xi64>
  return
}

// -----

func.func @slice_grad_piece_not_window(%a: tensor<2x3xf32>, %like: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'loom.slice_grad' op grad of shape 2x3 is not the slice's shape 2x4}}
  %0 = loom.slice_grad %a, %like axes [1] starts [0] ends [4] steps [1] : (tensor<2x3xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @slice_grad_axis_out_of_range(%a: tensor<2x4xf32>, %like: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'loom.slice_grad' op axis 5 is out of range}}
  %0 = loom.slice_grad %a, %like axes [5] starts [0] ends [4] steps [1] : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// A parameter's name is a string.
// expected-error @+1 {{'loom.param' must be a string, got 1 : i64}}
func.func @param_not_a_string(%w: tensor<3xf32> {loom.param = 1}) -> tensor<3xf32> {
  return %w : tensor<3xf32>
}

// -----

// The loss target is a unit attribute.
// expected-error @+1 {{'loom.target' must be a unit attribute, got "t"}}
func.func @target_with_a_value(%t: tensor<3xi64> {loom.target = "t"}) -> tensor<3xi64> {
  return %t : tensor<3xi64>
}

// -----

// An optimizer state names the parameter it belongs to.
// expected-error @+1 {{'loom.state' needs the 'loom.param' it belongs to}}
func.func @state_without_param(%m: tensor<3xf32> {loom.state = "exp_avg"}) -> tensor<3xf32> {
  return %m : tensor<3xf32>
}

// -----

// Only a parameter starts from another initializer.
// expected-error @+1 {{'loom.initializer' belongs on a 'loom.param' argument}}
func.func @initializer_without_param(%m: tensor<3xf32> {loom.initializer = "w"}) -> tensor<3xf32> {
  return %m : tensor<3xf32>
}

// -----

// The loss is a result, not an argument.
// expected-error @+1 {{'loom.loss' is not a role of a function argument (loom.param, loom.initializer, loom.input, loom.target, loom.state, loom.running_mean, loom.running_var, loom.split_axes, loom.fused_blocks, loom.sample_offset, loom.onnx_type)}}
func.func @loss_as_argument(%l: tensor<f32> {loom.loss}) -> tensor<f32> {
  return %l : tensor<f32>
}

// -----

// A result is not an input.
// expected-error @+1 {{'loom.input' is not a role of a function result (loom.output, loom.loss, loom.grad, loom.param, loom.state, loom.running_mean, loom.running_var, loom.onnx_type)}}
func.func @input_as_result(%x: tensor<f32>) -> (tensor<f32> {loom.input = "x"}) {
  return %x : tensor<f32>
}

// -----

// A boundary type names an ONNX type the program holds in f32 or i64.
// expected-error @+1 {{'loom.onnx_type' belongs on a 'loom.input' argument or a 'loom.output' result, as one of "bool", "int8"}}
func.func @onnx_type_unknown(%x: tensor<2xf32> {loom.input = "x", loom.onnx_type = "complex64"}) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{'loom.onnx_type' belongs on a 'loom.input' argument or a 'loom.output' result}}
func.func @onnx_type_on_param(%w: tensor<2xf32> {loom.param = "w", loom.onnx_type = "float64"}) -> tensor<2xf32> {
  return %w : tensor<2xf32>
}

// -----

// The mesh axes name every axis of the grid.
// expected-error @+1 {{'loom.mesh_axes' must name each of the 3 mesh axes, got ["dp", "tp"]}}
shard.grid @mesh(shape = 1x2x1) {loom.mesh_axes = ["dp", "tp"]}

// -----

// ZeRO has stages 0 to 3.
func.func @zero_stage_out_of_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.zero_stage' must be an integer in [0, 3], got 4 : i64}}
  %y = loom.relu %x {loom.zero_stage = 4} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A loom attribute the dialect does not define is refused.
func.func @unknown_mark(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown attribute 'loom.rematerialize'}}
  %y = loom.relu %x {loom.rematerialize} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A recompute group is an integer >= 0.
func.func @recompute_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.recompute' must be an integer in [0, inf], got unit}}
  %y = loom.relu %x {loom.recompute} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The recomputation choice belongs on a program function.
func.func @remat_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.remat' belongs on a func.func, as {mode, ...}, got {full_layers = 1 : i64}}}
  %y = loom.relu %x {loom.remat = {full_layers = 1}} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A clone that recomputation made is marked by a unit attribute.
func.func @recomputed_unit(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.recomputed' must be a unit attribute, got 1 : i64}}
  %y = loom.relu %x {loom.recomputed = 1} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A batch norm names both running statistics with their momentum, or none.
func.func @batch_norm_half_named(%x: tensor<4x3xf32>, %g: tensor<3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'loom.batch_norm' op running_mean, running_var and momentum go together}}
  %y = loom.batch_norm %x, %g, %g {epsilon = 1.0e-05 : f64, running_mean = "m"} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// The momentum weighs the old running statistic: a fraction.
func.func @batch_norm_momentum_out_of_range(%x: tensor<4x3xf32>, %g: tensor<3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'loom.batch_norm' op momentum must lie in [0, 1], got 1.5}}
  %y = loom.batch_norm %x, %g, %g {epsilon = 1.0e-05 : f64, momentum = 1.5 : f64, running_mean = "m", running_var = "v"} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// A running statistic is a string role of an argument.
// expected-error @+1 {{'loom.running_mean' must be a string, got 1 : i64}}
func.func @running_stat_not_a_string(%m: tensor<3xf32> {loom.running_mean = 1}) -> tensor<3xf32> {
  return %m : tensor<3xf32>
}

// -----

// expected-error @+1 {{'loom.split_axes' must be a list of mesh axis lists (array<i64>), one per dimension}}
func.func @split_axes_not_lists(%w: tensor<4xf32> {loom.param = "w", loom.split_axes = [2]}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// A bucket's tensors in flight are read only by its wait.
shard.grid @mesh(shape = 1x2x1)
func.func @bucket_read_in_flight(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.all_reduce_start' op each result must have exactly one use, the bucket's loom.all_reduce_wait}}
  %f = loom.all_reduce_start %g on @mesh grid_axes = [1] bucket 0 : tensor<4xf32>
  %x = loom.relu %f : tensor<4xf32>
  %s = loom.all_reduce_wait %f bucket 0 : tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

// A wait takes all of one start's results, in order.
shard.grid @mesh(shape = 1x2x1)
func.func @bucket_partial_wait(%a: tensor<4xf32>, %b: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  %f:2 = loom.all_reduce_start %a, %b on @mesh grid_axes = [1] bucket 0 : tensor<4xf32>, tensor<2xf32>
  // expected-error @+1 {{'loom.all_reduce_wait' op operands must be all the results of one loom.all_reduce_start, in order}}
  %s:2 = loom.all_reduce_wait %f#1, %f#0 bucket 0 : tensor<2xf32>, tensor<4xf32>
  return %s#1, %s#0 : tensor<4xf32>, tensor<2xf32>
}

// -----

// The wait names its start's bucket.
shard.grid @mesh(shape = 1x2x1)
func.func @bucket_wrong_id(%a: tensor<4xf32>) -> tensor<4xf32> {
  %f = loom.all_reduce_start %a on @mesh grid_axes = [1] bucket 0 : tensor<4xf32>
  // expected-error @+1 {{'loom.all_reduce_wait' op waits for bucket 1 but its operands are in flight in bucket 0}}
  %s = loom.all_reduce_wait %f bucket 1 : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Buckets sum f32 tensors.
shard.grid @mesh(shape = 1x2x1)
func.func @bucket_bf16(%a: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{'loom.all_reduce_start' op operand #0 must be variadic of ranked tensor of 32-bit float values}}
  %f = loom.all_reduce_start %a on @mesh grid_axes = [1] bucket 0 : tensor<4xbf16>
  %s = loom.all_reduce_wait %f bucket 0 : tensor<4xbf16>
  return %s : tensor<4xbf16>
}

// -----

// A bucket of reduce-scatters names one dimension per tensor.
shard.grid @mesh(shape = 1x2x1)
func.func @block_bucket_dims(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  // expected-error @+1 {{'loom.reduce_scatter_start' op needs one result and one entry of dims per operand, got 2 operands, 2 results and 1 dims}}
  %f:2 = loom.reduce_scatter_start %a, %b on @mesh grid_axes = [1] dims = [0] bucket 0 : tensor<4xf32>, tensor<4xf32> -> tensor<2xf32>, tensor<2xf32>
  %s:2 = loom.reduce_scatter_wait %f#0, %f#1 bucket 0 : tensor<2xf32>, tensor<2xf32>
  return %s#0, %s#1 : tensor<2xf32>, tensor<2xf32>
}

// -----

// Each result is its operand split along its dimension, over one group.
shard.grid @mesh(shape = 1x2x1)
func.func @block_bucket_shape(%a: tensor<4x6xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'loom.reduce_scatter_start' op result 0 ('tensor<4x3xf32>') is not operand 0 ('tensor<4x6xf32>') scattered along dim 0}}
  %f = loom.reduce_scatter_start %a on @mesh grid_axes = [1] dims = [0] bucket 0 : tensor<4x6xf32> -> tensor<4x3xf32>
  %s = loom.reduce_scatter_wait %f bucket 0 : tensor<4x3xf32>
  return %s : tensor<4x3xf32>
}

// -----

shard.grid @mesh(shape = 1x2x1)
func.func @block_bucket_group(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'loom.all_gather_start' op result 1 ('tensor<8xf32>') is not operand 1 ('tensor<2xf32>') gathered along dim 0 over the bucket's group}}
  %f:2 = loom.all_gather_start %a, %b on @mesh grid_axes = [1] dims = [0, 0] bucket 0 : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>, tensor<8xf32>
  %s:2 = loom.all_gather_wait %f#0, %f#1 bucket 0 : tensor<4xf32>, tensor<8xf32>
  return %s#0, %s#1 : tensor<4xf32>, tensor<8xf32>
}

// -----

// A bucket is one buffer: one element type.
shard.grid @mesh(shape = 1x2x1)
func.func @block_bucket_types(%a: tensor<2xf32>, %b: tensor<2xbf16>) -> (tensor<4xf32>, tensor<4xbf16>) {
  // expected-error @+1 {{'loom.all_gather_start' op all operands and results must have one element type (the bucket is one buffer)}}
  %f:2 = loom.all_gather_start %a, %b on @mesh grid_axes = [1] dims = [0, 0] bucket 0 : tensor<2xf32>, tensor<2xbf16> -> tensor<4xf32>, tensor<4xbf16>
  %s:2 = loom.all_gather_wait %f#0, %f#1 bucket 0 : tensor<4xf32>, tensor<4xbf16>
  return %s#0, %s#1 : tensor<4xf32>, tensor<4xbf16>
}

// -----

// A reduce-scatter bucket sums f32.
shard.grid @mesh(shape = 1x2x1)
func.func @block_bucket_bf16_sum(%a: tensor<4xbf16>) -> tensor<2xbf16> {
  // expected-error @+1 {{'loom.reduce_scatter_start' op sums f32 tensors only}}
  %f = loom.reduce_scatter_start %a on @mesh grid_axes = [1] dims = [0] bucket 0 : tensor<4xbf16> -> tensor<2xbf16>
  %s = loom.reduce_scatter_wait %f bucket 0 : tensor<2xbf16>
  return %s : tensor<2xbf16>
}

// -----

// The wait takes all of one start's results, of its bucket.
shard.grid @mesh(shape = 1x2x1)
func.func @block_bucket_wait(%a: tensor<2xf32>) -> tensor<4xf32> {
  %f = loom.all_gather_start %a on @mesh grid_axes = [1] dims = [0] bucket 0 : tensor<2xf32> -> tensor<4xf32>
  // expected-error @+1 {{'loom.all_gather_wait' op waits for bucket 2 but its operands are in flight in bucket 0}}
  %s = loom.all_gather_wait %f bucket 2 : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 1x2x1)
func.func @block_bucket_read_early(%a: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.all_gather_start' op each result must have exactly one use, the bucket's loom.all_gather_wait}}
  %f = loom.all_gather_start %a on @mesh grid_axes = [1] dims = [0] bucket 0 : tensor<2xf32> -> tensor<4xf32>
  %x = loom.relu %f : tensor<4xf32>
  %s = loom.all_gather_wait %f bucket 0 : tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

// A micro-batch index is one of the count.
func.func @micro_batch_index(%x: tensor<8x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'loom.micro_batch' op index 4 is not one of the 4 micro-batches}}
  %y = loom.micro_batch %x axis 0 index 4 of 4 : tensor<8x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Micro-batches are equal blocks.
func.func @micro_batch_uneven(%x: tensor<6x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+2 {{loom.micro_batch: 4 equal blocks along axis 0 do not fit}}
  // expected-error @+1 {{'loom.micro_batch' op failed to infer returned types}}
  %y = loom.micro_batch %x axis 0 index 0 of 4 : tensor<6x4xf32> -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// -----

// A sample offset places a micro-batch of data, not a parameter.
// expected-error @+1 {{'loom.sample_offset' belongs on a 'loom.input' or 'loom.target' argument, as an integer >= 0}}
func.func @sample_offset_on_param(%w: tensor<4xf32> {loom.param = "w", loom.sample_offset = 2 : i64}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
