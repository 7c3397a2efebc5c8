#!/usr/bin/python3
"""A classifier built from the ONNX ops loom composes from other ops, for training checks.

  composed_train.py --out DIR [--samples 64] [--seed 0]

Writes DIR/model.onnx (input `x` [N, 16], output `logits` [N, 4]), DIR/x.npy (float32
[samples, 16]) and DIR/target.npy (int64 class ids). The graph, opset 17: Gemm, Elu,
MatMul, PRelu with a trained per-feature slope, Softplus, Celu, LeakyRelu, Sum, ReduceL2
(a row normalisation), HardSigmoid, Softsign, Sinh, Mean, a dilated and padded MaxPool
over the features seen as [N, 2, 4, 4], Einsum (a product, and the diagonal of a trained
4x4 matrix), ReduceLogSumExp, ReduceMin, HardSwish and LogSoftmax. Every float
initializer is a parameter (named as a model's, so loomc trains it), drawn from
numpy's default_rng(seed); the data are gaussian clusters, one centre per class.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

N_IN, HIDDEN, CLASSES = 16, 32, 4


def build(rng):
    def param(name, *shape, scale=None):
        scale = scale or 1.0 / np.sqrt(shape[0])
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [param("fc1.weight", N_IN, HIDDEN), param("fc1.bias", HIDDEN, scale=0.1),
             param("fc2.weight", HIDDEN, HIDDEN), param("prelu.slope", HIDDEN, scale=0.25),
             param("head.weight", HIDDEN, CLASSES), param("diag.weight", CLASSES, CLASSES),
             param("min.weight", CLASSES, scale=0.5),
             numpy_helper.from_array(np.array([0, 2, 4, 4], np.int64), "grid_shape"),
             numpy_helper.from_array(np.array([0, HIDDEN], np.int64), "flat_shape")]
    n = helper.make_node
    nodes = [
        n("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"]),
        n("Elu", ["h1"], ["a1"], alpha=0.7),
        n("MatMul", ["a1", "fc2.weight"], ["h2"]),
        n("PRelu", ["h2", "prelu.slope"], ["a2"]),
        n("Softplus", ["a2"], ["a3"]),
        n("Celu", ["h2"], ["c2"], alpha=1.5),
        n("LeakyRelu", ["h1"], ["l1"], alpha=0.1),
        n("Sum", ["a3", "c2", "l1"], ["s"]),
        n("ReduceL2", ["s"], ["norm"], axes=[1], keepdims=1),
        n("Div", ["s", "norm"], ["u"]),
        n("HardSigmoid", ["u"], ["hs"], alpha=0.3, beta=0.4),
        n("Softsign", ["u"], ["ss"]),
        n("Sinh", ["u"], ["sh"]),
        n("Mean", ["hs", "ss", "sh"], ["m"]),
        n("Reshape", ["m", "grid_shape"], ["grid"]),
        n("MaxPool", ["grid"], ["pooled"], kernel_shape=[2, 2], dilations=[2, 2],
          pads=[1, 1, 1, 1]),
        n("Reshape", ["pooled", "flat_shape"], ["f"]),
        n("Einsum", ["f", "head.weight"], ["e"], equation="bi,ij->bj"),
        n("Einsum", ["diag.weight"], ["d"], equation="ii->i"),
        n("Add", ["e", "d"], ["z0"]),
        n("ReduceLogSumExp", ["z0"], ["lse"], axes=[1], keepdims=1),
        n("Sigmoid", ["lse"], ["gate"]),
        n("Mul", ["z0", "gate"], ["z1"]),
        n("ReduceMin", ["z1"], ["mn"], axes=[1], keepdims=1),
        n("Mul", ["mn", "min.weight"], ["shift"]),
        n("Sub", ["z1", "shift"], ["z2"]),
        n("HardSwish", ["z2"], ["z3"]),
        n("LogSoftmax", ["z3"], ["logits"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "composed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", N_IN])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)
    onnx.save(build(rng), os.path.join(args.out, "model.onnx"))
    data = np.random.default_rng(args.seed + 1)
    centres = data.standard_normal((CLASSES, N_IN)) * 2
    target = np.arange(args.samples) % CLASSES
    data.shuffle(target)
    x = centres[target] + data.standard_normal((args.samples, N_IN))
    np.save(os.path.join(args.out, "x.npy"), x.astype(np.float32))
    np.save(os.path.join(args.out, "target.npy"), target.astype(np.int64))
    return 0


if __name__ == "__main__":
    sys.exit(main())
