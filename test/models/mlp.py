#!/usr/bin/python3
"""Generate a PyTorch MLP as ONNX plus a learnable synthetic data set.

Writes DIR/model.onnx (input `x` [batch, in], output `logits` [batch, out]),
DIR/x.npy (float32 [N, in]) and DIR/target.npy (int64 [N] class ids for
--task classify, float32 [N, out] for --task regress).

Weights are PyTorch's default nn.Linear init under torch.manual_seed(seed).
Data come from a separate generator seeded with seed+1:
  classify: gaussian clusters, one random centre per class (balanced), 10% label noise;
  regress:  targets from a fixed random teacher network tanh(x A) B.
Both are learnable, so the loss falls visibly within a few steps.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np
import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


class MLP(nn.Module):
    """Linear layers fc1..fcL with an activation between them (none after the last)."""

    def __init__(self, sizes, activation="relu"):
        super().__init__()
        if len(sizes) < 2:
            raise ValueError("need at least two sizes (in, out)")
        self.num_layers = len(sizes) - 1
        for i in range(self.num_layers):
            setattr(self, "fc%d" % (i + 1), nn.Linear(sizes[i], sizes[i + 1]))
        self.act = ACTIVATIONS[activation]()

    def forward(self, x):
        for i in range(self.num_layers):
            x = getattr(self, "fc%d" % (i + 1))(x)
            if i + 1 < self.num_layers:
                x = self.act(x)
        return x


def build_mlp(sizes, seed, activation="relu"):
    torch.manual_seed(seed)
    return MLP(sizes, activation).float()


def export_onnx(model, example, path, dynamic_batch=True,
                input_name="x", output_name="logits"):
    """torch.onnx.export at opset 17 with constant folding; input `x`, output `logits`."""
    model.eval()
    kwargs = {}
    if dynamic_batch:
        kwargs["dynamic_axes"] = {input_name: {0: "batch"}, output_name: {0: "batch"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), path, input_names=[input_name],
                          output_names=[output_name], opset_version=17,
                          do_constant_folding=True, **kwargs)
    model.train()


def make_data(sizes, samples, seed, task):
    """Learnable synthetic data; see the module docstring."""
    rng = np.random.default_rng(seed + 1)
    n_in, n_out = sizes[0], sizes[-1]
    if task == "classify":
        # Well separated clusters, 10% of labels replaced by random classes: the loss
        # falls fast at first but keeps a floor (~0.4) instead of collapsing to ~0,
        # so relative loss comparisons stay meaningful over long runs.
        centres = rng.standard_normal((n_out, n_in)) * (6.0 / np.sqrt(n_in))
        cluster = np.arange(samples) % n_out          # balanced classes
        rng.shuffle(cluster)
        x = centres[cluster] + rng.standard_normal((samples, n_in))
        noisy = rng.random(samples) < 0.1
        target = np.where(noisy, rng.integers(0, n_out, samples), cluster)
        return x.astype(np.float32), target.astype(np.int64)
    hidden = max(16, min(64, n_in))
    a = rng.standard_normal((n_in, hidden)) / np.sqrt(n_in)
    b = rng.standard_normal((hidden, n_out)) / np.sqrt(hidden)
    x = rng.standard_normal((samples, n_in))
    y = np.tanh(x @ a) @ b + 0.01 * rng.standard_normal((samples, n_out))
    return x.astype(np.float32), y.astype(np.float32)


def parse_sizes(text):
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("sizes must be comma-separated integers: %r" % text)
    if len(sizes) < 2 or min(sizes) < 1:
        raise argparse.ArgumentTypeError("need at least two positive sizes: %r" % text)
    return sizes


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes("784,512,512,10"),
                   help="layer widths, input first (default 784,512,512,10)")
    p.add_argument("--batch", type=int, default=32,
                   help="batch of the example input used for export; the fixed batch with --static-batch (default 32)")
    p.add_argument("--samples", type=int, default=1024, help="number of samples N (default 1024)")
    p.add_argument("--seed", type=int, default=0, help="seed for weights (seed) and data (seed+1) (default 0)")
    p.add_argument("--task", choices=["classify", "regress"], default="classify")
    p.add_argument("--activation", choices=sorted(ACTIVATIONS), default="relu",
                   help="hidden activation (default relu)")
    p.add_argument("--static-batch", action="store_true",
                   help="export with a fixed batch dimension --batch instead of a symbolic 'batch'")
    args = p.parse_args(argv)
    if args.batch < 1 or args.samples < 1:
        p.error("--batch and --samples must be positive")

    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    model = build_mlp(args.sizes, args.seed, args.activation)
    example = torch.zeros(args.batch, args.sizes[0])
    export_onnx(model, example, os.path.join(args.out, "model.onnx"),
                dynamic_batch=not args.static_batch)
    x, target = make_data(args.sizes, args.samples, args.seed, args.task)
    np.save(os.path.join(args.out, "x.npy"), x)
    np.save(os.path.join(args.out, "target.npy"), target)
    nparams = sum(p.numel() for p in model.parameters())
    print("mlp: %s %s sizes=%s params=%d samples=%d -> %s (%.2fs)"
          % (args.task, args.activation, ",".join(map(str, args.sizes)), nparams,
             args.samples, args.out, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
