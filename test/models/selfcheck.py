#!/usr/bin/python3
"""Self-check of the Python test tools (exits non-zero on any mismatch).

1. Forward: torch_train.OnnxModule (the ONNX interpreter) reproduces the
   original torch nn.Module's output on random input, max abs diff < 1e-6, for
   MLPs of every task/activation, the digits model, and an op-coverage model
   (Flatten, Reshape, MatMul, Add, Sub, Mul, Div, Identity, Tanh, Sigmoid, Gemm).
2. Training: torch_train.train on the interpreter matches a plain PyTorch loop
   over the original nn.Module (same initial weights, data order
   [i*B,(i+1)*B) mod N with wrap-around, torch.optim defaults), losses and final
   weights within 1e-6 relative, for AdamW, SGD and SGD+momentum.
3. The command lines: mlp.py, digits.py, bad_inputs.py, torch_train.py and
   compare.py run end to end; compare.py passes on equal data, fails (exit 1)
   on a perturbed loss/weight (element-wise, as an update in L2, and on a moved
   zero-gradient range), fails as ill-posed (exit 3) when its sensitivity file
   moves the reference by half a tolerance, and exits 2 on a short or missing
   file or on a tolerance without --sensitivity.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mlp  # noqa: E402
import torch_train  # noqa: E402

PY = sys.executable
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL " + msg)


class OpCoverage(nn.Module):
    """[B,1,8,8] -> Flatten -> (x - shift) * scale / 2 -> MatMul+Add -> Tanh -> Reshape
    -> Linear -> Sigmoid -> Identity-ish path; every float initializer is a Parameter."""

    def __init__(self):
        super().__init__()
        self.shift = nn.Parameter(torch.randn(64) * 0.1)
        self.scale = nn.Parameter(1.0 + torch.randn(64) * 0.1)
        self.w = nn.Parameter(torch.randn(64, 32) / 8.0)
        self.b = nn.Parameter(torch.randn(32) * 0.1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = x.reshape(x.shape[0], -1, 8)                 # Shape/Gather/Unsqueeze/Concat/Reshape
        x = torch.flatten(x, 1)
        x = (x - self.shift) * self.scale / 2.0
        x = torch.tanh(torch.matmul(x, self.w) + self.b)
        x = x.reshape(-1, 4, 8).reshape(-1, 32)
        return self.fc(torch.sigmoid(x))


def check_handmade():
    """Ops torch.onnx.export does not produce here: generic Gemm, Identity, Squeeze, Cast."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 3)).astype(np.float32)    # transA: [K=5, M=3]
    w = rng.standard_normal((5, 4)).astype(np.float32)    # [K, N], transB=0
    c = rng.standard_normal((1, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Identity", ["a"], ["a1"], name="i0"),
        helper.make_node("Gemm", ["a1", "w", "c"], ["g"], name="g0", alpha=0.5, beta=2.0, transA=1),
        helper.make_node("Unsqueeze", ["g", "axes"], ["u"], name="u0"),
        helper.make_node("Squeeze", ["u", "axes"], ["s"], name="s0"),
        helper.make_node("Cast", ["s"], ["y"], name="c0", to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "handmade", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [5, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c"),
                     numpy_helper.from_array(np.array([0], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    interp = torch_train.OnnxModule(model)
    with torch.no_grad():
        got = interp(torch.from_numpy(a)).numpy()
    ref = 0.5 * (a.T @ w) + 2.0 * c
    d = float(np.abs(got - ref).max())
    if not d < 1e-5:
        fail("handmade Gemm/Identity/Squeeze/Cast graph: max abs diff %.3g" % d)
    if interp.param_names != ["w", "c"]:
        fail("handmade graph: parameters %s, expected ['w', 'c']" % interp.param_names)


def export(module, example, path):
    mlp.export_onnx(module, example, path)
    return torch_train.load_onnx_module(path)


def check_forward(name, module, interp, example_shape):
    torch.manual_seed(123)
    x = torch.randn(*example_shape)
    with torch.no_grad():
        ref = module(x)
        got = interp(x)
    d = float((ref - got).abs().max())
    if not d < 1e-6:
        fail("%s: forward max abs diff %.3g >= 1e-6" % (name, d))
    return d


def plain_train(module, x, target, batch, steps, opt_name, lr, momentum, loss_name):
    """Reference loop written independently of torch_train.train: PyTorch defaults."""
    if opt_name == "adamw":
        opt = torch.optim.AdamW(module.parameters(), lr=lr)       # PyTorch's defaults
    else:
        opt = torch.optim.SGD(module.parameters(), lr=lr, momentum=momentum)
    crit = nn.CrossEntropyLoss() if loss_name == "cross_entropy" else nn.MSELoss()
    n = len(x)
    losses = []
    for i in range(steps):
        idx = [(i * batch + j) % n for j in range(batch)]
        out = module(torch.from_numpy(x[idx]))
        loss = crit(out, torch.from_numpy(target[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def rel_max(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12))) if a.size else 0.0


def check_training(name, module, onnx_path, x, target, batch, steps, opt_name, lr, momentum, loss_name):
    interp = torch_train.load_onnx_module(onnx_path)
    mod = copy.deepcopy(module)
    ref_losses = plain_train(mod, x, target, batch, steps, opt_name, lr, momentum, loss_name)
    got_losses = torch_train.train(interp, {interp.input_names[0]: x}, target, batch, steps,
                                   opt_name, loss_name, lr, momentum=momentum)
    r = rel_max(got_losses, ref_losses)
    if not r <= 1e-6:
        fail("%s %s: losses rel diff %.3g" % (name, opt_name, r))
    ref_w = dict(mod.named_parameters())
    got_w = dict(interp.named_onnx_parameters())
    if sorted(ref_w) != sorted(got_w):
        fail("%s: parameter names differ: %s vs %s" % (name, sorted(ref_w), sorted(got_w)))
        return r, float("inf")
    wr = max(float((ref_w[k] - got_w[k]).abs().max() / max(ref_w[k].abs().max(), 1e-12)) for k in ref_w)
    if not wr <= 1e-6:
        fail("%s %s: final weights rel diff %.3g" % (name, opt_name, wr))
    return r, wr


def check_learnable(sizes, task, steps=40, batch=32, lr=1e-3):
    """mlp.py's data: AdamW(lr) must cut the loss (mean of 5 steps) by >= 30%."""
    module = mlp.build_mlp(sizes, 0)
    x, target = mlp.make_data(sizes, 1024, 0, task)
    loss = "cross_entropy" if task == "classify" else "mse"
    losses = plain_train(module, x, target, batch, steps, "adamw", lr, None, loss)
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    if not last < 0.7 * first:
        fail("mlp.py %s data %s not learnable: loss %.4g -> %.4g" % (task, sizes, first, last))


def run(cmd, expect_rc=0):
    p = subprocess.run([PY] + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != expect_rc:
        fail("%s %s: exit %d (expected %d): %s" % (os.path.basename(cmd[0]), " ".join(cmd[1:]),
                                                   p.returncode, expect_rc, p.stdout.strip()))
    return p.stdout


def write_metrics(path, losses, start=1):
    with open(path, "w") as f:
        for k, v in enumerate(losses):
            f.write(json.dumps({"step": k + start, "loss": v, "step_time_s": 0.01}) + "\n")


def write_trained_onnx(src, dst, weights):
    m = onnx.load(src)
    for init in m.graph.initializer:
        if init.name in weights:
            init.CopyFrom(numpy_helper.from_array(weights[init.name].astype(np.float32), init.name))
    onnx.save(m, dst)


def cli_checks(tmp):
    s = lambda *p: os.path.join(tmp, *p)  # noqa: E731
    run([os.path.join(HERE, "mlp.py"), "--out", s("mlp"), "--sizes", "12,16,3", "--batch", "4",
         "--samples", "50", "--seed", "3"])
    run([os.path.join(HERE, "mlp.py"), "--out", s("reg"), "--sizes", "12,16,2", "--samples", "40",
         "--task", "regress", "--activation", "tanh", "--static-batch", "--batch", "8"])
    run([os.path.join(HERE, "digits.py"), "--out", s("digits")])
    run([os.path.join(HERE, "bad_inputs.py"), "--out", s("bad"), "--sizes", "12,16,3", "--samples", "8"])
    for f in ("truncated.onnx", "unknown_op.onnx", "x_wrong_shape.npy", "not_npy.npy"):
        if not os.path.isfile(s("bad", f)):
            fail("bad_inputs.py did not write %s" % f)
    try:
        onnx.load(s("bad", "truncated.onnx"))
        fail("truncated.onnx still loads")
    except Exception:  # noqa: BLE001
        pass
    m = onnx.load(s("bad", "unknown_op.onnx"))
    onnx.checker.check_model(m)
    if not any(n.op_type == "Hardmax" and n.name == "n3" for n in m.graph.node):
        fail("unknown_op.onnx lacks Hardmax node n3")
    if np.load(s("bad", "x_wrong_shape.npy")).shape != (8, 13):
        fail("x_wrong_shape.npy has the wrong shape")

    x = np.load(s("digits", "x.npy"))
    t = np.load(s("digits", "target.npy"))
    if x.shape != (1797, 64) or x.dtype != np.float32 or t.dtype != np.int64 or t.shape != (1797,):
        fail("digits data: %s %s %s %s" % (x.shape, x.dtype, t.shape, t.dtype))

    # torch_train.py CLI on the digits model, wrap-around (10*200 > 1797), vs the plain loop.
    steps, batch = 10, 200
    run([os.path.join(HERE, "torch_train.py"), "--model", s("digits", "model.onnx"),
         "--data", "x=" + s("digits", "x.npy"), "--data", "target=" + s("digits", "target.npy"),
         "--global-batch", str(batch), "--steps", str(steps), "--optimizer", "sgd", "--lr", "0.1",
         "--momentum", "0.9", "--loss", "cross_entropy", "--losses-out", s("ref.json"),
         "--weights-out", s("ref.npz")])
    digits_mod = mlp.build_mlp([64, 128, 128, 10], 0)
    plain = plain_train(digits_mod, x, t, batch, steps, "sgd", 0.1, 0.9, "cross_entropy")
    with open(s("ref.json")) as f:
        cli_losses = json.load(f)
    if len(cli_losses) != steps or rel_max(cli_losses, plain) > 1e-6:
        fail("torch_train.py CLI losses differ from the plain loop: %s vs %s" % (cli_losses[:3], plain[:3]))

    # torch_train.py regress/mse CLI on the static-batch tanh model.
    run([os.path.join(HERE, "torch_train.py"), "--model", s("reg", "model.onnx"),
         "--data", "x=" + s("reg", "x.npy"), "--data", "target=" + s("reg", "target.npy"),
         "--global-batch", "8", "--steps", "7", "--optimizer", "adamw", "--lr", "0.01",
         "--loss", "mse", "--losses-out", s("reg.json")])

    # compare.py: a sensitivity file equal to the reference (sensitivity 0) makes
    # every tolerance well-posed; `wobbly` moves it by half a tolerance (ill-posed).
    cmp_py = os.path.join(HERE, "compare.py")
    write_metrics(s("a.jsonl"), cli_losses)
    write_metrics(s("b.jsonl"), [v * (1 + 1e-7) for v in cli_losses])
    write_metrics(s("bad.jsonl"), cli_losses[:-1] + [cli_losses[-1] * 1.01])
    write_metrics(s("short.jsonl"), cli_losses[:-2])
    write_metrics(s("tail.jsonl"), cli_losses[5:], start=6)
    with open(s("wobbly.json"), "w") as f:
        json.dump([v * (1 + 5e-7) for v in cli_losses], f)
    sens = ["--sensitivity", s("ref.json")]
    run([cmp_py, "--metrics", s("a.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-6"] + sens)
    run([cmp_py, "--metrics", s("a.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "0"])
    run([cmp_py, "--metrics", s("b.jsonl"), "--metrics2", s("a.jsonl"), "--rtol", "1e-6",
         "--sensitivity", s("a.jsonl")])
    run([cmp_py, "--metrics", s("bad.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-3"] + sens, 1)
    out = run([cmp_py, "--metrics", s("a.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-6",
               "--sensitivity", s("wobbly.json")], 3)
    if "ILL-POSED" not in out:
        fail("compare.py: no ILL-POSED verdict for a sensitivity of half the tolerance: %s" % out)
    run([cmp_py, "--metrics", s("a.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-6"], 2)
    run([cmp_py, "--metrics", s("short.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-3"] + sens, 2)
    run([cmp_py, "--metrics", s("tail.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-6"] + sens, 2)
    run([cmp_py, "--metrics", s("tail.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-6",
         "--first-step", "6"] + sens)
    run([cmp_py, "--metrics", s("short.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-6",
         "--steps", "8"] + sens)
    run([cmp_py, "--metrics", s("missing.jsonl"), "--reference-losses", s("ref.json"), "--rtol", "1e-3"] + sens, 2)
    with np.load(s("ref.npz")) as z:
        w = {k: z[k] for k in z.files}
    wsens = ["--sensitivity", s("ref.npz")]
    write_trained_onnx(s("digits", "model.onnx"), s("trained.onnx"), w)
    run([cmp_py, "--onnx", s("trained.onnx"), "--reference-weights", s("ref.npz"),
         "--rtol", "1e-6", "--atol", "1e-7"] + wsens)
    w2 = dict(w)
    w2["fc2.bias"] = w2["fc2.bias"] + 1e-3
    write_trained_onnx(s("digits", "model.onnx"), s("trained_bad.onnx"), w2)
    run([cmp_py, "--onnx", s("trained_bad.onnx"), "--reference-weights", s("ref.npz"),
         "--rtol", "1e-4", "--atol", "1e-5"] + wsens, 1)
    # Updates in L2 (--initial): a 1e-3 error in one bias is far outside 1e-4 of its
    # update; a zero-gradient range must stay at its initial value.
    init = s("digits", "model.onnx")
    run([cmp_py, "--onnx", s("trained.onnx"), "--reference-weights", s("ref.npz"), "--initial", init,
         "--rtol", "1e-4"] + wsens)
    run([cmp_py, "--onnx", s("trained_bad.onnx"), "--reference-weights", s("ref.npz"), "--initial", init,
         "--rtol", "1e-4"] + wsens, 1)
    run([cmp_py, "--onnx", s("trained.onnx"), "--reference-weights", s("ref.npz"), "--initial", init,
         "--rtol", "1e-4", "--zero-gradient", "fc2.bias[0:4]"] + wsens, 1)
    run([cmp_py, "--onnx", s("trained.onnx"), "--reference-weights", s("ref.npz"), "--initial", init,
         "--rtol", "1e-4", "--zero-gradient", "fc2.bias[0:4]", "--zero-gradient-rms", "10"] + wsens)
    run([cmp_py, "--onnx", s("trained_bad.onnx"), "--reference-weights", s("ref.npz"), "--initial", init,
         "--rtol", "1e-4", "--exclude", "fc2.*"] + wsens)
    run([cmp_py, "--onnx", s("trained.onnx"), "--reference-weights", s("ref.npz"), "--initial", init,
         "--rtol", "1e-4", "--sensitivity", s("trained_bad.onnx")], 3)
    w3 = {k: v for k, v in w.items() if k != "fc3.weight"}
    np.savez(s("partial.npz"), **w3)
    run([cmp_py, "--weights", s("partial.npz"), "--reference-weights", s("ref.npz"), "--rtol", "1e-4"]
        + wsens, 2)
    run([cmp_py, "--onnx", s("bad", "truncated.onnx"), "--reference-weights", s("ref.npz"),
         "--rtol", "1e-4"] + wsens, 2)


def main():
    t0 = time.time()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    worst_fwd = worst_loss = worst_w = 0.0
    with tempfile.TemporaryDirectory(prefix="loom-selfcheck-") as tmp:
        rng = np.random.default_rng(7)
        cases = [
            ("mlp784-relu-classify", [784, 512, 512, 10], "relu", "classify", 4),
            ("mlp-tanh-regress", [16, 32, 32, 4], "tanh", "regress", 12),
            ("mlp-sigmoid-classify", [20, 24, 5], "sigmoid", "classify", 12),
            ("digits", [64, 128, 128, 10], "relu", "classify", 12),
        ]
        for name, sizes, act, task, steps in cases:
            module = mlp.build_mlp(sizes, 11, act)
            path = os.path.join(tmp, name + ".onnx")
            interp = export(module, torch.zeros(3, sizes[0]), path)
            worst_fwd = max(worst_fwd, check_forward(name, module, interp, (7, sizes[0])))
            x, target = mlp.make_data(sizes, 100, 5, task)     # N=100, B=32: wraps around
            loss = "cross_entropy" if task == "classify" else "mse"
            for opt_name, lr, mom in (("adamw", 1e-3, None), ("sgd", 0.05, 0.0), ("sgd", 0.05, 0.9)):
                r, wr = check_training(name, module, path, x, target, 32, steps, opt_name, lr, mom, loss)
                worst_loss, worst_w = max(worst_loss, r), max(worst_w, wr)

        torch.manual_seed(2)
        cov = OpCoverage()
        path = os.path.join(tmp, "cov.onnx")
        interp = export(cov, torch.zeros(3, 1, 8, 8), path)
        ops = {n.op_type for n in onnx.load(path).graph.node}
        need = {"Shape", "Gather", "Unsqueeze", "Concat", "Flatten", "Sub", "Mul", "Div", "MatMul", "Add", "Tanh", "Reshape", "Sigmoid", "Gemm"}
        if not need <= ops:
            fail("op-coverage model lacks ops %s (has %s)" % (sorted(need - ops), sorted(ops)))
        worst_fwd = max(worst_fwd, check_forward("op-coverage", cov, interp, (5, 1, 8, 8)))
        xc = rng.standard_normal((50, 1, 8, 8)).astype(np.float32)
        tc = rng.integers(0, 10, 50).astype(np.int64)
        r, wr = check_training("op-coverage", cov, path, xc, tc, 16, 6, "adamw", 1e-2, None, "cross_entropy")
        worst_loss, worst_w = max(worst_loss, r), max(worst_w, wr)

        check_handmade()
        check_learnable([784, 512, 512, 10], "classify")
        check_learnable([784, 512, 512, 10], "regress")
        check_learnable([16, 32, 32, 4], "classify", lr=1e-2)
        check_learnable([16, 32, 32, 4], "regress", lr=1e-2)
        cli_checks(tmp)

    if FAILURES:
        print("selfcheck: %d FAILURE(S)" % len(FAILURES))
        return 1
    print("selfcheck: OK (forward max abs diff %.2g, loss rel diff %.2g, weight rel diff %.2g; %.1fs)"
          % (worst_fwd, worst_loss, worst_w, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
