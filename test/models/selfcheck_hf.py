#!/usr/bin/python3
"""Self-check of hf_models.py, hf_train.py, ort_forward.py and compare_outputs.py.

  selfcheck_hf.py [--models gpt2,bert,llama,resnet18] [--keep DIR]

For each model (about 10 s each on two cores):
  1. `hf_models.py` writes the model, data, ops.txt and config.json (12 samples, batch 8,
     so training wraps around the data);
  2. an independently built module (the HF / torchvision class called directly, same
     seed) has exactly the weights of the ONNX initializers, every parameter covered;
  3. `ort_forward.py` on the exported graph matches that module's forward (train mode)
     to rtol 1e-4, checked with `compare_outputs.py`;
  4. `hf_train.py` (AdamW for the LMs, SGD with momentum 0.9 for ResNet-18, 3 steps)
     reproduces a plain training loop over that module: the per-step losses to 1e-6
     and the final weights (and BatchNorm running statistics) to 1e-6 relative.
Exits 1 on any failure, printing one line per check.
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _venv import require  # noqa: E402

if __name__ == "__main__":
    require(["transformers", "torchvision", "onnxruntime"], "selfcheck_hf")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import hf_models  # noqa: E402
from compare_outputs import compare_arrays  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
BATCH, SAMPLES, STEPS, SEED = 8, 12, 3, 3


class CheckFailed(Exception):
    pass


def run(cmd):
    r = subprocess.run([PY] + cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed("%s exited %d: %s" % (os.path.basename(cmd[0]), r.returncode,
                                               (r.stderr.strip() or r.stdout.strip())[-500:]))
    return r.stdout.strip()


def plain_module(kind):
    """The model built straight from the library classes, as a user would."""
    torch.manual_seed(SEED)
    if kind == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10)
    import transformers
    cls = {"gpt2": (transformers.GPT2Config, transformers.GPT2LMHeadModel),
           "bert": (transformers.BertConfig, transformers.BertForMaskedLM),
           "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM)}[kind]
    config = cls[0](**hf_models.HF_CONFIGS[kind])
    config._attn_implementation = "eager"
    return cls[1](config)


def plain_forward(kind, model, x, y=None):
    """(logits, loss or None) the plain way for each library."""
    if kind == "resnet18":
        logits = model(x)
        return logits, (F.cross_entropy(logits, y) if y is not None else None)
    if kind == "bert":
        out = model(input_ids=x, labels=y)      # HF's own masked-LM loss: every position
        return out.logits, out.loss
    out = model(input_ids=x, use_cache=False)
    loss = None
    if y is not None:                           # targets are already the next tokens
        loss = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), y.reshape(-1))
    return out.logits, loss


def check_model(kind, work):
    t0 = time.time()
    d = os.path.join(work, kind)
    run([os.path.join(HERE, "hf_models.py"), "--model", kind, "--out", d, "--seed", str(SEED),
         "--batch", str(BATCH), "--samples", str(SAMPLES)])
    with open(os.path.join(d, "config.json")) as f:
        meta = json.load(f)
    ops = open(os.path.join(d, "ops.txt")).read().split()
    if not ops or ops != sorted(set(ops)):
        raise CheckFailed("ops.txt is not a sorted set: %s" % ops)
    m = onnx.load(os.path.join(d, "model.onnx"))
    if sorted(hf_models.graph_op_types(m.graph)) != ops:
        raise CheckFailed("ops.txt differs from the graph's op types")
    if m.opset_import[0].version != 17:
        raise CheckFailed("opset %d, want 17" % m.opset_import[0].version)
    shape = [dd.dim_value for dd in m.graph.input[0].type.tensor_type.shape.dim]
    if m.graph.input[0].name != meta["input"] or shape != [BATCH] + meta["input_shape"]:
        raise CheckFailed("graph input %s %s" % (m.graph.input[0].name, shape))
    if [o.name for o in m.graph.output] != ["logits"]:
        raise CheckFailed("graph outputs %s, want [logits]" % [o.name for o in m.graph.output])

    # 2. the independently built module has exactly the ONNX initializers' weights.
    model = plain_module(kind)
    model.train()
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    imap = hf_models.initializer_map(model, m)   # raises unless every parameter is covered
    state = model.state_dict()
    for name in list(imap["parameters"]) + imap["buffers"]:
        if not np.array_equal(state[name].numpy(), inits[name]):
            raise CheckFailed("initializer %s differs from the module's tensor" % name)
    ties = sum(len(v) - 1 for v in imap["parameters"].values())
    x = np.load(os.path.join(d, meta["input"] + ".npy"))
    y = np.load(os.path.join(d, "target.npy"))

    # 3. ONNX Runtime forward vs the module's forward (train mode, initial weights).
    xb = os.path.join(d, "xb.npy")
    np.save(xb, x[:BATCH])
    run([os.path.join(HERE, "ort_forward.py"), "--model", os.path.join(d, "model.onnx"),
         "--input", "%s=%s" % (meta["input"], xb), "--output-dir", os.path.join(d, "ort")])
    with torch.no_grad():
        ref, _ = plain_forward(kind, copy.deepcopy(model), torch.from_numpy(x[:BATCH]))
    os.makedirs(os.path.join(d, "torch"), exist_ok=True)
    np.save(os.path.join(d, "torch", "logits.npy"), ref.numpy())
    scale = float(np.abs(ref.numpy()).max())
    r = subprocess.run([PY, os.path.join(HERE, "compare_outputs.py"), "--a", os.path.join(d, "ort"),
                        "--b", os.path.join(d, "torch"), "--rtol", "1e-4",
                        "--atol", repr(3e-5 * max(1.0, scale))], capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed("ort_forward vs PyTorch: %s" % r.stdout.strip())
    ort_line = r.stdout.strip()

    # 4. hf_train.py vs a plain loop.
    if kind == "resnet18":
        opt_args, make_opt = ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9"], \
            lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)
    else:
        opt_args, make_opt = ["--optimizer", "adamw", "--lr", "1e-3"], \
            lambda ps: torch.optim.AdamW(ps, lr=1e-3)
    losses_file = os.path.join(d, "losses.json")
    weights_file = os.path.join(d, "weights.npz")
    run([os.path.join(HERE, "hf_train.py"), "--model-dir", d, "--global-batch", str(BATCH),
         "--steps", str(STEPS), "--losses-out", losses_file, "--weights-out", weights_file,
         "--threads", str(torch.get_num_threads())] + opt_args)
    got = json.load(open(losses_file))
    opt = make_opt(model.parameters())
    want = []
    for i in range(STEPS):
        idx = np.arange(i * BATCH, (i + 1) * BATCH) % len(x)
        _, loss = plain_forward(kind, model, torch.from_numpy(x[idx]), torch.from_numpy(y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        want.append(float(loss.item()))
    if len(got) != STEPS or any(abs(a - b) > 1e-6 * max(1.0, abs(b)) for a, b in zip(got, want)):
        raise CheckFailed("losses %s, plain loop %s" % (got, want))
    w = np.load(weights_file)
    expect = set(imap["parameters"]) | set(imap["buffers"])
    if set(w.files) != expect:
        raise CheckFailed("weights npz keys differ: %s" % sorted(set(w.files) ^ expect)[:5])
    state = model.state_dict()
    worst = 0.0
    for name in w.files:
        a, b = w[name], state[name].numpy()
        if not b.size:
            continue
        err = float(np.abs(a - b).max())
        scale = float(np.abs(b).max())
        worst = max(worst, err / max(scale, 1e-12))
        # 1e-6 relative to the tensor; AdamW also turns the rounding noise of gradients
        # that are exactly 0 in theory (attention key biases: softmax ignores them) into
        # updates of ~lr * noise / eps, a few 1e-6 whatever the order of float operations.
        if err > 1e-6 * scale + (1e-5 if kind != "resnet18" else 0.0):
            raise CheckFailed("final %s differs: max abs err %.3g (max |w| %.3g)"
                              % (name, err, scale))
    if abs(got[-1] - got[0]) == 0:
        raise CheckFailed("loss did not change: %s" % got)
    print("ok %-8s %d ops, %d initializers (%d tied), ort vs torch: %s; "
          "%s losses %s == plain loop (weights: max rel err %.1g) (%.1fs)"
          % (kind, len(ops), len(inits), ties, ort_line.split(" ", 1)[1], opt_args[1],
             ["%.5f" % v for v in got], worst, time.time() - t0))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(hf_models.MODELS))
    p.add_argument("--keep", default=None, help="work in DIR and keep it")
    args = p.parse_args(argv)
    kinds = [k for k in args.models.split(",") if k]
    bad = [k for k in kinds if k not in hf_models.MODELS]
    if bad:
        p.error("unknown model(s): %s" % ", ".join(bad))
    t0 = time.time()
    work = args.keep or tempfile.mkdtemp(prefix="loom-selfcheck-hf.")
    os.makedirs(work, exist_ok=True)
    failed = []
    try:
        for kind in kinds:
            try:
                check_model(kind, work)
            except (CheckFailed, hf_models.ModelError) as e:
                print("FAIL %s: %s" % (kind, e))
                failed.append(kind)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("selfcheck_hf: %d passed, %d failed (%.1fs)"
          % (len(kinds) - len(failed), len(failed), time.time() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
