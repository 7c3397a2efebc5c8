#!/usr/bin/python3
"""One training step on one CPU rank: Loom against PyTorch, side by side.

Builds the model and data (test/models/hf_models.py, or mlp.py for `mlp`),
compiles it with `loomc --cluster cpu:1`, and alternates rounds of
`loom-run` and a plain PyTorch loop (same weights, data, batch, AdamW and
thread count) so that both see the same machine load. Each round trains
`--steps` steps; the first `--warmup` are not timed. Prints the median step
time of each side over all timed steps and the ratio Loom / PyTorch (below
1.0 means Loom is faster), plus a JSON line with the figures.

  bench/cpu_step.py --model gpt2 --loom-bin build/bin [--threads 1] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "test", "models")
sys.path.insert(0, MODELS)

import _venv  # noqa: E402

_venv.require(["transformers", "torch"], "cpu_step.py")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import hf_train  # noqa: E402


def loom_round(args, plan, data, steps, work, rnd):
    metrics = os.path.join(work, "metrics-%d.jsonl" % rnd)
    env = dict(os.environ, LOOM_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    cmd = [os.path.join(args.loom_bin, "loom-run"), plan, "--steps", str(steps),
           "--metrics", metrics, "--quiet"] + [a for d in data for a in ("--data", d)]
    subprocess.run(cmd, check=True, env=env)
    with open(metrics) as f:
        times = [json.loads(line)["step_time_s"] for line in f]
    return times[args.warmup:]


def torch_round(args, module, x, y, batch, steps):
    torch.manual_seed(0)
    module.train()
    opt = hf_train.make_optimizer(module.parameters(), "adamw", 1e-4)
    times = []
    for i in range(steps):
        idx = hf_train.batch_indices(i, batch, len(x))
        t0 = time.perf_counter()
        logits = module(torch.from_numpy(x[idx]))
        loss = hf_train.lm_loss(logits, torch.from_numpy(y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times[args.warmup:]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt2", choices=["gpt2", "bert", "llama", "resnet18"])
    p.add_argument("--loom-bin", required=True, help="folder with loomc and loom-run")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=8, help="steps per round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--work", default=None, help="scratch folder (default: a temp dir)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    work = args.work or tempfile.mkdtemp(prefix="loom-bench-")
    os.makedirs(work, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(MODELS, "hf_models.py"), "--model", args.model,
                    "--out", work, "--batch", str(args.batch)], check=True,
                   stdout=subprocess.DEVNULL)
    module, meta, x, y, _ = hf_train.load_model_dir(work)
    plan = os.path.join(work, "model.loomplan")
    subprocess.run([os.path.join(args.loom_bin, "loomc"), os.path.join(work, "model.onnx"),
                    "--cluster", "cpu:1", "--global-batch", str(args.batch), "--optimizer", "adamw",
                    "--lr", "1e-4", "-o", plan, "--quiet"], check=True)
    data = ["%s=%s" % (meta["input"], os.path.join(work, meta["input"] + ".npy")),
            "target=%s" % os.path.join(work, "target.npy")]

    loom_times, torch_times = [], []
    for rnd in range(args.rounds):
        loom_times += loom_round(args, plan, data, args.steps, work, rnd)
        torch_times += torch_round(args, module, x, y, args.batch, args.steps)
    lm, tm = statistics.median(loom_times), statistics.median(torch_times)
    print("%s batch %d, %d thread(s): loom %.1f ms/step, pytorch %.1f ms/step, ratio %.2f"
          % (args.model, args.batch, args.threads, lm * 1e3, tm * 1e3, lm / tm))
    print(json.dumps({"model": args.model, "batch": args.batch, "threads": args.threads,
                      "loom_ms": lm * 1e3, "pytorch_ms": tm * 1e3, "ratio": lm / tm,
                      "timed_steps": len(loom_times)}))


if __name__ == "__main__":
    main()
