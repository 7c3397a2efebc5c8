#!/usr/bin/python3
"""Export a GPT-2 of any size to ONNX with its parameters stored outside the graph.

  bench/gpu/gpt2_export.py --out DIR [--size 124m | --layers L --hidden H --heads A]
                           [--seq S] [--vocab V] [--keep-weights]

The model is Hugging Face's GPT2LMHeadModel (random weights, every dropout 0,
eager attention), exported as test/models/hf_models.py does (opset 17,
training mode, no constant folding, batch 1: loomc rewrites the batch). The
trainable parameters are then moved into `model.onnx.data` as ONNX external
data, so `model.onnx` itself holds only the graph and the small constants the
importer folds (masks, shapes). Without --keep-weights the data file is
deleted: the graph is then planned with `loomc --no-weights` and trained with
`loom-run --init random:SEED`, which is how the GPU benchmark carries a 124M
model in well under a megabyte.

Writes DIR/model.onnx, DIR/model.onnx.data (with --keep-weights) and
DIR/model.json: the config, the parameter count and the training FLOPs per
token, 6*N + 12*layers*hidden*seq (the PaLM accounting: N counts every
parameter, the tied embedding once; attention scores and values both ways).
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "models"))
from _venv import require  # noqa: E402

if __name__ == "__main__":
    require(["transformers"], "gpt2_export.py")

import hf_models  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402

SIZES = {  # (layers, hidden, heads) of the published GPT-2 checkpoints
    "124m": (12, 768, 12),
    "350m": (24, 1024, 16),
    "774m": (36, 1280, 20),
}


def externalise(model_path, parameters, keep):
    """Move the named initializers of `model_path` into `model.onnx.data`."""
    m = onnx.load(model_path)
    data_name = os.path.basename(model_path) + ".data"
    data_path = os.path.join(os.path.dirname(model_path), data_name)
    offset = 0
    with open(data_path, "wb") as f:
        for t in m.graph.initializer:
            if t.name not in parameters:
                continue
            raw = onnx.numpy_helper.to_array(t).tobytes()
            f.write(raw)
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.data_location = onnx.TensorProto.EXTERNAL
            del t.external_data[:]
            for key, value in (("location", data_name), ("offset", str(offset)),
                               ("length", str(len(raw)))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            offset += len(raw)
    onnx.save(m, model_path)
    if not keep:
        os.remove(data_path)
    return offset


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--size", choices=sorted(SIZES), default="124m")
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--keep-weights", action="store_true",
                   help="keep model.onnx.data (default: delete it)")
    args = p.parse_args(argv)
    layers, hidden, heads = SIZES[args.size]
    layers = args.layers or layers
    hidden = args.hidden or hidden
    heads = args.heads or heads
    if hidden % heads:
        raise SystemExit("gpt2_export.py: error: --hidden %d is not a multiple of --heads %d"
                         % (hidden, heads))
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()

    import transformers
    cfg = dict(hf_models.HF_CONFIGS["gpt2"])
    cfg.update(vocab_size=args.vocab, n_positions=args.seq, n_embd=hidden,
               n_layer=layers, n_head=heads)
    model, cfg = hf_models.build_model("gpt2", 0, transformers.GPT2Config(**cfg).to_dict())
    model.train()
    path = os.path.join(args.out, "model.onnx")
    hf_models.export(model, torch.zeros(1, args.seq, dtype=torch.long), path, "input_ids")
    imap = hf_models.initializer_map(model, onnx.load(path))
    stored = externalise(path, set(imap["parameters"]), args.keep_weights)

    n = sum(q.numel() for q in model.parameters())
    flops = 6 * n + 12 * layers * hidden * args.seq
    meta = {"model": "gpt2", "layers": layers, "hidden": hidden, "heads": heads,
            "seq": args.seq, "vocab": args.vocab, "parameters": n,
            "train_flops_per_token": flops, "weights_bytes": stored,
            "weights_kept": args.keep_weights, "config": cfg}
    with open(os.path.join(args.out, "model.json"), "w") as f:
        json.dump(meta, f, indent=1, default=str)
        f.write("\n")
    print("gpt2_export.py: l=%d h=%d a=%d s=%d V=%d, %.1fM parameters, %.3f GFLOP/token, "
          "graph %.1f KiB%s -> %s (%.0fs)"
          % (layers, hidden, heads, args.seq, args.vocab, n / 1e6, flops / 1e9,
             os.path.getsize(path) / 1024,
             "" if not args.keep_weights else ", weights %.0f MiB" % (stored / 2**20),
             args.out, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
