#!/usr/bin/python3
"""Copy model and data files with every floating-point value perturbed, to measure
how sensitive a reference run is to rounding.

  perturb.py --out DIR [--rel 1e-7] [--seed 1] FILE...

Each FILE is copied into DIR under its own name:
  *.onnx  every floating-point initializer x becomes x * (1 + rel * u);
  *.npy   a floating-point array likewise; other arrays (class ids, token ids)
          are copied unchanged;
  others  copied unchanged (config.json, ...).
u is uniform in [-1, 1], drawn per element from numpy's default_rng(seed) (the
files in the order given), computed in float64 and rounded to the file's type,
so at rel = 1e-7 a float32 value moves by at most about one unit in its last
place — the size of one rounding error.

A parity test runs its reference again on the perturbed copies: how far the
reference moves is the sensitivity of the comparison, and compare.py's
--sensitivity refuses a tolerance that is not at least 10 times above it
(test/models/README.md, "Well-posed comparisons"). ONNX external data is not
supported (the models of the tests store their weights inline).
"""
import argparse
import os
import shutil
import sys

import numpy as np


def perturb_array(a, rel, rng):
    if a.dtype.kind != "f" or a.size == 0:
        return a
    u = rng.uniform(-1.0, 1.0, a.shape)
    return (a.astype(np.float64) * (1.0 + rel * u)).astype(a.dtype)


def perturb_onnx(src, dst, rel, rng):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(src)
    for i, t in enumerate(model.graph.initializer):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            raise SystemExit("perturb: error: %s: initializer %r uses external data, which is "
                             "not supported" % (src, t.name))
        a = numpy_helper.to_array(t)
        if a.dtype.kind == "f":
            model.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(perturb_array(a, rel, rng), t.name))
    onnx.save(model, dst)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--rel", type=float, default=1e-7, help="relative size (default 1e-7)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("files", nargs="+", metavar="FILE")
    args = p.parse_args(argv)
    if not args.rel > 0:
        p.error("--rel must be > 0")
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for src in args.files:
        dst = os.path.join(args.out, os.path.basename(src))
        if os.path.abspath(dst) == os.path.abspath(src):
            raise SystemExit("perturb: error: %s would overwrite itself; choose another --out" % src)
        try:
            if src.endswith(".onnx"):
                perturb_onnx(src, dst, args.rel, rng)
            elif src.endswith(".npy"):
                np.save(dst, perturb_array(np.load(src, allow_pickle=False), args.rel, rng))
            else:
                shutil.copyfile(src, dst)
        except (OSError, ValueError) as e:
            raise SystemExit("perturb: error: %s: %s" % (src, e))
    print("perturb: %d file(s) -> %s (rel %g, seed %d)" % (len(args.files), args.out, args.rel,
                                                          args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
