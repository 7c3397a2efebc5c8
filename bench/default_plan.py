#!/usr/bin/python3
"""The default plan of an exported GPT-2 against every mesh and against its model spec.

  default_plan.py --loom-bin build/bin [--work DIR] [--layers 24] [--hidden 1024]
                  [--heads 16] [--seq 1024] [--vocab 50257] [--cluster a100-80g:2x8]
                  [--global-batch 64] [--meshes]

Exports a Hugging Face GPT-2 of the given shape (random init, once, cached in --work)
with its weights dropped (external data removed: loomc plans it with --no-weights),
then, side by side in one run:

  1. `loomc model.onnx --cluster C --global-batch B --precision bf16` with default flags:
     the wall time of the whole compile (search and the one compile of its choice),
     the search's choice and the compiled plan's predicted step;
  2. `loomc --model-spec gpt:l=..,h=..` of the same shape on the same cluster: its
     choice and predicted step, and the ratio of the two searches' steps;
  3. with --meshes: every dp x tp x pp of the cluster forced (`--force dp=..,tp=..,pp=..`,
     each compiled with loomc's own escalation), its compiled predicted step, and the
     default's compiled step over the best of them.

Prints one line a figure; the ratios are what to read (docs/loomc.md, "How loomc plans").
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "models"))
from _venv import require  # noqa: E402

if __name__ == "__main__":
    require(["transformers"], "default_plan")


def export(args, path):
    """The GPT-2 of `args`' shape as ONNX at batch 1, weights dropped."""
    import onnx
    import torch
    import hf_models
    cfg = dict(hf_models.HF_CONFIGS["gpt2"], n_embd=args.hidden, n_layer=args.layers,
               n_head=args.heads, n_positions=args.seq, vocab_size=args.vocab)
    module, _ = hf_models.build_model("gpt2", 0, cfg)
    module.train()
    example = torch.zeros((1, args.seq), dtype=torch.int64)
    full = path + ".full"
    hf_models.export(module, example, full, "input_ids")
    model = onnx.load(full)
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".data", size_threshold=1024)
    os.remove(full)
    os.remove(path + ".data")  # planned with --no-weights


def loomc(args, extra, summary):
    cmd = [os.path.join(args.loom_bin, "loomc"), "--cluster", args.cluster,
           "--global-batch", str(args.global_batch), "--precision", "bf16", "--plan-only",
           "--quiet", "--summary-json", summary] + extra
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        return None, seconds, run.stderr.strip().splitlines()[-1:]
    with open(summary) as f:
        return json.load(f), seconds, None


def choice_text(plan):
    m = plan["mesh"]
    return "dp=%d tp=%d pp=%d micro-batch=%dx%d %s zero=%d remat=%s" % (
        m["dp"], m["tp"], m["pp"], plan["micro_batch"], plan["num_micro_batches"],
        plan["schedule"], plan["zero_stage"], plan["remat"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--loom-bin", required=True)
    p.add_argument("--work", default="/tmp/loom-default-plan")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--cluster", default="a100-80g:2x8")
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--meshes", action="store_true")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    name = "gpt2-l%d-h%d-s%d.onnx" % (args.layers, args.hidden, args.seq)
    model = os.path.join(args.work, name)
    if not os.path.exists(model):
        export(args, model)

    onnx_sum, onnx_s, err = loomc(args, [model, "--no-weights"],
                                  os.path.join(args.work, "default.json"))
    if onnx_sum is None:
        sys.exit("default plan failed: %s" % err)
    chosen = onnx_sum["search"]["chosen"]
    compiled = onnx_sum["predicted"]["step_time_s"]
    print("onnx default: %.2f s wall, search %.3f s, chose %s" % (
        onnx_s, onnx_sum["search"]["seconds"], choice_text(chosen)))
    print("onnx default: search's step %.2f ms, compiled plan's step %.2f ms" % (
        1e3 * chosen["step_time_s"], 1e3 * compiled))

    spec = "gpt:l=%d,h=%d,a=%d,s=%d,v=%d" % (args.layers, args.hidden, args.heads,
                                             args.seq, args.vocab)
    spec_sum, spec_s, err = loomc(args, ["--model-spec", spec],
                                  os.path.join(args.work, "spec.json"))
    if spec_sum is None:
        sys.exit("model spec failed: %s" % err)
    plan = spec_sum["plan"]
    same = choice_text(plan) == choice_text(chosen)
    print("model spec:   %.2f s wall, chose %s (%s)" % (
        spec_s, choice_text(plan), "the same" if same else "differs"))
    print("model spec:   step %.2f ms; onnx search / spec search = %.4f" % (
        1e3 * plan["step_time_s"], chosen["step_time_s"] / plan["step_time_s"]))

    if not args.meshes:
        return
    devices = onnx_sum["world_size"]
    best = None
    for tp in range(1, devices + 1):
        for pp in range(1, devices // tp + 1):
            if devices % (tp * pp):
                continue
            dp = devices // (tp * pp)
            force = "dp=%d,tp=%d,pp=%d" % (dp, tp, pp)
            s, secs, err = loomc(args, [model, "--no-weights", "--force", force],
                                 os.path.join(args.work, "forced.json"))
            if s is None:
                print("forced %-18s no plan (%s)" % (force, err[0] if err else "?"))
                continue
            step = s["predicted"]["step_time_s"]
            print("forced %-18s %9.2f ms  (%.1f s)" % (force, 1e3 * step, secs))
            best = step if best is None else min(best, step)
    if best:
        print("default compiled / best forced compiled = %.4f" % (compiled / best))


if __name__ == "__main__":
    main()
