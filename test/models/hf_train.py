#!/usr/bin/python3
"""PyTorch reference trainer for the hf_models.py models (GPT-2, BERT, LLaMA, ResNet-18).

  hf_train.py --model-dir DIR --global-batch B --steps K --optimizer adamw|sgd --lr F
              --losses-out FILE.json [--weights-out FILE.npz] [--momentum F]
              [--weight-decay F] [--threads N] [--autocast bf16] [--kinks-from DIR]

DIR is what hf_models.py wrote. The module is rebuilt from DIR/config.json (the HF /
torchvision code, dropout 0) and then EVERY parameter and buffer it has in the graph is
loaded from DIR/model.onnx's initializers (by name; tied weights, e.g. GPT-2's lm_head
and wte, are one initializer), so training starts from exactly the weights Loom reads.
A parameter without an initializer is an error.

Training follows the Loom conventions (docs/runtime.md, PyTorch defaults):
  * train mode (dropout is 0; BatchNorm uses batch statistics and updates its running
    statistics);
  * step i (0-based) uses samples [i*B, (i+1)*B) modulo N of DIR/<input>.npy and
    DIR/target.npy;
  * loss = cross_entropy(logits, target), mean over every position (LMs: logits
    [B,S,V] flattened to [B*S,V]) or over the batch (ResNet);
  * adamw = torch.optim.AdamW(betas=(0.9,0.999), eps=1e-8, weight_decay=0.01 unless
    given); sgd = torch.optim.SGD(momentum=0, weight_decay=0 unless given); every
    parameter in one group;
  * --autocast bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)
    (PyTorch's mixed precision: f32 parameters, gradients and optimizer; GEMMs in bf16),
    the reference for `loomc --precision bf16`.
  * --kinks-from DIR (one step only): every ReLU and MaxPool takes the branch Loom
    took: DIR holds the inputs of the graph's Relu and MaxPool nodes from Loom's
    forward pass of the first batch (onnx_taps.py + loom-run --forward); ReLU i
    (in call order = graph order) multiplies by Loom's mask (input > 0), MaxPool i
    picks the window element that Loom's input makes the largest. The gradient is
    then that of the same piecewise-smooth branch, free of the kink flips that
    make a one-step gradient of a ReLU network ill-posed (README, "Well-posed
    comparisons").

Writes --losses-out: JSON list of K floats, entry i = the loss of step i+1's forward
pass, before its update (Loom's metrics line "step": i+1); --weights-out: npz of the
final values keyed by ONNX initializer name: every trainable initializer, plus the
buffer initializers (BatchNorm running statistics, as PyTorch updated them).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _venv import require  # noqa: E402

if __name__ == "__main__":
    require(["transformers", "torchvision"], "hf_train")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import hf_models  # noqa: E402


def batch_indices(step, batch, n):
    return np.arange(step * batch, (step + 1) * batch) % n


def make_optimizer(params, name, lr, momentum=None, weight_decay=None):
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=0.01 if weight_decay is None else weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum or 0.0,
                               weight_decay=weight_decay or 0.0)
    raise ValueError("unknown optimizer %r" % name)


def lm_loss(logits, target):
    """cross_entropy, mean over every position; class dim last."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def load_model_dir(model_dir):
    """(module with the ONNX weights, config dict, inputs array, target array, initializer map)."""
    try:
        with open(os.path.join(model_dir, "config.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise hf_models.ModelError("cannot read %s/config.json: %s" % (model_dir, e))
    kind = meta.get("model")
    if kind not in hf_models.MODELS:
        raise hf_models.ModelError("%s/config.json: unknown model %r" % (model_dir, kind))
    path = os.path.join(model_dir, "model.onnx")
    try:
        onnx_model = onnx.load(path)
    except Exception as e:  # noqa: BLE001 - one-line error for any unreadable file
        raise hf_models.ModelError("cannot load %s: %s" % (path, e))
    module, _ = hf_models.build_model(kind, meta.get("seed", 0), meta.get("config"))
    imap = hf_models.load_onnx_weights(module, onnx_model)
    data = {}
    for name in (meta["input"], "target"):
        p = os.path.join(model_dir, name + ".npy")
        try:
            data[name] = np.load(p, allow_pickle=False)
        except Exception as e:  # noqa: BLE001
            raise hf_models.ModelError("cannot read %s: %s" % (p, e))
    x, y = data[meta["input"]], data["target"]
    if len(x) != len(y) or len(x) == 0:
        raise hf_models.ModelError("%s has %d samples, target.npy %d" % (meta["input"], len(x), len(y)))
    if x.dtype.kind == "f":
        x = x.astype(np.float32)
    return module, meta, np.ascontiguousarray(x), np.ascontiguousarray(y.astype(np.int64)), imap


def _file_of(d, name):
    return os.path.join(d, name.replace("/", "_") + ".npy")


class _LoomReLU(torch.nn.Module):
    """ReLU with the mask of Loom's forward pass, one per call in call order."""

    def __init__(self, masks):
        super().__init__()
        self.masks = masks

    def forward(self, v):
        return v * self.masks.pop(0).to(v.dtype)


class _LoomMaxPool(torch.nn.Module):
    """MaxPool2d choosing, in each window, the element Loom's input makes largest."""

    def __init__(self, like, inputs):
        super().__init__()
        self.like, self.inputs = like, inputs

    def forward(self, v):
        loom = self.inputs.pop(0).to(v.dtype)
        _, idx = F.max_pool2d(loom, self.like.kernel_size, self.like.stride, self.like.padding,
                              self.like.dilation, self.like.ceil_mode, return_indices=True)
        n, c = idx.shape[:2]
        return v.flatten(2).gather(2, idx.flatten(2)).view(n, c, *idx.shape[2:])


def take_loom_kinks(module, model_dir, kinks_dir):
    """Replace the ReLU and MaxPool2d modules of `module` by ones that follow Loom's
    branch choices (see --kinks-from). Returns the lists of ReLU masks and MaxPool
    inputs that the calls consume: what is left after training was not used."""
    graph = onnx.load(os.path.join(model_dir, "model.onnx")).graph

    def taps(op):
        out = []
        for n in graph.node:
            if n.op_type == op:
                path = _file_of(kinks_dir, n.input[0])
                try:
                    out.append(torch.from_numpy(np.load(path)))
                except OSError as e:
                    raise hf_models.ModelError("--kinks-from: cannot read %s: %s" % (path, e.strerror))
        return out

    masks = [t > 0 for t in taps("Relu")]
    # Loom's MaxPool input is its ReLU output: its choices are those of the masked values.
    pools = taps("MaxPool")
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.ReLU):
                setattr(parent, name, _LoomReLU(masks))
            elif isinstance(child, torch.nn.MaxPool2d):
                setattr(parent, name, _LoomMaxPool(child, pools))
    return masks, pools


def train(module, x, y, global_batch, steps, optimizer, lr, momentum=None, weight_decay=None,
          autocast=None, loss_fn=lm_loss):
    """Train `module` in place; returns the per-step losses (before each update).
    loss_fn(output, target) defaults to cross-entropy over every position."""
    module.train()
    opt = make_optimizer(module.parameters(), optimizer, lr, momentum, weight_decay)
    losses = []
    for i in range(steps):
        idx = batch_indices(i, global_batch, len(x))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast == "bf16"):
            logits = module(torch.from_numpy(x[idx]))
            loss = loss_fn(logits, torch.from_numpy(y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", required=True, help="directory written by hf_models.py")
    p.add_argument("--global-batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--momentum", type=float, default=None, help="SGD momentum (default 0)")
    p.add_argument("--weight-decay", type=float, default=None,
                   help="default 0.01 for adamw, 0 for sgd (PyTorch defaults)")
    p.add_argument("--losses-out", required=True, help="JSON list of per-step losses")
    p.add_argument("--weights-out", default=None, help="npz of final weights keyed by initializer name")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (default: torch's)")
    p.add_argument("--autocast", choices=["bf16"], default=None,
                   help="forward and loss under CPU autocast to bf16")
    p.add_argument("--kinks-from", default=None, metavar="DIR",
                   help="take Loom's branch at every ReLU and MaxPool (one step only)")
    args = p.parse_args(argv)
    if args.global_batch < 1 or args.steps < 0:
        p.error("--global-batch must be >= 1 and --steps >= 0")
    if args.kinks_from and args.steps != 1:
        p.error("--kinks-from holds the kinks of one batch: it needs --steps 1")

    t0 = time.time()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    try:
        module, meta, x, y, imap = load_model_dir(args.model_dir)
    except hf_models.ModelError as e:
        raise SystemExit("hf_train: error: %s" % e)
    kinks = None
    if args.kinks_from:
        try:
            kinks = take_loom_kinks(module, args.model_dir, args.kinks_from)
        except hf_models.ModelError as e:
            raise SystemExit("hf_train: error: %s" % e)
    try:
        losses = train(module, x, y, args.global_batch, args.steps, args.optimizer, args.lr,
                       args.momentum, args.weight_decay, args.autocast)
    except (RuntimeError, IndexError, ValueError) as e:
        raise SystemExit("hf_train: error: training failed: %s" % str(e).strip().splitlines()[0])

    if kinks is not None and any(kinks):
        raise SystemExit("hf_train: error: --kinks-from: %d ReLU and %d MaxPool tap(s) were not used "
                         "(the module calls fewer than the graph has)" % tuple(map(len, kinks)))
    for path in (args.losses_out, args.weights_out):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(args.losses_out, "w") as f:
        json.dump(losses, f)
        f.write("\n")
    if args.weights_out:
        np.savez(args.weights_out, **hf_models.module_weights(module, imap))
    first = "%.6g" % losses[0] if losses else "-"
    last = "%.6g" % losses[-1] if losses else "-"
    print("hf_train: %s %d steps %s lr=%g batch=%d loss %s -> %s (%.2fs)"
          % (meta["model"], args.steps, args.optimizer, args.lr, args.global_batch, first, last,
             time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
