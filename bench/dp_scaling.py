#!/usr/bin/python3
"""Data-parallel scaling on CPU ranks: Loom against PyTorch DDP (gloo), side by side.

Builds a GPT-2 (4 layers, d=256, 4 heads, T=128, vocab 512; hf_models.build_model with
that config, random weights under seed 0), exports it to ONNX, compiles it with
`loomc --cluster cpu:N` for dp=1 and dp=2, and alternates rounds of

  Loom dp=1     loom-run on one rank
  PyTorch dp=1  a plain training loop
  Loom dp=2     mpirun -np 2 loom-run
  PyTorch dp=2  two processes, torch.distributed gloo, DistributedDataParallel
                (its default 25 MB buckets, all-reduces overlapped with backward)

on the same weights, data, global batch, AdamW and threads per rank, so that both see the
same machine load. Each round trains `--steps` steps; the first `--warmup` are not timed.
Prints each side's median step time (rank 0's), the ratio Loom / PyTorch at each dp
(below 1.0 means Loom is faster) with its spread over rounds, and Loom's exposed
communication time per step (the time rank 0 waited on collectives, from its metrics),
plus a JSON line with the figures.

  bench/dp_scaling.py --loom-bin build/bin [--rounds 3] [--steps 8] [--threads 1]
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

_venv.require(["transformers", "torch"], "dp_scaling.py")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import hf_models  # noqa: E402
import hf_train  # noqa: E402

SEQ = 128
CONFIG = dict(hf_models.HF_CONFIGS["gpt2"], n_embd=256, n_layer=4, n_head=4, n_positions=SEQ)


def build(work, batch):
    x, y = hf_models.make_lm_data("gpt2", hf_models.DEFAULT_TEXT, 0, 0, seq=SEQ)
    module, _ = hf_models.build_model("gpt2", 0, CONFIG)
    module.train()
    hf_models.export(module, torch.from_numpy(x[:batch]), os.path.join(work, "model.onnx"),
                     "input_ids")
    np.save(os.path.join(work, "input_ids.npy"), x)
    np.save(os.path.join(work, "target.npy"), y)
    return x, y


def train_steps(module, x, y, batch, steps, rank=0, world=1):
    """Rank `rank`'s step times: its slice of each global batch, AdamW."""
    torch.manual_seed(0)
    opt = hf_train.make_optimizer(module.parameters(), "adamw", 1e-4)
    per = batch // world
    times = []
    for i in range(steps):
        idx = hf_train.batch_indices(i, batch, len(x))[rank * per:(rank + 1) * per]
        t0 = time.perf_counter()
        logits = module(torch.from_numpy(x[idx]))
        loss = hf_train.lm_loss(logits, torch.from_numpy(y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def ddp_worker(args):
    """One rank of the DDP side (run as a subprocess); writes its step times."""
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x = np.load(os.path.join(args.work, "input_ids.npy"))
    y = np.load(os.path.join(args.work, "target.npy"))
    module, _ = hf_models.build_model("gpt2", 0, CONFIG)
    module.train()
    # GPT-2's causal masks are bool buffers, which gloo cannot broadcast; both ranks
    # build them alike, and the weights from the same seed.
    masks = [n for n, b in module.named_buffers() if b.dtype == torch.bool]
    torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        module, masks)
    ddp = torch.nn.parallel.DistributedDataParallel(module, broadcast_buffers=False)
    times = train_steps(ddp, x, y, args.batch, args.steps, rank, world)
    if rank == 0:
        with open(args.worker_out, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


def thread_env(args):
    n = str(args.threads)
    return dict(os.environ, LOOM_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n)


def loom_round(args, plan, dp, rnd):
    metrics = os.path.join(args.work, "metrics-dp%d-%d.jsonl" % (dp, rnd))
    cmd = [os.path.join(args.loom_bin, "loom-run"), plan, "--steps", str(args.steps),
           "--metrics", metrics, "--quiet",
           "--data", "input_ids=" + os.path.join(args.work, "input_ids.npy"),
           "--data", "target=" + os.path.join(args.work, "target.npy")]
    if dp > 1:
        cmd = [args.mpirun, "-np", str(dp), "--allow-run-as-root", "--oversubscribe",
               "--bind-to", "none"] + cmd
    subprocess.run(cmd, check=True, env=thread_env(args), stdin=subprocess.DEVNULL)
    with open(metrics) as f:
        rows = [json.loads(line) for line in f][args.warmup:]
    return ([r["step_time_s"] for r in rows],
            [r.get("comm_exposed_s", 0.0) for r in rows])


def torch_round(args, dp, x, y):
    if dp == 1:
        module, _ = hf_models.build_model("gpt2", 0, CONFIG)
        module.train()
        return train_steps(module, x, y, args.batch, args.steps)[args.warmup:]
    out = os.path.join(args.work, "ddp-times.json")
    env = dict(thread_env(args), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000),
               WORLD_SIZE=str(dp))
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--work", args.work,
           "--worker-out", out, "--batch", str(args.batch), "--steps", str(args.steps),
           "--threads", str(args.threads), "--loom-bin", args.loom_bin]
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r)), stdin=subprocess.DEVNULL)
             for r in range(dp)]
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("dp_scaling: a DDP worker failed")
    with open(out) as f:
        return json.load(f)[args.warmup:]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loom-bin", required=True, help="folder with loomc and loom-run")
    p.add_argument("--batch", type=int, default=8, help="global batch (default 8)")
    p.add_argument("--steps", type=int, default=8, help="steps per round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--mpirun", default=os.environ.get("LOOM_MPIEXEC", "mpirun"))
    p.add_argument("--work", default=None, help="scratch folder (default: a temp dir)")
    p.add_argument("--loomc-arg", action="append", default=[],
                   help="extra loomc argument for the dp=2 plan (repeatable)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return ddp_worker(args)
    torch.set_num_threads(args.threads)
    args.work = args.work or tempfile.mkdtemp(prefix="loom-dp-")
    os.makedirs(args.work, exist_ok=True)
    x, y = build(args.work, args.batch)
    plans = {}
    for dp in (1, 2):
        plans[dp] = os.path.join(args.work, "dp%d.loomplan" % dp)
        subprocess.run([os.path.join(args.loom_bin, "loomc"), os.path.join(args.work, "model.onnx"),
                        "--cluster", "cpu:%d" % dp, "--global-batch", str(args.batch),
                        "--optimizer", "adamw", "--lr", "1e-4", "-o", plans[dp], "--quiet"]
                       + (args.loomc_arg if dp > 1 else []), check=True)
    loom = {1: [], 2: []}
    torch_t = {1: [], 2: []}
    exposed = []
    ratios = {1: [], 2: []}
    for rnd in range(args.rounds):
        for dp in (1, 2):
            lt, ex = loom_round(args, plans[dp], dp, rnd)
            tt = torch_round(args, dp, x, y)
            loom[dp] += lt
            torch_t[dp] += tt
            if dp == 2:
                exposed += ex
            ratios[dp].append(statistics.median(lt) / statistics.median(tt))
    res = {"batch": args.batch, "threads": args.threads, "rounds": args.rounds}
    for dp in (1, 2):
        lm, tm = statistics.median(loom[dp]), statistics.median(torch_t[dp])
        print("dp=%d: loom %.1f ms/step, pytorch%s %.1f ms/step, ratio %.2f (rounds %s)"
              % (dp, lm * 1e3, " DDP" if dp > 1 else "", tm * 1e3, lm / tm,
                 " ".join("%.2f" % r for r in ratios[dp])))
        res["dp%d" % dp] = {"loom_ms": lm * 1e3, "pytorch_ms": tm * 1e3, "ratio": lm / tm,
                            "round_ratios": ratios[dp]}
    ex = statistics.median(exposed) if exposed else 0.0
    print("dp=2: loom exposed communication %.2f ms/step (%.0f%% of its step)"
          % (ex * 1e3, 100 * ex / statistics.median(loom[2])))
    res["dp2"]["loom_exposed_comm_ms"] = ex * 1e3
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
