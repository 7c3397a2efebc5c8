//===- OpTable.cpp - The ops a plan may name, with arities ------*- C++ -*-===//

#include "runtime/OpTable.h"

namespace loom::runtime {

const std::vector<OpInfo> &opTable() {
  // name, inputs min/max, outputs min/max
  static const std::vector<OpInfo> table = {
      {"matmul", 2, 2, 1, 1},
      {"add", 2, 2, 1, 1},
      {"sub", 2, 2, 1, 1},
      {"mul", 2, 2, 1, 1},
      {"div", 2, 2, 1, 1},
      {"relu", 1, 1, 1, 1},
      {"tanh", 1, 1, 1, 1},
      {"sigmoid", 1, 1, 1, 1},
      {"relu_grad", 2, 2, 1, 1},
      {"tanh_grad", 2, 2, 1, 1},
      {"sigmoid_grad", 2, 2, 1, 1},
      {"scale", 1, 1, 1, 1},
      {"copy", 1, 1, 1, 1},
      {"sum_to", 1, 1, 1, 1},
      {"cross_entropy", 2, 2, 1, 1},
      {"cross_entropy_grad", 2, 2, 1, 1},
      {"mse", 2, 2, 1, 1},
      {"mse_grad", 2, 2, 1, 1},
      {"all_reduce", 1, 1, 1, 1},
      {"all_reduce_start", 1, 1, 1, 1},
      {"all_reduce_wait", 1, 1, 1, 1},
      {"reduce_scatter_start", 1, 1 << 20, 2, 2},
      {"reduce_scatter_wait", 2, 2, 1, 1 << 20},
      {"all_gather_start", 1, 1 << 20, 2, 2},
      {"all_gather_wait", 2, 2, 1, 1 << 20},
      {"all_slice", 1, 1, 1, 1},
      {"all_gather", 1, 1, 1, 1},
      {"reduce_scatter", 1, 1, 1, 1},
      {"all_to_all", 1, 1, 1, 1},
      {"sgd", 2, 3, 1, 2},
      {"adamw", 4, 4, 3, 3},
      {"batch_matmul", 2, 2, 1, 1},
      {"linear", 2, 3, 1, 1},
      {"pow", 2, 2, 1, 1},
      {"max", 2, 2, 1, 1},
      {"min", 2, 2, 1, 1},
      {"equal", 2, 2, 1, 1},
      {"less", 2, 2, 1, 1},
      {"less_equal", 2, 2, 1, 1},
      {"select", 3, 3, 1, 1},
      {"exp", 1, 1, 1, 1},
      {"log", 1, 1, 1, 1},
      {"sqrt", 1, 1, 1, 1},
      {"rsqrt", 1, 1, 1, 1},
      {"neg", 1, 1, 1, 1},
      {"reciprocal", 1, 1, 1, 1},
      {"erf", 1, 1, 1, 1},
      {"sin", 1, 1, 1, 1},
      {"cos", 1, 1, 1, 1},
      {"round_f16", 1, 1, 1, 1},
      {"trunc", 1, 1, 1, 1},
      {"reduce_sum", 1, 1, 1, 1},
      {"reduce_mean", 1, 1, 1, 1},
      {"reduce_max", 1, 1, 1, 1},
      {"transpose", 1, 1, 1, 1},
      {"expand", 1, 1, 1, 1},
      {"broadcast_like", 1, 1, 1, 1},
      {"recv", 0, 0, 1, 1},
      {"send", 1, 1, 0, 0},
      {"slice", 1, 1, 1, 1},
      {"slice_grad", 1, 1, 1, 1},
      {"concat", 1, 1 << 20, 1, 1},
      {"gather", 2, 2, 1, 1},
      {"gather_grad", 2, 2, 1, 1},
      {"gather_elements", 2, 2, 1, 1},
      {"gather_elements_grad", 2, 2, 1, 1},
      {"scatter_nd", 3, 3, 1, 1},
      {"gather_nd", 2, 2, 1, 1},
      {"convert", 1, 1, 1, 1},
      {"softmax", 1, 1, 1, 1},
      {"softmax_grad", 2, 2, 1, 1},
      {"gelu", 1, 1, 1, 1},
      {"gelu_grad", 2, 2, 1, 1},
      {"layer_norm", 2, 3, 1, 1},
      {"layer_norm_grad", 3, 3, 3, 3},
      {"rms_norm", 2, 2, 1, 1},
      {"rms_norm_grad", 3, 3, 2, 2},
      {"batch_norm", 3, 3, 1, 1},
      {"batch_norm_grad", 3, 3, 3, 3},
      {"conv2d", 2, 2, 1, 1},
      {"conv2d_grad_input", 2, 2, 1, 1},
      {"conv2d_grad_filter", 2, 2, 1, 1},
      {"max_pool2d", 1, 1, 1, 1},
      {"max_pool2d_grad", 2, 2, 1, 1},
      {"attention", 3, 3, 1, 1},
      {"attention_grad", 4, 4, 3, 3},
  };
  return table;
}

const OpInfo *findOp(std::string_view name) {
  for (const OpInfo &op : opTable())
    if (op.name == name)
      return &op;
  return nullptr;
}

std::string knownOpNames() {
  std::string s;
  for (const OpInfo &op : opTable()) {
    if (!s.empty())
      s += ", ";
    s += op.name;
  }
  return s;
}

} // namespace loom::runtime
