#!/usr/bin/python3
"""The demo data set: scikit-learn's bundled handwritten digits (no download).

Writes DIR/x.npy (float32 [1797, 64]: 8x8 images, pixel values 0..16 divided
by 16 so they lie in [0, 1]), DIR/target.npy (int64 [1797], digits 0..9), both
shuffled by one permutation from numpy.random.default_rng(seed), and
DIR/model.onnx: a PyTorch MLP 64-128-128-10 (ReLU; nn.Linear init under
torch.manual_seed(seed)), input `x` [batch, 64], output `logits` [batch, 10],
opset 17, symbolic batch. Needs python3-sklearn.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp import build_mlp, export_onnx  # noqa: E402

SIZES = [64, 128, 128, 10]


def load(seed):
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit("digits: scikit-learn is missing (apt-get install python3-sklearn)")
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(y))
    return np.ascontiguousarray(x[perm]), np.ascontiguousarray(y[perm])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--seed", type=int, default=0, help="shuffle and weight-init seed (default 0)")
    p.add_argument("--batch", type=int, default=64, help="example batch for export (default 64)")
    args = p.parse_args(argv)
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    x, y = load(args.seed)
    np.save(os.path.join(args.out, "x.npy"), x)
    np.save(os.path.join(args.out, "target.npy"), y)
    model = build_mlp(SIZES, args.seed)
    export_onnx(model, torch.zeros(args.batch, SIZES[0]), os.path.join(args.out, "model.onnx"))
    print("digits: %d samples x %d features, 10 classes, MLP %s -> %s (%.2fs)"
          % (x.shape[0], x.shape[1], "-".join(map(str, SIZES)), args.out, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
