#!/usr/bin/env python3
"""GPT-2 training throughput: Loom and PyTorch side by side on one device.

  gpt2_bench.py --plan PLAN --model-json model.json --loom-run BIN/loom-run
                [--device cuda|cpu] [--steps 20] [--warmup 5] [--batch B]
                [--torch-compile] [--json OUT.json] [--profile-out PROF.txt]

Made for the one-shot GPU check (bench/gpu/run.sh), runnable anywhere with
PyTorch (use --device cpu and a small model for a dry run):
  1. the machine's bf16 matrix rate (GPU only): mean of ten 8192^3 bf16
     products through PyTorch after three warm-ups, the "measured peak";
  2. Loom: `loom-run PLAN --device D --init random:1` on random tokens for
     --steps steps, the median step time after --warmup;
  3. PyTorch: torch_gpt2.py with the same model, batch, precision and
     optimizer (bf16 autocast, flash attention, fused AdamW), same steps;
then prints tokens/s, model TFLOP/s (6N + 12*l*h*s FLOPs per token, from
model.json), MFU against the measured peak and against the datasheet's
989 TFLOP/s (H100/H200 dense bf16), and the ratio of step times
Loom / PyTorch (below 1.0: Loom is faster). Both sides run in this one call,
so they see the same machine.
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
DATASHEET_BF16_TFLOPS = 989.0


def measured_peak_tflops(torch):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 2 * n**3 * 10 / (time.perf_counter() - t0) / 1e12


def run_loom(args, meta, work):
    import numpy as np
    rng = np.random.default_rng(0)
    samples = args.batch * 2
    tokens = rng.integers(0, meta["vocab"], size=(samples, meta["seq"] + 1), dtype=np.int64)
    np.save(os.path.join(work, "input_ids.npy"), tokens[:, :-1])
    np.save(os.path.join(work, "target.npy"), tokens[:, 1:])
    metrics = os.path.join(work, "loom.jsonl")
    cmd = [args.loom_run, args.plan, "--device", args.device, "--init", "random:1",
           "--steps", str(args.steps), "--metrics", metrics, "--log-every", "5",
           "--data", "input_ids=" + os.path.join(work, "input_ids.npy"),
           "--data", "target=" + os.path.join(work, "target.npy")]
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    with open(metrics) as f:
        rows = [json.loads(line) for line in f]
    if args.profile_out:
        # A few more steps, each instruction timed (LOOM_PROFILE=1 waits for
        # the device after every call): where the step time goes.
        prof = cmd[:]
        prof[prof.index("--steps") + 1] = "4"
        prof[prof.index("--metrics") + 1] = metrics + ".prof"
        print("+ LOOM_PROFILE=1 " + " ".join(prof), flush=True)
        with open(args.profile_out, "w") as f:
            subprocess.run(prof, check=False, stdout=f, stderr=subprocess.STDOUT,
                           env=dict(os.environ, LOOM_PROFILE="1"))
    step_s = statistics.median(r["step_time_s"] for r in rows[args.warmup:])
    return {"side": "loom", "step_s": step_s, "first_loss": rows[0]["loss"],
            "last_loss": rows[-1]["loss"],
            "peak_mem_gib": rows[-1]["peak_memory_bytes"] / 2**30}


def run_torch(args, meta, work):
    out = os.path.join(work, "torch.json")
    cmd = [sys.executable, os.path.join(HERE, "torch_gpt2.py"), "--device", args.device,
           "--precision", args.precision, "--batch", str(args.batch),
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--json", out]
    for key in ("layers", "hidden", "heads", "seq", "vocab"):
        cmd += ["--" + key, str(meta[key])]
    if args.torch_compile:
        cmd.append("--compile")
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    with open(out) as f:
        return json.load(f)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", required=True)
    p.add_argument("--model-json", required=True)
    p.add_argument("--loom-run", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, required=True,
                   help="the plan's global batch (loomc --global-batch)")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16",
                   help="the plan's precision (loomc --precision); PyTorch uses the same")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--torch-compile", action="store_true")
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--profile-out",
                   help="also run Loom for 4 steps under LOOM_PROFILE=1, its table to this file")
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.steps <= args.warmup:
        raise SystemExit("gpt2_bench.py: error: --steps must exceed --warmup")
    with open(args.model_json) as f:
        meta = json.load(f)
    import torch

    result = {"model": {k: meta[k] for k in ("layers", "hidden", "heads", "seq", "vocab",
                                             "parameters", "train_flops_per_token")},
              "batch": args.batch, "precision": args.precision, "device": args.device}
    peak = None
    if args.device == "cuda":
        result["gpu"] = torch.cuda.get_device_name()
        peak = measured_peak_tflops(torch)
        result["measured_bf16_peak_tflops"] = peak
        print("measured bf16 peak: %.0f TFLOP/s (8192^3 products)" % peak, flush=True)
    sides = []
    with tempfile.TemporaryDirectory() as work:
        sides.append(run_loom(args, meta, work))
        if not args.skip_torch:
            sides.append(run_torch(args, meta, work))
    tokens = args.batch * meta["seq"]
    print("\n%-8s %10s %12s %10s %8s %8s %10s" % ("side", "ms/step", "tokens/s", "TFLOP/s",
                                                 "MFU", "MFU(ds)", "peak GiB"))
    for s in sides:
        s["tokens_per_s"] = tokens / s["step_s"]
        s["tflops"] = meta["train_flops_per_token"] * s["tokens_per_s"] / 1e12
        s["mfu_measured_peak"] = s["tflops"] / peak if peak else None
        s["mfu_datasheet"] = s["tflops"] / DATASHEET_BF16_TFLOPS
        mem = s.get("peak_mem_gib")
        print("%-8s %10.1f %12.0f %10.1f %8s %7.1f%% %10s" % (
            s["side"], s["step_s"] * 1e3, s["tokens_per_s"], s["tflops"],
            "%.1f%%" % (100 * s["mfu_measured_peak"]) if peak else "-",
            100 * s["mfu_datasheet"], "%.1f" % mem if mem is not None else "-"))
    result["sides"] = sides
    if len(sides) == 2:
        result["ratio_loom_over_torch"] = sides[0]["step_s"] / sides[1]["step_s"]
        print("ratio Loom/PyTorch step time: %.2f (below 1.0: Loom is faster)"
              % result["ratio_loom_over_torch"])
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
