#!/usr/bin/python3
"""Make the inputs of every node of some op types graph outputs, so that a forward
run (`loom-run --forward`, ort_forward.py) writes them too.

  onnx_taps.py --model M.onnx --op Relu [--op MaxPool ...] --out TAPPED.onnx

The added outputs get their types and shapes from ONNX shape inference; a tensor
that is already a graph output is not added twice. Prints the number of taps.
`loom-run --forward` writes each as DIR/<name with / replaced by _>.npy.

hf_train.py --kinks-from DIR uses Loom's tapped Relu and MaxPool inputs to take
the same branch at every kink as Loom did (test/models/README.md, "Well-posed
comparisons").
"""
import argparse
import sys

import onnx


def tap_names(model, ops):
    """The first input of every node whose op type is in `ops`, in graph order."""
    return [n.input[0] for n in model.graph.node if n.op_type in ops]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--op", action="append", required=True, help="op type whose inputs to tap")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        model = onnx.load(args.model)
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception as e:  # noqa: BLE001 - one line for any unreadable model
        raise SystemExit("onnx_taps: error: cannot load %s: %s" % (args.model, e))
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    have = {o.name for o in model.graph.output}
    names = tap_names(model, set(args.op))
    for name in names:
        if name in have:
            continue
        if name not in known or not known[name].type.tensor_type.HasField("shape"):
            raise SystemExit("onnx_taps: error: %s: no inferred shape for %r" % (args.model, name))
        model.graph.output.append(known[name])
        have.add(name)
    onnx.save(model, args.out)
    print("onnx_taps: %d inputs of %s -> %s" % (len(names), "/".join(args.op), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
