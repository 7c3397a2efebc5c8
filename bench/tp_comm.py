#!/usr/bin/env python3
"""Tensor-parallel communication per step: the plan loom-auto-shard chose
beside Megatron-LM's analytic volume for the same model and mesh.

  bench/tp_comm.py --loomc build/bin/loomc [--size 124m] [--cluster h100:1x8]
                   [--tp 2,4,8] [--global-batch 8] [--precision bf16]

The model is GPT-2 of a published size (bench/gpu/gpt2_export.py, planned
without weights). For each tp the mesh is dp = devices / tp x tp; one rank's
collectives over the tp axis per step come from `loomc --summary-json`
(`communication_per_step`: `bytes` sums the S of each collective's cost
formula, docs/planner.md), turned into the bytes each rank sends over the
link with the ring algorithms' factors: 2(n-1)/n S for an all-reduce,
(n-1)/n S for an all-gather, reduce-scatter or all-to-all (so an all-reduce
and a reduce-scatter plus an all-gather of the same tensor send alike). Megatron's tensor-parallel transformer moves, per
layer and micro-batch, two all-reduces forward (after the attention
projection and the second MLP linear) and two backward (the gradients
entering the two layer norms), each of b*s*h activations; its vocab-parallel
embedding adds one forward and its LM head one backward all-reduce of the
same size (Shoeybi et al., 2019; Narayanan et al., 2021): (4 L + 2)
all-reduces of b s h bytes-per-element, b the micro-batch.
Both columns are printed with their ratio and the planning time.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


# The share of S each rank sends (nccl-tests' bus-bandwidth factors, the ring
# algorithms of docs/planner.md): what the link carries, comparable across kinds.
def sent_share(kind, n):
    return 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n


def megatron_bytes(layers, hidden, seq, micro_batch, elem_bytes, tp):
    per_allreduce = micro_batch * seq * hidden * elem_bytes
    return (4 * layers + 2) * per_allreduce * sent_share("all_reduce", tp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--size", default="124m", choices=["124m", "350m", "774m"])
    ap.add_argument("--cluster", default="h100:1x8")
    ap.add_argument("--tp", default="2,4,8")
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--work", default=None, help="where the export is cached")
    args = ap.parse_args()

    work = args.work or os.path.join(tempfile.gettempdir(), "loom-tp-comm-" + args.size)
    model = os.path.join(work, "model.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable, os.path.join(HERE, "gpu", "gpt2_export.py"),
                        "--out", work, "--size", args.size], check=True)
    cfg = json.load(open(os.path.join(work, "model.json")))
    elem = 2 if args.precision == "bf16" else 4
    devices = None
    print("GPT-2 %s (l=%d h=%d s=%d V=%d), %s, global batch %d, %s" %
          (args.size, cfg["layers"], cfg["hidden"], cfg["seq"], cfg["vocab"],
           args.cluster, args.global_batch, args.precision))
    print("%4s %4s %6s | %-46s | %12s %12s %7s | %8s" %
          ("tp", "dp", "micro", "Loom over tp (count x kind)", "Loom sent",
           "Megatron", "ratio", "plan s"))
    for tp in [int(t) for t in args.tp.split(",")]:
        summary = os.path.join(work, "tp%d.json" % tp)
        r = subprocess.run([args.loomc, model, "--no-weights", "--cluster", args.cluster,
                            "--force", "tp=%d" % tp, "--global-batch", str(args.global_batch),
                            "--precision", args.precision, "--loss", "cross_entropy",
                            "--plan-only", "--summary-json", summary, "--quiet"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("%4d  loomc failed: %s" % (tp, r.stderr.strip().splitlines()[-1]))
            continue
        s = json.load(open(summary))
        dp = s["mesh"]["dp"]
        micro = args.global_batch // dp
        kinds, loom = [], 0
        for c in s["communication_per_step"]:
            if c["axes"] == ["tp"]:
                kinds.append("%d %s" % (c["count"], c["kind"]))
                loom += c["bytes"] * sent_share(c["kind"], tp)
        mega = megatron_bytes(cfg["layers"], cfg["hidden"], cfg["seq"], micro, elem, tp)
        print("%4d %4d %6d | %-46s | %12d %12d %7.2f | %8.2f" %
              (tp, dp, micro, ", ".join(kinds) or "none", loom, mega,
               loom / mega if mega else float("nan"), s["planning_time_s"]))
    print("Megatron: %d all-reduces of b*s*h a step (4 a layer, the embedding's and "
          "the LM head's)" % (4 * cfg["layers"] + 2))


if __name__ == "__main__":
    main()
