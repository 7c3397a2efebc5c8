#!/usr/bin/python3
"""What activation recomputation costs and saves on one CPU rank, side by side.

Builds the GPT-2 of dp_scaling.py (4 layers, d=256, 4 heads, T=128, vocab 512,
random weights under seed 0), compiles it with `loomc --cluster cpu:1
--force remat=none|selective|full`, and alternates rounds of `loom-run` on the
three plans (the same weights, data, global batch, AdamW and threads), so that
all three see the same machine load. Each round trains `--steps` steps; the
first `--warmup` are not timed. Prints for each mode its arena and its
measured peak (the runtime's memory ledger, docs/runtime.md), the median step
time, and, against `none`, the measured and the predicted step-time ratio
(loomc's cost model: the recomputed ops at their roofline costs) with the
spread of the measured ratio over rounds, plus a JSON line with the figures.

  bench/recompute_cost.py --loom-bin build/bin [--rounds 3] [--steps 8] [--threads 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "models"))

import dp_scaling  # noqa: E402  (the model and its data)

MODES = ("none", "selective", "full")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loom-bin", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    if a.steps <= a.warmup:
        sys.exit("recompute_cost.py: --steps must exceed --warmup")
    work = tempfile.mkdtemp(prefix="recompute_cost_")
    dp_scaling.build(work, a.batch)
    env = dict(os.environ, LOOM_NUM_THREADS=str(a.threads), OMP_WAIT_POLICY="PASSIVE")
    loomc, run = (os.path.join(os.path.abspath(a.loom_bin), b) for b in ("loomc", "loom-run"))
    summaries = {}
    for m in MODES:
        subprocess.run([loomc, "model.onnx", "--cluster", "cpu:1", "--global-batch",
                        str(a.batch), "--optimizer", "adamw", "--lr", "1e-3",
                        "--force", "remat=" + m, "-o", m + ".loomplan",
                        "--summary-json", m + ".json", "--quiet"], cwd=work, check=True)
        summaries[m] = json.load(open(os.path.join(work, m + ".json")))
    times = {m: [] for m in MODES}
    peaks = {}
    for _ in range(a.rounds):
        for m in MODES:
            subprocess.run([run, m + ".loomplan", "--data", "input_ids=input_ids.npy",
                            "--data", "target=target.npy", "--steps", str(a.steps),
                            "--metrics", m + ".jsonl", "--quiet"],
                           cwd=work, env=env, check=True, stdin=subprocess.DEVNULL)
            lines = [json.loads(x) for x in open(os.path.join(work, m + ".jsonl"))]
            times[m].append(statistics.median(x["step_time_s"] for x in lines[a.warmup:]))
            peaks[m] = lines[-1]["peak_memory_bytes"]
    out = {"rounds": a.rounds, "steps": a.steps, "threads": a.threads, "modes": {}}
    base = statistics.median(times["none"])
    for m in MODES:
        s = summaries[m]
        med = statistics.median(times[m])
        ratios = [t / n for t, n in zip(times[m], times["none"])]
        predicted = s["predicted"]["step_time_s"] / summaries["none"]["predicted"]["step_time_s"]
        arena = s["predicted"]["peak_memory_bytes_per_device"][0]
        out["modes"][m] = {"arena_bytes": arena, "peak_memory_bytes": peaks[m],
                           "step_s": med, "ratio": med / base,
                           "ratio_per_round": ratios, "predicted_ratio": predicted}
        print("%-9s arena %7.2f MiB, measured peak %7.2f MiB, %7.2f ms/step, "
              "%.3fx none (rounds %s), predicted %.3fx"
              % (m, arena / 2**20, peaks[m] / 2**20, 1e3 * med, med / base,
                 " ".join("%.3f" % r for r in ratios), predicted))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
