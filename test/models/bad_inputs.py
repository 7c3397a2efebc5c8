#!/usr/bin/python3
"""Malformed inputs for Loom's error-path tests.

Writes into DIR:
  truncated.onnx          the MLP model (as mlp.py exports it) cut to half its bytes
  unknown_op.onnx         a valid model (passes onnx.checker, opset 17): x -> Gemm n0
                          -> Relu n1 -> Gemm n2 -> Hardmax n3 -> logits; Hardmax is
                          a real ONNX op that Loom does not support
  x_wrong_shape.npy       float32 [N, in+1] (one feature too many for the MLP)
  not_npy.npy             a text file with a .npy name
  x_float64.npy           float64 [N, in] (right shape, wrong dtype)
  target_out_of_range.npy int64 [N] class ids, some equal to the number of classes
Sizes follow --sizes (default 784,512,512,10, as mlp.py), N = --samples.
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp import build_mlp, export_onnx, parse_sizes  # noqa: E402


def unknown_op_model(n_in, n_hidden, n_out, seed):
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((n_hidden, n_in)) / np.sqrt(n_in)).astype(np.float32)
    b1 = np.zeros(n_hidden, np.float32)
    w2 = (rng.standard_normal((n_out, n_hidden)) / np.sqrt(n_hidden)).astype(np.float32)
    b2 = np.zeros(n_out, np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"], name="n0", transB=1),
        helper.make_node("Relu", ["h1"], ["h2"], name="n1"),
        helper.make_node("Gemm", ["h2", "fc2.weight", "fc2.bias"], ["h3"], name="n2", transB=1),
        helper.make_node("Hardmax", ["h3"], ["logits"], name="n3", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "unknown_op",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", n_in])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", n_out])],
        initializer=[numpy_helper.from_array(w1, "fc1.weight"), numpy_helper.from_array(b1, "fc1.bias"),
                     numpy_helper.from_array(w2, "fc2.weight"), numpy_helper.from_array(b2, "fc2.bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="loom-test-bad-inputs")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def long_name_model(n_in, n_hidden, n_out, seed):
    """unknown_op's model with a node name of a megabyte on the refused node."""
    model = unknown_op_model(n_in, n_hidden, n_out, seed)
    model.graph.node[3].name = "n" * (1 << 20)
    return model


def expand_negative_model(n_in):
    """An Expand to [-1, 2, n_in] of a constant: torch's -1, not ONNX's."""
    nodes = [
        helper.make_node("Expand", ["row", "shape"], ["rows"], name="expand0"),
        helper.make_node("Add", ["x", "rows"], ["y"], name="add0"),
    ]
    graph = helper.make_graph(
        nodes, "expand_negative",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, n_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, n_in])],
        initializer=[numpy_helper.from_array(np.ones((1, n_in), np.float32), "row"),
                     numpy_helper.from_array(np.array([-1, 2, n_in], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="loom-test-bad-inputs")
    model.ir_version = 8
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes("784,512,512,10"),
                   help="MLP widths, input first (default 784,512,512,10)")
    p.add_argument("--samples", type=int, default=64, help="rows N of the .npy files (default 64)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    n_in, n_out = args.sizes[0], args.sizes[-1]
    n_hidden = args.sizes[1] if len(args.sizes) > 2 else n_in

    good = os.path.join(args.out, "good.onnx.tmp")
    export_onnx(build_mlp(args.sizes, args.seed), torch.zeros(2, n_in), good)
    with open(good, "rb") as f:
        blob = f.read()
    os.remove(good)
    with open(os.path.join(args.out, "truncated.onnx"), "wb") as f:
        f.write(blob[: len(blob) // 2])

    onnx.save(unknown_op_model(n_in, n_hidden, n_out, args.seed), os.path.join(args.out, "unknown_op.onnx"))
    onnx.save(long_name_model(n_in, n_hidden, n_out, args.seed), os.path.join(args.out, "long_name.onnx"))
    onnx.save(expand_negative_model(n_in), os.path.join(args.out, "expand_negative.onnx"))

    rng = np.random.default_rng(args.seed)
    n = args.samples
    np.save(os.path.join(args.out, "x_wrong_shape.npy"),
            rng.standard_normal((n, n_in + 1)).astype(np.float32))
    np.save(os.path.join(args.out, "x_float64.npy"), rng.standard_normal((n, n_in)))
    tgt = (np.arange(n) % (n_out + 1)).astype(np.int64)
    tgt[-1] = n_out
    np.save(os.path.join(args.out, "target_out_of_range.npy"), tgt)
    with open(os.path.join(args.out, "not_npy.npy"), "w") as f:
        f.write("this is not a numpy file\n1,2,3\n")
    print("bad_inputs: truncated.onnx unknown_op.onnx long_name.onnx expand_negative.onnx x_wrong_shape.npy not_npy.npy x_float64.npy "
          "target_out_of_range.npy -> %s (%.2fs)" % (args.out, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
