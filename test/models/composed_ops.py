#!/usr/bin/python3
"""Write node tests for the ONNX ops loom builds from other ops (frontend/OnnxComposedOps.cpp).

  composed_ops.py --out DIR [--seed S]

Each test is DIR/test_NAME/ laid out like ONNX's backend node tests (model.onnx,
test_data_set_0/input_K.pb and output_0.pb), so node_conformance.py runs them: float32
graphs of one node with runtime inputs (the forms the ONNX suite only has in float64
or int32): Pad in constant (runtime value), edge and reflect modes and with negative
pads, CumSum along each axis, exclusive and reversed, AveragePool (1-D and 2-D) with strides,
pads counted or not and ceil_mode, MaxPool 1-D with ceil_mode, dilated MaxPool, Sin and Cos, a Max of three,
GatherElements of a runtime value, Einsum (attention scores, '...', outer products, sums,
implicit outputs, permutations, diagonals), LogSoftmax (large inputs, opset 11's 2-D coercion),
ReduceLogSumExp of large inputs, ReduceMin, ReduceL2, Softplus of large inputs, Celu,
HardSwish, PRelu with a per-channel slope, Sum and Mean broadcasting, Sign, ScatterND (none, add, mul) and GatherND of runtime values, Clip with runtime bounds, Abs, Tile, a Where on a condition computed at run
time by comparisons and logic (Greater, LessOrEqual, Equal, Not, And, Or, Xor); and
`fold_*` copies of the single-node tests with
every input an initializer (the importer folds them), plus the fold-only GatherElements
and ScatterND. Expected outputs come from ONNX Runtime. Inputs are N(0, 1) under
numpy's default_rng(S).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _venv import require  # noqa: E402

if __name__ == "__main__":
    require(["onnxruntime"], "composed_ops")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F = TensorProto.FLOAT


def elem_type(a):
    """The ONNX element type of a float32 or int64 array."""
    return TensorProto.INT64 if a.dtype == np.int64 else F


def graph_model(nodes, inputs, out_shape):
    """A graph of `nodes` over float32 graph inputs; its output is the last node's."""
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, F, list(a.shape)) for n, a in inputs],
        [helper.make_tensor_value_info("y", F, list(out_shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def node_model(op, inputs, out_shape, attrs=None, inits=(), order=None):
    """A one-node graph: `inputs` are (name, array) graph inputs, `inits` (name, array)
    integer initializers (pads, repeats, axes: constants in exported graphs); the node
    reads them in `order` (names; default inputs then initializers)."""
    names = order or [n for n, _ in inputs] + [n for n, _ in inits]
    attrs = dict(attrs or {})
    opset = attrs.pop("_opset", 17)
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, elem_type(a), list(a.shape)) for n, a in inputs],
        [helper.make_tensor_value_info("y", F, list(out_shape))],
        initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def cases(rng):
    x4 = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    x3 = rng.standard_normal((2, 4, 5)).astype(np.float32)
    pads = lambda *p: ("pads", np.array(p, dtype=np.int64))  # noqa: E731
    value = ("value", np.array(0.25, dtype=np.float32))
    yield "pad_constant_runtime_value", "Pad", [("x", x3), value], {}, \
        [pads(0, 1, 2, 0, 2, 1)], ["x", "pads", "value"]
    yield "pad_edge", "Pad", [("x", x3)], {"mode": "edge"}, [pads(0, 2, 1, 0, 1, 3)]
    yield "pad_reflect", "Pad", [("x", x3)], {"mode": "reflect"}, [pads(0, 3, 2, 0, 2, 1)]
    yield "pad_negative", "Pad", [("x", x3)], {}, [pads(0, -1, 2, 0, 1, -2)]
    for axis in (0, 1, 2, -1):
        yield ("cumsum_axis_%d" % axis if axis >= 0 else "cumsum_axis_minus_1"), "CumSum", \
            [("x", x3)], {}, [("axis", np.array(axis, dtype=np.int64))]
    yield "cumsum_exclusive_reverse", "CumSum", [("x", x3)], {"exclusive": 1, "reverse": 1}, \
        [("axis", np.array(1, dtype=np.int64))]
    yield "cumsum_reverse", "CumSum", [("x", x3)], {"reverse": 1}, \
        [("axis", np.array(2, dtype=np.int64))]
    yield "averagepool_strided", "AveragePool", [("x", x4)], \
        {"kernel_shape": [2, 3], "strides": [2, 1]}, []
    yield "averagepool_pads", "AveragePool", [("x", x4)], \
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}, []
    yield "averagepool_pads_counted", "AveragePool", [("x", x4)], \
        {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1], "count_include_pad": 1}, []
    yield "averagepool_1d", "AveragePool", [("x", x3)], \
        {"kernel_shape": [2], "pads": [1, 0], "strides": [2]}, []
    yield "averagepool_ceil", "AveragePool", [("x", x4)], \
        {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, []
    yield "averagepool_ceil_pads_counted", "AveragePool", [("x", x4)], \
        {"kernel_shape": [3, 2], "pads": [1, 0, 1, 0], "strides": [2, 2], "ceil_mode": 1,
         "count_include_pad": 1}, []
    x5 = rng.standard_normal((2, 2, 5, 6, 7)).astype(np.float32)
    yield "maxpool_3d", "MaxPool", [("x", x5)], \
        {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2], "pads": [0, 1, 1, 0, 0, 1]}, []
    yield "averagepool_3d", "AveragePool", [("x", x5)], \
        {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [0, 1, 0, 0, 1, 1]}, []
    yield "maxpool_ceil_1d", "MaxPool", [("x", x3)], \
        {"kernel_shape": [2], "strides": [2], "ceil_mode": 1}, []
    yield "maxpool_dilated_pads", "MaxPool", [("x", x4)], \
        {"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [1, 2],
         "pads": [1, 2, 0, 1]}, []
    yield "maxpool_dilated_ceil", "MaxPool", [("x", x4)], \
        {"kernel_shape": [2, 2], "dilations": [3, 1], "strides": [2, 2], "ceil_mode": 1}, []
    yield "maxpool_dilated_1d", "MaxPool", [("x", x3)], \
        {"kernel_shape": [2], "dilations": [3], "pads": [1, 1]}, []
    yield "sin_cos", [helper.make_node("Sin", ["x"], ["s"]),
                      helper.make_node("Cos", ["s"], ["y"])], [("x", x3)]
    yield "max_of_three", "Max", [("x", x3), ("a", x3[:, :1]), ("b", x3[:1])], {}, []
    gidx = rng.integers(-5, 5, size=(2, 4, 7)).astype(np.int64)
    yield "gather_elements_runtime", "GatherElements", [("x", x3), ("i", gidx)], \
        {"axis": 2}, []
    q = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    k = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    sq = rng.standard_normal((3, 4, 4)).astype(np.float32)
    for name, eq, operands in [
            ("attention_scores", "bhqd,bhkd->bhqk", [q, k]),
            ("ellipsis_matmul", "...qd,...kd->...qk", [q, k]),
            ("outer", "i,j->ij", [x3[0, 0], x3[1, 1]]),
            ("contract_and_sum", "bij,bjk->k",
             [x3, rng.standard_normal((2, 5, 3)).astype(np.float32)]),
            ("implicit", "ij,jk", [x3[0], rng.standard_normal((5, 3)).astype(np.float32)]),
            ("reduce_all", "bij->", [x3]),
            ("permute", "bhqd->qbdh", [q]),
            ("batch_diagonal", "...ii->...i", [sq]),
            ("trace", "bii->b", [sq]),
            ("diagonal_times", "bij,bjj->bij", [sq, sq[::-1]])]:
        yield "einsum_" + name, "Einsum", \
            [("x%d" % i, o) for i, o in enumerate(operands)], {"equation": eq}, []
    rows = rng.integers(-2, 2, size=(3, 1)).astype(np.int64)
    for mode in ("none", "add", "mul"):
        rows_here = np.array([[0], [1], [-2]], np.int64) if mode == "none" else rows
        yield "scatternd_runtime_" + mode, "ScatterND", \
            [("x", x3), ("i", rows_here), ("u", rng.standard_normal((3, 4, 5)).astype(np.float32))], \
            {"reduction": mode} if mode != "none" else {}, []
    yield "gathernd_runtime", "GatherND", \
        [("x", x3), ("i", rng.integers(-2, 2, size=(3, 2)).astype(np.int64))], {}, []
    yield "gathernd_batch_dims1", "GatherND", [("x", x3)], {"batch_dims": 1}, \
        [("i", rng.integers(-4, 4, size=(2, 3, 1)).astype(np.int64))]
    yield "gathernd_batch_dims2", "GatherND", [("x", q)], {"batch_dims": 2}, \
        [("i", rng.integers(-4, 4, size=(2, 3, 2, 2)).astype(np.int64))]
    yield "clip_runtime_bounds", "Clip", [("x", x3), ("lo", np.array(-0.5, np.float32)),
                                          ("hi", np.array(0.7, np.float32))], {}, []
    yield "abs", "Abs", [("x", x3)], {}, []
    # Activations and reductions built from other ops (OnnxComposedMath.cpp).
    big = (x3 * 1e4).astype(np.float32)
    yield "logsoftmax_axis1", "LogSoftmax", [("x", x3)], {"axis": 1}, []
    yield "logsoftmax_large", "LogSoftmax", [("x", big)], {}, []
    yield "logsoftmax_opset11_coerced", "LogSoftmax", [("x", x4)], {"axis": 1, "_opset": 11}, []
    yield "reduce_logsumexp_large", "ReduceLogSumExp", [("x", big)], \
        {"axes": [0, 2], "keepdims": 0}, []
    yield "reduce_min_axes", "ReduceMin", [("x", x3)], {"axes": [-1]}, []
    yield "reduce_l2_all", "ReduceL2", [("x", x3)], {"keepdims": 0}, []
    yield "softplus_large", "Softplus", [("x", (x3 * 50).astype(np.float32))], {}, []
    yield "celu_alpha", "Celu", [("x", x3)], {"alpha": 2.0}, []
    yield "hardswish", "HardSwish", [("x", (x3 * 4).astype(np.float32))], {}, []
    yield "prelu_channel_slope", "PRelu", \
        [("x", x3), ("slope", rng.standard_normal((4, 1)).astype(np.float32))], {}, []
    yield "sum_broadcast", "Sum", [("x", x3), ("a", x3[:, :1]), ("b", x3[1])], {}, []
    yield "mean_broadcast", "Mean", [("x", x3), ("a", x3[:1]), ("b", x3[0, 0])], {}, []
    signs = x3.copy()
    signs[0, 0] = 0
    yield "sign_zeros", "Sign", [("x", signs)], {}, []
    yield "tile", "Tile", [("x", x3)], {}, [("repeats", np.array([1, 2, 3], dtype=np.int64))]
    # Comparisons and logic at run time (0/1 masks) select with Where.
    y3 = rng.standard_normal((2, 4, 5)).astype(np.float32)
    y3[0, 0] = x3[0, 0]  # some equal elements
    yield "where_runtime_condition", [
        helper.make_node("Greater", ["x", "w"], ["gt"]),
        helper.make_node("LessOrEqual", ["x", "half"], ["le"]),
        helper.make_node("Equal", ["x", "w"], ["eq"]),
        helper.make_node("Not", ["eq"], ["ne"]),
        helper.make_node("And", ["gt", "ne"], ["a"]),
        helper.make_node("Or", ["a", "le"], ["o"]),
        helper.make_node("Xor", ["o", "eq"], ["c"]),
        helper.make_node("Where", ["c", "x", "w"], ["out"]),
    ], [("x", x3), ("w", y3), ("half", np.array(0.5, np.float32))]


def folded_cases(rng):
    """Ops whose inputs are all constants fold at import (OnnxFolding*.cpp): the same
    forms with the data as initializers, and the fold-only indexing ops."""
    # Float initializers named as exporters name constants ("/..."), so that the
    # importer does not take them for parameters.
    const = lambda n: "/c/" + n  # noqa: E731
    for name, op, inputs, attrs, inits, *order in (c for c in cases(rng) if len(c) > 3):
        names = order[0] if order else [n for n, _ in inputs] + [n for n, _ in inits]
        data = [(const(n), a) for n, a in inputs]
        yield ("fold_" + name, op, [], attrs, data + list(inits),
               [const(n) if n in dict(inputs) else n for n in names])
    data = rng.standard_normal((3, 4, 2)).astype(np.float32)
    yield "fold_gather_elements", "GatherElements", [], {"axis": 1}, \
        [(const("data"), data), ("idx", rng.integers(-4, 4, (3, 5, 2)).astype(np.int64))]
    yield "fold_scatter_nd", "ScatterND", [], {}, \
        [(const("data"), data), ("idx", np.array([[2, 1], [0, -1]], dtype=np.int64)),
         (const("upd"), rng.standard_normal((2, 2)).astype(np.float32))]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    import onnxruntime as ort
    rng = np.random.default_rng(args.seed)
    n = 0
    for case in list(cases(rng)) + list(folded_cases(rng)):
        if len(case) == 3:  # (name, nodes, inputs): a small graph
            name, nodes, inputs = case
            make = lambda shape: graph_model(nodes, inputs, shape)  # noqa: E731
        else:
            name, op, inputs, attrs, inits, *order = case
            order = order[0] if order else None
            make = lambda shape: node_model(op, inputs, shape, attrs, inits, order)  # noqa: E731
        # The output shape from ONNX Runtime itself.
        probe = make([])
        probe.graph.output[0].type.tensor_type.ClearField("shape")
        sess = ort.InferenceSession(probe.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        y = sess.run(None, {k: v for k, v in inputs})[0]
        d = os.path.join(args.out, "test_" + name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        onnx.save(make(y.shape), os.path.join(d, "model.onnx"))
        for i, (k, v) in enumerate(inputs):
            with open(os.path.join(d, "test_data_set_0", "input_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(v, k).SerializeToString())
        with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, "y").SerializeToString())
        n += 1
    print("composed_ops: %d tests -> %s" % (n, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
