#!/usr/bin/env python3
"""A GPT-2 whose shapes tensor parallelism does not divide: 3 heads (width
96) and a prime vocabulary of 509, 2 layers, sequence 32, random init,
exported by torch.onnx (opset 17, static batch 8), with token data.

  odd_gpt2.py --out DIR [--seed S]

Writes DIR/model.onnx, DIR/input_ids.npy and DIR/target.npy (64 windows of
32 random token ids, the target the ids shifted by one).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _venv import require  # noqa: E402

require(["transformers"], "odd_gpt2.py")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

VOCAB, SEQ, BATCH = 509, 32, 8


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=96, n_layer=2,
                                     n_head=3, use_cache=False, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)
    config._attn_implementation = "eager"
    model = Logits(transformers.GPT2LMHeadModel(config).float().eval())
    os.makedirs(args.out, exist_ok=True)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    torch.onnx.export(model, (ids,), os.path.join(args.out, "model.onnx"), opset_version=17,
                      input_names=["input_ids"], output_names=["logits"])
    rng = np.random.default_rng(args.seed + 1)
    stream = rng.integers(0, VOCAB, 64 * SEQ + 1)
    windows = np.stack([stream[i * SEQ:(i + 1) * SEQ + 1] for i in range(64)])
    np.save(os.path.join(args.out, "input_ids.npy"), windows[:, :-1].astype(np.int64))
    np.save(os.path.join(args.out, "target.npy"), windows[:, 1:].astype(np.int64))


if __name__ == "__main__":
    main()
