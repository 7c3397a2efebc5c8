#!/usr/bin/python3
"""The joint search at scale: planning time and chosen plans for a GPT family
from 1.7B to 1T parameters on A100 and H100 clusters of 32 to 3072 GPUs, and
the cost model beside published measurements.

The family and clusters are Megatron-LM's weak-scaling table (Narayanan et
al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21, Table 1: V = 51200, s = 2048, bf16/fp16 mixed precision,
A100-80GB nodes of 8). For each row `loomc --model-spec` plans it twice:

- free: the joint search chooses everything. Printed: the wall time of the
  whole loomc run, the plan, predicted model TFLOP/s per GPU and MFU, memory
  per GPU and the dominant cost.
- as published: `--force tp=T,pp=P,remat=full` (Megatron's tensor and
  pipeline sizes, full recomputation as in the paper; the search fills in
  micro-batches, schedule and ZeRO), its predicted step turned into the
  paper's own throughput figure (its FLOP count includes the recomputed
  forward: 96 B s l h^2 (1 + s/6h + V/16lh)), beside the published one.

Then the same family on H100 clusters of the same sizes (free search).
A JSON line with every figure ends the output.

  bench/planner.py --loomc build/bin/loomc
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# params (B), heads, hidden, layers, tp, pp, GPUs, batch, published TFLOP/s
MEGATRON = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
SEQ, VOCAB = 2048, 51200


def plan(loomc, spec, cluster, batch, force=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "summary.json")
        cmd = [loomc, "--model-spec", spec, "--cluster", cluster,
               "--global-batch", str(batch), "--precision", "bf16",
               "--summary-json", out, "--quiet"]
        if force:
            cmd += ["--force", force]
        start = time.monotonic()
        run = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - start
        if run.returncode != 0:
            return {"error": run.stderr.strip(), "wall_s": wall}
        with open(out) as f:
            summary = json.load(f)
        summary["wall_s"] = wall
        return summary


def describe(p):
    m = p["mesh"]
    text = f"dp={m['dp']} tp={m['tp']} pp={m['pp']} b={p['micro_batch']}x{p['num_micro_batches']}"
    if m["pp"] > 1:
        text += f" {p['schedule']}" + (f"/{p['virtual']}" if p["virtual"] > 1 else "")
    return text + f" z{p['zero_stage']} {p['remat']}"


def paper_flops(batch, layers, hidden):
    h, s, l, V = hidden, SEQ, layers, VOCAB
    return 96 * batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loomc", default="build/bin/loomc")
    args = ap.parse_args()
    rows = []
    print("A100-80GB (Megatron-LM's weak-scaling table): free search, and "
          "forced to the published tp, pp and full recomputation")
    print(f"{'model':>8} {'GPUs':>5} {'plan s':>6}  {'chosen plan':<50} {'TF/s':>6} "
          f"{'MFU':>6} {'GiB':>5}  {'dominant':<22} | {'as published: pred':>18} "
          f"{'paper':>6} {'ratio':>6}")
    for params, heads, hidden, layers, tp, pp, gpus, batch, published in MEGATRON:
        spec = f"gpt:l={layers},h={hidden},a={heads},s={SEQ},v={VOCAB}"
        cluster = f"a100-80g:{gpus // 8}x8"
        free = plan(args.loomc, spec, cluster, batch)
        forced = plan(args.loomc, spec, cluster, batch,
                      f"tp={tp},pp={pp},remat=full")
        row = {"params_b": params, "gpus": gpus, "cluster": cluster,
               "batch": batch, "published_tflops": published}
        if "error" in free:
            print(f"{params:>7}B {gpus:>5} refused: {free['error']}")
            row["error"] = free["error"]
            rows.append(row)
            continue
        p = free["plan"]
        row.update(plan_s=free["wall_s"], search_s=free["search"]["seconds"],
                   plan=describe(p), tflops=p["model_tflops_per_device"],
                   mfu=p["mfu"], memory_gib=p["peak_memory_bytes_per_device"] / 2**30,
                   dominant=p["dominant_cost"])
        line = (f"{params:>7}B {gpus:>5} {free['wall_s']:>6.2f}  {row['plan']:<50} "
                f"{row['tflops']:>6.1f} {100 * row['mfu']:>5.1f}% "
                f"{row['memory_gib']:>5.1f}  {row['dominant']:<22} | ")
        if "error" in forced:
            line += f"{'refused':>18}"
            row["forced_error"] = forced["error"]
        else:
            step = forced["plan"]["step_time_s"]
            predicted = paper_flops(batch, layers, hidden) / step / gpus / 1e12
            row.update(forced_plan=describe(forced["plan"]),
                       forced_paper_tflops=predicted,
                       forced_ratio=predicted / published)
            line += (f"{predicted:>18.1f} {published:>6} "
                     f"{predicted / published:>6.2f}")
        print(line)
        rows.append(row)

    print("\nH100-80GB, the same family and cluster sizes: free search")
    print(f"{'model':>8} {'GPUs':>5} {'plan s':>6}  {'chosen plan':<50} {'TF/s':>6} "
          f"{'MFU':>6} {'GiB':>5}  dominant")
    h100 = []
    for params, heads, hidden, layers, tp, pp, gpus, batch, published in MEGATRON:
        spec = f"gpt:l={layers},h={hidden},a={heads},s={SEQ},v={VOCAB}"
        free = plan(args.loomc, spec, f"h100:{gpus // 8}x8", batch)
        if "error" in free:
            print(f"{params:>7}B {gpus:>5} refused: {free['error']}")
            h100.append({"params_b": params, "error": free["error"]})
            continue
        p = free["plan"]
        print(f"{params:>7}B {gpus:>5} {free['wall_s']:>6.2f}  {describe(p):<50} "
              f"{p['model_tflops_per_device']:>6.1f} {100 * p['mfu']:>5.1f}% "
              f"{p['peak_memory_bytes_per_device'] / 2**30:>5.1f}  {p['dominant_cost']}")
        h100.append({"params_b": params, "gpus": gpus, "plan": describe(p),
                     "plan_s": free["wall_s"], "tflops": p["model_tflops_per_device"],
                     "mfu": p["mfu"]})

    gpt3 = plan(args.loomc, f"gpt:l=96,h=12288,a=96,s={SEQ},v={VOCAB}",
                "a100-80g:128x8", 1536)
    if "error" in gpt3:
        print(f"\nGPT-3 175B on 1024 A100s: refused: {gpt3['error']}")
    else:
        p = gpt3["plan"]
        print(f"\nGPT-3 175B, batch 1536, 1024 A100-80GB: planned in {gpt3['wall_s']:.2f} s "
              f"(search {gpt3['search']['seconds']:.3f} s, {gpt3['search']['candidates']} "
              f"choices): {describe(p)}, step {p['step_time_s']:.2f} s, "
              f"{p['model_tflops_per_device']:.1f} TFLOP/s per GPU, MFU {100 * p['mfu']:.1f}%, "
              f"{p['peak_memory_bytes_per_device'] / 2**30:.1f} GiB per GPU")
    print(json.dumps({"a100": rows, "h100": h100,
                      "gpt3_plan_s": gpt3.get("wall_s")}))


if __name__ == "__main__":
    sys.exit(main())
