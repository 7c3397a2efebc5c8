#!/usr/bin/python3
"""PyTorch reference trainer for Loom, rebuilt from the ONNX file itself.

The network is NOT re-created from Python code: the ONNX graph is interpreted
node by node by a small torch interpreter (OnnxModule), and every floating-point
initializer becomes a float32 torch.nn.Parameter holding exactly the bytes in the
file, so the reference starts from the weights Loom starts from. Integer
initializers and Constant nodes are constants.

Supported ops: Gemm MatMul Add Sub Mul Div Relu Tanh Sigmoid Flatten Reshape
Identity Constant Shape Gather Unsqueeze Squeeze Concat Cast; and, with torch's own
functions (the independent reference for what loom builds from other ops): Elu Selu
Celu LeakyRelu PRelu HardSigmoid HardSwish Softplus Softsign Sinh Sum Mean ReduceL2
ReduceLogSumExp ReduceMin LogSoftmax Einsum MaxPool (2-D).

Training follows the Loom conventions (docs/plan-format.md, PyTorch defaults):
  * step i (0-based) uses samples [i*B, (i+1)*B) modulo N of every data file;
  * loss on the model output (--output, default the first graph output):
    cross_entropy = nn.CrossEntropyLoss() on int64 class ids,
    mse = nn.MSELoss() on float32 targets, both means over the global batch;
  * adamw = torch.optim.AdamW(betas=(0.9,0.999), eps=1e-8, weight_decay=0.01 unless given);
    sgd = torch.optim.SGD(momentum=0, weight_decay=0 unless given).

Writes --losses-out: JSON list of K floats, entry i = loss of step i+1 computed
in that step's forward pass, before the update (Loom's metrics step i+1), and
--weights-out: npz of the final parameters keyed by ONNX initializer name.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper
from torch import nn


class OnnxError(Exception):
    pass


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


_ONNX_TO_TORCH_DTYPE = {
    onnx.TensorProto.FLOAT: torch.float32,
    onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.BOOL: torch.bool,
}


def _shape_values(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def _reshape(x, shape, allowzero=0):
    shape = list(shape)
    if not allowzero:
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _op_gemm(node, a, b, c=None):
    at = _attrs(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    trans_a, trans_b = int(at.get("transA", 0)), int(at.get("transB", 0))
    if trans_a:
        a = a.t()
    # nn.Linear's exact kernel for the common exported form (bitwise parity with PyTorch).
    if trans_b and alpha == 1.0 and (c is None or (beta == 1.0 and c.dim() == 1)):
        return F.linear(a, b, c)
    if trans_b:
        b = b.t()
    y = torch.matmul(a, b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return y


def _op_flatten(node, x):
    axis = int(_attrs(node).get("axis", 1))
    if axis < 0:
        axis += x.dim()
    lead = 1
    for d in x.shape[:axis]:
        lead *= d
    return x.reshape(lead, -1) if x.numel() else x.reshape(lead, 0)


def _op_unsqueeze(node, x, axes=None):
    axes = _shape_values(axes) if axes is not None else list(_attrs(node)["axes"])
    rank = x.dim() + len(axes)
    for a in sorted(a + rank if a < 0 else a for a in axes):
        x = x.unsqueeze(a)
    return x


def _op_squeeze(node, x, axes=None):
    if axes is None and "axes" in _attrs(node):
        axes = list(_attrs(node)["axes"])
    elif axes is not None:
        axes = _shape_values(axes)
    if axes is None:
        return x.squeeze()
    for a in sorted((a + x.dim() if a < 0 else a for a in axes), reverse=True):
        x = x.squeeze(a)
    return x


def _op_gather(node, x, idx):
    axis = int(_attrs(node).get("axis", 0))
    if axis < 0:
        axis += x.dim()
    flat = idx.reshape(-1).long() % x.shape[axis]      # negative indices count from the end
    y = torch.index_select(x, axis, flat)
    return y.reshape(list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:]))


def _op_cast(node, x):
    to = int(_attrs(node)["to"])
    if to not in _ONNX_TO_TORCH_DTYPE:
        raise OnnxError("Cast to unsupported ONNX type %d in node %r" % (to, node.name))
    return x.to(_ONNX_TO_TORCH_DTYPE[to])


def _op_constant(node):
    at = _attrs(node)
    if "value" in at:
        return torch.from_numpy(np.array(numpy_helper.to_array(at["value"])))
    for key, dt in (("value_float", torch.float32), ("value_int", torch.int64)):
        if key in at:
            return torch.tensor(at[key], dtype=dt)
    for key, dt in (("value_floats", torch.float32), ("value_ints", torch.int64)):
        if key in at:
            return torch.tensor(list(at[key]), dtype=dt)
    raise OnnxError("Constant node %r: unsupported value attribute" % node.name)


def _reduce(fn):
    """An opset-17 Reduce* node (axes attribute, keepdims) as fn(x, dims, keepdim)."""
    def op(node, x):
        at = _attrs(node)
        dims = [int(a) for a in at.get("axes", range(x.dim()))]
        return fn(x, dims, bool(at.get("keepdims", 1)))
    return op


def _op_maxpool(node, x):
    at = _attrs(node)
    pads = list(at.get("pads", [0, 0, 0, 0]))
    if pads[:2] != pads[2:] or int(at.get("ceil_mode", 0)):
        raise OnnxError("MaxPool %r: only symmetric pads, no ceil_mode" % node.name)
    return F.max_pool2d(x, list(at["kernel_shape"]), stride=list(at.get("strides", [1, 1])),
                        padding=pads[:2], dilation=list(at.get("dilations", [1, 1])))


def _alpha(node, default):
    return float(_attrs(node).get("alpha", default))


_OPS = {
    "Elu": lambda n, x: F.elu(x, _alpha(n, 1.0)),
    "Selu": lambda n, x: F.selu(x),
    "Celu": lambda n, x: F.celu(x, _alpha(n, 1.0)),
    "LeakyRelu": lambda n, x: F.leaky_relu(x, _alpha(n, 0.01)),
    "PRelu": lambda n, x, slope: torch.where(x >= 0, x, slope * x),
    "HardSigmoid": lambda n, x: torch.clamp(_alpha(n, 0.2) * x + float(_attrs(n).get("beta", 0.5)),
                                            0, 1),
    "HardSwish": lambda n, x: F.hardswish(x),
    "Softplus": lambda n, x: F.softplus(x),
    "Softsign": lambda n, x: F.softsign(x),
    "Sinh": lambda n, x: torch.sinh(x),
    "Sum": lambda n, *xs: sum(xs[1:], xs[0]),
    "Mean": lambda n, *xs: sum(xs[1:], xs[0]) / len(xs),
    "ReduceL2": _reduce(lambda x, d, k: torch.linalg.vector_norm(x, 2, dim=d, keepdim=k)),
    "ReduceLogSumExp": _reduce(lambda x, d, k: torch.logsumexp(x, dim=d, keepdim=k)),
    "ReduceMin": _reduce(lambda x, d, k: torch.amin(x, dim=d, keepdim=k)),
    "LogSoftmax": lambda n, x: F.log_softmax(x, dim=int(_attrs(n).get("axis", -1))),
    "Einsum": lambda n, *xs: torch.einsum(_attrs(n)["equation"].decode(), *xs),
    "MaxPool": _op_maxpool,
    "Gemm": _op_gemm,
    "MatMul": lambda n, a, b: torch.matmul(a, b),
    "Add": lambda n, a, b: a + b,
    "Sub": lambda n, a, b: a - b,
    "Mul": lambda n, a, b: a * b,
    "Div": lambda n, a, b: a / b,
    "Relu": lambda n, x: torch.relu(x),
    "Tanh": lambda n, x: torch.tanh(x),
    "Sigmoid": lambda n, x: torch.sigmoid(x),
    "Identity": lambda n, x: x,
    "Flatten": _op_flatten,
    "Reshape": lambda n, x, s: _reshape(x, _shape_values(s), int(_attrs(n).get("allowzero", 0))),
    "Shape": lambda n, x: torch.tensor(list(x.shape), dtype=torch.int64),
    "Gather": _op_gather,
    "Unsqueeze": _op_unsqueeze,
    "Squeeze": _op_squeeze,
    "Concat": lambda n, *xs: torch.cat(xs, dim=int(_attrs(n)["axis"])),
    "Cast": _op_cast,
    "Constant": _op_constant,
}


class OnnxModule(nn.Module):
    """Interprets an ONNX graph with torch ops; float initializers are Parameters."""

    def __init__(self, model):
        super().__init__()
        g = model.graph
        for node in g.node:
            if node.op_type not in _OPS:
                raise OnnxError("unsupported ONNX op %s (node %r)" % (node.op_type, node.name))
            if node.domain not in ("", "ai.onnx"):
                raise OnnxError("unsupported op domain %r (node %r)" % (node.domain, node.name))
        self.nodes = list(g.node)
        self.param_names = []          # ONNX initializer names, in file order
        self.params = nn.ParameterList()
        self.consts = {}
        init_names = set()
        for init in g.initializer:
            arr = np.array(numpy_helper.to_array(init))  # copy: own, writable memory
            init_names.add(init.name)
            if arr.dtype.kind == "f":
                self.param_names.append(init.name)
                self.params.append(nn.Parameter(torch.from_numpy(arr.astype(np.float32))))
            else:
                self.consts[init.name] = torch.from_numpy(arr)
        self.input_names = [i.name for i in g.input if i.name not in init_names]
        self.output_names = [o.name for o in g.output]

    def named_onnx_parameters(self):
        return list(zip(self.param_names, self.params))

    def forward(self, *args, **kwargs):
        env = dict(self.consts)
        env.update(zip(self.param_names, self.params))
        for name, value in zip(self.input_names, args):
            env[name] = value
        env.update(kwargs)
        missing = [n for n in self.input_names if n not in env]
        if missing:
            raise OnnxError("missing model inputs: %s" % ", ".join(missing))
        for node in self.nodes:
            ins = []
            for name in node.input:
                if name == "":
                    ins.append(None)
                elif name in env:
                    ins.append(env[name])
                else:
                    raise OnnxError("node %r reads undefined value %r" % (node.name, name))
            while ins and ins[-1] is None:   # trailing optional inputs
                ins.pop()
            out = _OPS[node.op_type](node, *ins)
            env[node.output[0]] = out
        outs = [env[n] for n in self.output_names]
        return outs[0] if len(outs) == 1 else tuple(outs)


def load_onnx_module(path):
    model = onnx.load(path)
    return OnnxModule(model)


def batch_indices(step, batch, n):
    """Samples of 0-based step `step`: [step*B, (step+1)*B) modulo n."""
    return np.arange(step * batch, (step + 1) * batch, dtype=np.int64) % n


def make_optimizer(params, name, lr, momentum=None, weight_decay=None):
    if name == "adamw":
        wd = 0.01 if weight_decay is None else weight_decay
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.0 if momentum is None else momentum,
                               weight_decay=0.0 if weight_decay is None else weight_decay)
    raise ValueError("unknown optimizer %r" % name)


def make_loss(name):
    if name == "cross_entropy":
        return nn.CrossEntropyLoss()
    if name == "mse":
        return nn.MSELoss()
    raise ValueError("unknown loss %r" % name)


def prepare_target(arr, loss):
    if loss == "cross_entropy":
        if arr.dtype.kind not in "iu":
            raise ValueError("cross_entropy target must hold integer class ids, got %s" % arr.dtype)
        return arr.astype(np.int64)
    return arr.astype(np.float32)


def _flatten_logits(out, target):
    """Class dim last (Loom convention): [.., C] logits with [..] targets."""
    if out.dim() > 2:
        return out.reshape(-1, out.shape[-1]), target.reshape(-1)
    return out, target


def train(module, inputs, target, global_batch, steps, optimizer, loss_name,
          lr, momentum=None, weight_decay=None, output_index=0):
    """Train `module` in place. inputs: {name: np.ndarray}; returns per-step losses."""
    opt = make_optimizer(module.parameters(), optimizer, lr, momentum, weight_decay)
    crit = make_loss(loss_name)
    names = list(module.input_names) if hasattr(module, "input_names") else list(inputs)
    losses = []
    for i in range(steps):
        feed = [torch.from_numpy(inputs[n][batch_indices(i, global_batch, len(inputs[n]))])
                for n in names]
        tgt = torch.from_numpy(target[batch_indices(i, global_batch, len(target))])
        out = module(*feed)
        if isinstance(out, tuple):
            out = out[output_index]
        if loss_name == "cross_entropy":
            out, tgt = _flatten_logits(out, tgt)
        loss = crit(out, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return losses


def _parse_data(items):
    data = {}
    for item in items:
        if "=" not in item:
            raise SystemExit("torch_train: --data expects NAME=FILE.npy, got %r" % item)
        name, path = item.split("=", 1)
        try:
            data[name] = np.load(path, allow_pickle=False)
        except Exception as e:  # noqa: BLE001 - one-line error for any unreadable file
            raise SystemExit("torch_train: cannot read %s: %s" % (path, e))
    return data


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="ONNX model file")
    p.add_argument("--data", action="append", default=[], metavar="NAME=FILE.npy",
                   help="one per graph input, plus target=FILE.npy")
    p.add_argument("--global-batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--momentum", type=float, default=None, help="SGD momentum (default 0)")
    p.add_argument("--weight-decay", type=float, default=None,
                   help="default 0.01 for adamw, 0 for sgd (PyTorch defaults)")
    p.add_argument("--loss", choices=["cross_entropy", "mse"], required=True)
    p.add_argument("--output", default=None, help="graph output the loss reads (default: the first)")
    p.add_argument("--losses-out", required=True, help="JSON list of per-step losses")
    p.add_argument("--weights-out", default=None, help="npz of final weights keyed by initializer name")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (default: torch's)")
    args = p.parse_args(argv)
    if args.global_batch < 1 or args.steps < 0:
        p.error("--global-batch must be >= 1 and --steps >= 0")

    t0 = time.time()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    try:
        module = load_onnx_module(args.model)
    except OnnxError as e:
        raise SystemExit("torch_train: %s: %s" % (args.model, e))
    except Exception as e:  # noqa: BLE001
        raise SystemExit("torch_train: cannot load %s: %s" % (args.model, e))

    data = _parse_data(args.data)
    if "target" not in data:
        raise SystemExit("torch_train: missing --data target=FILE.npy")
    target = prepare_target(data.pop("target"), args.loss)
    missing = [n for n in module.input_names if n not in data]
    if missing:
        raise SystemExit("torch_train: missing --data for model input(s): %s" % ", ".join(missing))
    extra = [n for n in data if n not in module.input_names]
    if extra:
        raise SystemExit("torch_train: --data names not model inputs: %s" % ", ".join(extra))
    inputs = {n: np.ascontiguousarray(data[n]) for n in module.input_names}
    for n, a in inputs.items():
        if a.dtype.kind == "f":
            inputs[n] = a.astype(np.float32)
    out_idx = 0
    if args.output is not None:
        if args.output not in module.output_names:
            raise SystemExit("torch_train: %r is not a graph output (%s)"
                             % (args.output, ", ".join(module.output_names)))
        out_idx = module.output_names.index(args.output)

    try:
        losses = train(module, inputs, target, args.global_batch, args.steps, args.optimizer,
                       args.loss, args.lr, args.momentum, args.weight_decay, out_idx)
    except (RuntimeError, IndexError, ValueError, OnnxError) as e:
        raise SystemExit("torch_train: training failed: %s" % str(e).strip().splitlines()[0])

    for path in (args.losses_out, args.weights_out):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(args.losses_out, "w") as f:
        json.dump(losses, f)
        f.write("\n")
    if args.weights_out:
        np.savez(args.weights_out, **{n: p.detach().numpy() for n, p in module.named_onnx_parameters()})
    first = "%.6g" % losses[0] if losses else "-"
    last = "%.6g" % losses[-1] if losses else "-"
    print("torch_train: %d steps %s lr=%g batch=%d loss %s -> %s (%.2fs)"
          % (args.steps, args.optimizer, args.lr, args.global_batch, first, last, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
