#!/usr/bin/env python3
"""The PyTorch side of the GPT-2 benchmark: the same model and step, written the
way a practitioner would write it for speed.

  torch_gpt2.py --layers 12 --hidden 768 --heads 12 --seq 1024 --vocab 50257
                --batch 16 --steps 20 [--warmup 5] [--precision bf16|fp32]
                [--compile] [--device cuda|cpu] [--json FILE]

GPT-2 (pre-norm blocks, tanh GELU, tied embeddings, no dropout, biases
everywhere) as a plain module; bf16 autocast with fp32 master weights (what
`loomc --precision bf16` plans); causal attention through
`scaled_dot_product_attention` (flash attention on a GPU); AdamW with
PyTorch's defaults plus weight decay 0.01 (Loom's adamw), `fused=True` on a GPU;
random token data. Prints the median step time after the warm-up, tokens/s,
and a JSON line (also written to --json).

No Hugging Face dependency: this runs under whatever PyTorch the GPU machine
has (2.x).
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        y = attention(q, k, v)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return F.linear(self.ln_f(x), self.wte.weight)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in (("layers", 12), ("hidden", 768), ("heads", 12), ("seq", 1024),
                          ("vocab", 50257), ("batch", 16), ("steps", 20), ("warmup", 5)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--device", default="cuda")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.steps <= args.warmup:
        raise SystemExit("torch_gpt2.py: error: --steps must exceed --warmup")
    dev = torch.device(args.device)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = GPT2(args.layers, args.hidden, args.heads, args.seq, args.vocab).to(dev)
    nparams = sum(q.numel() for q in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01,
                            **({"fused": True} if dev.type == "cuda" else {}))
    step_model = torch.compile(model) if args.compile else model
    ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=dev)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times, losses = [], []
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.precision == "bf16")
    for _ in range(args.steps):
        sync()
        t0 = time.perf_counter()
        with amp:
            logits = step_model(x)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    step_s = statistics.median(times[args.warmup:])
    tokens = args.batch * args.seq
    flops = 6 * nparams + 12 * args.layers * args.hidden * args.seq
    out = {"side": "pytorch", "torch": torch.__version__, "device": str(dev),
           "compile": args.compile, "precision": args.precision, "parameters": nparams,
           "batch": args.batch, "seq": args.seq, "step_s": step_s,
           "tokens_per_s": tokens / step_s, "tflops": flops * tokens / step_s / 1e12,
           "first_loss": losses[0], "last_loss": losses[-1],
           "peak_mem_gib": (torch.cuda.max_memory_allocated() / 2**30
                            if dev.type == "cuda" else None)}
    if not all(math.isfinite(v) for v in losses):
        raise SystemExit("torch_gpt2.py: error: non-finite loss %s" % losses)
    print("pytorch: %.1f ms/step, %.0f tokens/s, %.1f TFLOP/s (loss %.3f -> %.3f)"
          % (step_s * 1e3, out["tokens_per_s"], out["tflops"], losses[0], losses[-1]))
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
