#!/usr/bin/python3
"""Run an ONNX model's forward pass with ONNX Runtime (CPU) — the oracle for
`loom-run --forward`.

  ort_forward.py --model M.onnx --input NAME=FILE.npy ... --output-dir DIR
                 [--optimization disable|basic|extended|all] [--threads N]

Every graph input that is not an initializer needs an --input. An array whose dtype
differs from the graph input's is converted when both are floating point or both
integer (like loom-run, which accepts <f8 for float inputs); otherwise it is an error.
Writes every graph output as DIR/<name>.npy, '/' in names replaced by '_' (loom-run's
naming; DIR is created). Graph optimisations default to `basic` (constant folding and
redundant-node elimination only: no fused kernels with their own numerics).
Needs onnxruntime: run with the venv of scripts/install-python-env.sh (started with
/usr/bin/python3 the script re-executes itself there).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _venv import require  # noqa: E402

if __name__ == "__main__":
    require(["onnxruntime"], "ort_forward")

import numpy as np  # noqa: E402

ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16,
    "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


def output_file_name(name):
    return name.replace("/", "_") + ".npy"


def run(model, inputs, optimization="basic", threads=0):
    """inputs: {name: ndarray}. Returns [(output name, ndarray)] in graph order."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[optimization]
    if threads > 0:
        so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])
    feed = {}
    expected = {i.name: i for i in sess.get_inputs()}
    extra = [n for n in inputs if n not in expected]
    if extra:
        raise ValueError("--input name(s) not graph inputs: %s (inputs: %s)"
                         % (", ".join(extra), ", ".join(expected)))
    for name, info in expected.items():
        if name not in inputs:
            raise ValueError("missing --input for graph input %r (%s %s)" % (name, info.type, info.shape))
        a = inputs[name]
        want = ORT_TYPES.get(info.type)
        if want is not None and a.dtype != want:
            same_kind = (a.dtype.kind == "f" and np.dtype(want).kind == "f") or \
                        (a.dtype.kind in "iu" and np.dtype(want).kind in "iu")
            if not same_kind:
                raise ValueError("input %r is %s, graph wants %s" % (name, a.dtype, info.type))
            a = a.astype(want)
        feed[name] = np.ascontiguousarray(a)
    names = [o.name for o in sess.get_outputs()]
    return list(zip(names, sess.run(names, feed)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="ONNX model file")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--optimization", choices=["disable", "basic", "extended", "all"],
                   default="basic", help="ONNX Runtime graph optimisation level (default basic)")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (default: ORT's)")
    args = p.parse_args(argv)
    t0 = time.time()
    inputs = {}
    for item in args.input:
        if "=" not in item:
            raise SystemExit("ort_forward: error: --input expects NAME=FILE.npy, got %r" % item)
        name, path = item.split("=", 1)
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except Exception as e:  # noqa: BLE001 - one-line error for any unreadable file
            raise SystemExit("ort_forward: error: cannot read %s: %s" % (path, e))
    try:
        outputs = run(args.model, inputs, args.optimization, args.threads)
    except ValueError as e:
        raise SystemExit("ort_forward: error: %s" % e)
    except Exception as e:  # noqa: BLE001 - ORT raises its own exception types
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SystemExit("ort_forward: error: %s: %s" % (args.model, msg))
    os.makedirs(args.output_dir, exist_ok=True)
    for name, value in outputs:
        np.save(os.path.join(args.output_dir, output_file_name(name)), value)
    print("ort_forward: %s -> %s: %s (%.2fs)"
          % (args.model, args.output_dir,
             ", ".join("%s %s %s" % (n, v.dtype, list(v.shape)) for n, v in outputs),
             time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
