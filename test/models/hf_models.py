#!/usr/bin/python3
"""Build a small GPT-2, BERT, LLaMA, ResNet-18 or MobileNetV2, export it to ONNX, write its data.

  hf_models.py --model gpt2|bert|llama|resnet18|mobilenetv2 --out DIR [--seed S] [--batch B]
               [--samples N] [--text FILE] [--image-size 32] [--image-data digits|noise]

The model is built from a config with random initialisation (torch.manual_seed(S);
nothing is downloaded, HF_HUB_OFFLINE=1) and every dropout probability set to 0,
then exported with torch.onnx.export at opset 17, static shapes [B, ...],
training=TrainingMode.TRAINING (training-mode semantics: BatchNormalization uses batch
statistics; dropout becomes Dropout(ratio=0)) and do_constant_folding=False, as PyTorch
recommends for training-amenable export: with folding, the exporter replaces the
transposed weight of every bias-free Linear by a new unnamed initializer
('onnx::MatMul_123'), which loses the parameter names and unties tied embeddings.

Writes to DIR:
  model.onnx     the graph; input `input_ids` int64 [B, S] (LMs) or `images` float32
                 [B, 3, S, S] (ResNet, MobileNetV2: torchvision's, 10 classes, dropout 0;
                 S = --image-size, default 32); one output `logits` ([B, S, V] or [B, 10]).
                 Initializers are named like the PyTorch state dict (tied weights once).
  input_ids.npy / images.npy, target.npy
                 LMs: a character-level token stream (the bytes of --text, default
                 /usr/share/common-licenses/GPL-3, modulo the vocabulary), cut into N
                 windows of S+1 tokens: input = tokens [0, S), target = tokens [1, S] of
                 the window (int64 [N, S]). BERT (bidirectional, so next-token targets
                 would be copied) instead gets a masked-LM set: 15% of the input tokens
                 replaced by [MASK] = V-1, target = the original tokens at every
                 position. Images: scikit-learn's digits (8x8) scaled to S x S, three
                 equal channels, normalised (float32 [N, 3, S, S]), int64 labels [N];
                 --image-data noise: N(0, 1) pixels instead, with the same labels.
                 Loss for all: cross-entropy, mean over every position / sample.
  ops.txt        the sorted set of ONNX op types in the graph, one per line.
  config.json    what hf_train.py needs to rebuild the module: model kind, HF config,
                 shapes, and the initializer map: "parameters" (trainable, ONNX name
                 -> every module parameter name sharing it, e.g. GPT-2's lm_head.weight
                 under transformer.wte.weight), "copies" (initializers that hold a
                 parameter's values, possibly transposed: what constant folding
                 writes; empty here), "buffers" (initializers that are module
                 buffers, not trained: BatchNorm running stats) and "constants"
                 (initializers that are neither, if the exporter lifted any).

The reference trainer (hf_train.py) loads the weights from model.onnx, not from
PyTorch state, so it starts from exactly the weights Loom reads.
"""
import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _venv import require  # noqa: E402

if __name__ == "__main__":
    require(["transformers", "torchvision"], "hf_models")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import numpy_helper  # noqa: E402

MODELS = ("gpt2", "bert", "llama", "resnet18", "mobilenetv2")
IMAGE_MODELS = ("resnet18", "mobilenetv2")
DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"
SEQ = 64
VOCAB = 512
NUM_CLASSES = 10
IMAGE = 32

# The configs of the issue: small enough for CPU tests, shaped like the real thing.
HF_CONFIGS = {
    "gpt2": dict(vocab_size=VOCAB, n_positions=SEQ, n_embd=128, n_layer=2, n_head=4,
                 activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                 attn_pdrop=0.0, bos_token_id=None, eos_token_id=None),
    "bert": dict(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=512, hidden_act="gelu", hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0, max_position_embeddings=SEQ,
                 type_vocab_size=2, pad_token_id=None),
    "llama": dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
                  hidden_act="silu", rms_norm_eps=1e-6, attention_dropout=0.0,
                  tie_word_embeddings=False, pad_token_id=None, bos_token_id=None,
                  eos_token_id=None),
}


class ModelError(Exception):
    pass


# ----------------------------------------------------------------------------- models

def _logits_only(model, call_kwargs, arg="input_ids"):
    """Make `model` (an HF model) return only its first output (the logits, or an
    encoder's last hidden state) from forward(x), x passed as keyword `arg`.

    The class is swapped for a subclass instead of wrapping the module, so parameter
    and initializer names stay the HF state-dict names (no 'm.' prefix)."""
    base = type(model)

    def forward(self, x):
        return base.forward(self, **{arg: x}, return_dict=False, **call_kwargs)[0]

    model.__class__ = type(base.__name__ + "Logits", (base,), {"forward": forward})
    return model


def build_model(kind, seed, hf_config=None, layers=0):
    """The torch module for `kind`, randomly initialised under torch.manual_seed(seed).

    hf_config: a config dict (as saved in config.json) to rebuild exactly that model;
    default: the issue's small config, with `layers` transformer blocks when > 0.
    Returns (module, config dict)."""
    torch.manual_seed(seed)
    if kind in IMAGE_MODELS:
        import torchvision
        cfg = dict(hf_config or {"num_classes": NUM_CLASSES})
        if kind == "resnet18":
            model = torchvision.models.resnet18(weights=None, num_classes=cfg["num_classes"])
        else:
            model = torchvision.models.mobilenet_v2(weights=None, num_classes=cfg["num_classes"],
                                                    dropout=0.0)
        check_no_dropout(model)
        return model.float(), cfg
    import transformers
    classes = {
        "gpt2": (transformers.GPT2Config, transformers.GPT2LMHeadModel, {"use_cache": False}),
        "bert": (transformers.BertConfig, transformers.BertForMaskedLM, {}),
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, {"use_cache": False}),
    }
    if kind not in classes:
        raise ModelError("unknown model %r (choose from %s)" % (kind, ", ".join(MODELS)))
    config_cls, model_cls, call_kwargs = classes[kind]
    if hf_config is None:
        cfg = dict(HF_CONFIGS[kind])
        if layers > 0:
            cfg["n_layer" if kind == "gpt2" else "num_hidden_layers"] = layers
        config = config_cls(**cfg)
    else:
        config = config_cls.from_dict(dict(hf_config))
    # Eager attention: the SDPA path needs torch >= 2.1.1 and is not traceable by 1.13.
    config._attn_implementation = "eager"
    model = model_cls(config).float()
    _logits_only(model, call_kwargs)
    check_no_dropout(model, config)
    return model, config.to_dict()


def check_no_dropout(model, config=None):
    bad = ["%s (p=%g)" % (n, m.p) for n, m in model.named_modules()
           if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p != 0]
    if config is not None:
        for key in ("attention_dropout", "attn_pdrop", "attention_probs_dropout_prob",
                    "hidden_dropout_prob", "resid_pdrop", "embd_pdrop", "dropout",
                    "activation_dropout", "embed_dropout", "resid_dropout", "dropout_rate",
                    "layerdrop"):
            if getattr(config, key, 0) not in (0, 0.0, None):
                bad.append("config.%s=%g" % (key, getattr(config, key)))
    if bad:
        raise ModelError("dropout must be 0: " + ", ".join(bad))


def input_name(kind):
    return "images" if kind in IMAGE_MODELS else "input_ids"


# ----------------------------------------------------------------------------- data

def text_tokens(path, vocab):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelError("cannot read text %s: %s" % (path, e.strerror or e))
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64) % vocab


def make_lm_data(kind, text, samples, seed, vocab=VOCAB, seq=SEQ, masked=None):
    """(input_ids, target), int64 [N, S]; see the module docstring. masked: masked-LM
    data instead of next-token windows (default: for BERT)."""
    tokens = text_tokens(text, vocab)
    windows = (len(tokens) - 1) // seq
    if windows < 1:
        raise ModelError("text %s has %d tokens; need at least %d" % (text, len(tokens), seq + 1))
    n = windows if samples <= 0 else min(samples, windows)
    if samples > windows:
        raise ModelError("text %s gives %d windows of %d tokens; --samples %d is too many"
                         % (text, windows, seq + 1, samples))
    idx = np.arange(n)[:, None] * seq + np.arange(seq + 1)[None, :]
    win = tokens[idx]
    if (kind == "bert") if masked is None else masked:
        rng = np.random.default_rng(seed + 1)
        target = win[:, :seq].copy()
        inputs = target.copy()
        inputs[rng.random(inputs.shape) < 0.15] = vocab - 1   # [MASK]
        return inputs, target
    return np.ascontiguousarray(win[:, :seq]), np.ascontiguousarray(win[:, 1:])


def make_image_data(samples, seed, size=IMAGE, kind="digits"):
    """(images float32 [N,3,size,size], labels int64 [N]).

    digits: scikit-learn's digits, upscaled (nearest) to size x size, three equal
    channels. noise: i.i.d. N(0, 1) pixels with the digits' labels. Noise is what a
    multi-step parity test needs: a digit's flat background makes many ReLU and
    max-pool inputs nearly equal or nearly zero, so a rounding error flips them and
    the training trajectory diverges within a few steps (test/models/README.md)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = digits.images.astype(np.float32) / 16.0         # [1797, 8, 8] in [0, 1]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed + 1).permutation(len(x))
    n = len(x) if samples <= 0 else samples
    if n > len(x):
        raise ModelError("--samples %d: only %d digit images" % (samples, len(x)))
    x, y = x[order[:n]], y[order[:n]]
    if kind == "noise":
        x = np.random.default_rng(seed + 2).standard_normal((n, 3, size, size))
        return np.ascontiguousarray(x, dtype=np.float32), y
    x = np.kron(x, np.ones((size // 8, size // 8), dtype=np.float32))   # nearest upscale
    x = (x - 0.3) / 0.4
    x = np.repeat(x[:, None, :, :], 3, axis=1)
    return np.ascontiguousarray(x, dtype=np.float32), y


def make_data(kind, samples, seed, text=DEFAULT_TEXT, image_size=IMAGE, image_data="digits"):
    if kind in IMAGE_MODELS:
        return make_image_data(samples, seed, image_size, image_data)
    return make_lm_data(kind, text, samples, seed)


# ----------------------------------------------------------------------------- export

def export(model, example, path, in_name, out_name="logits", do_constant_folding=False,
           training=True):
    """torch.onnx.export, opset 17, static shapes, training mode, no constant folding
    unless asked (the model zoo exports both ways, and in eval mode, torch's default,
    where the model has no BatchNorm: training=False).

    Tracing in training mode runs the forward once, which updates BatchNorm's running
    statistics (and num_batches_tracked) in place, and the exporter writes the updated
    values. Both the module and the file get the pre-export buffer values back, so the
    ONNX initializers are the module's initial state."""
    saved = {n: b.detach().clone() for n, b in model.named_buffers()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), path, input_names=[in_name],
                          output_names=[out_name], opset_version=17,
                          do_constant_folding=do_constant_folding,
                          training=(torch.onnx.TrainingMode.TRAINING if training
                                    else torch.onnx.TrainingMode.EVAL))
    model.train()
    changed = [n for n, b in model.named_buffers() if not torch.equal(b, saved[n])]
    if changed:
        with torch.no_grad():
            for n, b in model.named_buffers():
                b.copy_(saved[n])
        m = onnx.load(path)
        for t in m.graph.initializer:
            if t.name in saved:
                t.CopyFrom(numpy_helper.from_array(saved[t.name].numpy(), t.name))
        onnx.save(m, path)


def graph_op_types(graph):
    """Op types of every node, including nodes of subgraphs (If/Loop bodies)."""
    ops = set()
    for node in graph.node:
        ops.add(node.op_type if node.domain in ("", "ai.onnx") else node.domain + "." + node.op_type)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops |= graph_op_types(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    ops |= graph_op_types(g)
    return ops


def _module_tensors(module):
    """{name: tensor} of every parameter and buffer under every alias name, and
    {id(parameter): [alias names]} (tied parameters share one id)."""
    params, buffers, aliases = {}, {}, {}
    for mname, m in module.named_modules(remove_duplicate=False):
        prefix = mname + "." if mname else ""
        for pname, p in m._parameters.items():
            if p is not None:
                params[prefix + pname] = p
                names = aliases.setdefault(id(p), [])
                if prefix + pname not in names:
                    names.append(prefix + pname)
        for bname, b in m._buffers.items():
            if b is not None:
                buffers[prefix + bname] = b
    return params, buffers, aliases


def _copied_parameter(array, sources):
    """(parameter alias names, transposed) of the one parameter in `sources` that
    `array` holds bit for bit, as it is or transposed; None if none does.

    sources: [(alias names, numpy value)] of the parameters whose elements are not all
    equal (a norm scale of ones or a zero bias is no source: a folded constant may
    equal it)."""
    found = []
    for names, value in sources:
        if value.size != array.size or value.dtype != array.dtype:
            continue
        for transposed, v in ((False, value), (True, value.T if value.ndim == 2 else None)):
            if v is not None and v.shape == array.shape and \
                    np.ascontiguousarray(v).tobytes() == array.tobytes():
                found.append((names, transposed))
    if len(found) > 1:
        raise ModelError("an initializer equals parameters %s and %s: cannot tell which it copies"
                         % (found[0][0][0], found[1][0][0]))
    return found[0] if found else None


def initializer_map(module, onnx_model):
    """Map ONNX initializers to the module's tensors.

    Returns {"parameters": {init: [param alias names]}, "copies": {init: {"parameter":
    alias name, "transposed": bool}}, "deduplicated": {param name: init}, "buffers":
    [init...], "constants": [init...]}. "deduplicated" are the parameters an eval-mode
    export wrote as Identity of an initializer equal to them at export (their own name,
    the initializer they start from).
    An initializer named like no parameter or buffer is a *copy* of a parameter when it
    holds that parameter's values bit for bit, as they are or transposed: with constant
    folding the exporter writes the transposed weight of a bias-free Linear as a new
    initializer ('onnx::MatMul_123'), and a tied weight used that way becomes an untied
    copy of its other use (GPT-2's lm_head of wte). Call it with the module as it was
    exported. Raises ModelError unless every parameter of the module is one initializer
    by name, or copied (tied parameters count once), with the right shape."""
    params, buffers, aliases = _module_tensors(module)
    inits = {t.name: t for t in onnx_model.graph.initializer}
    out = {"parameters": {}, "copies": {}, "deduplicated": {}, "buffers": [],
           "constants": []}
    named, covered = {}, set()
    sources = [(names, params[names[0]].detach().numpy()) for names in aliases.values()]
    sources = [(names, v) for names, v in sources if v.size and v.min() != v.max()]
    for name, t in inits.items():
        shape = tuple(t.dims)
        if name in params:
            p = params[name]
            if tuple(p.shape) != shape:
                raise ModelError("initializer %s has shape %s, parameter has %s"
                                 % (name, list(shape), list(p.shape)))
            if id(p) in named:
                raise ModelError("parameter %s is two initializers: %s and %s"
                                 % (name, named[id(p)], name))
            named[id(p)] = name
            covered.add(id(p))
            out["parameters"][name] = list(aliases[id(p)])
        elif name in buffers:
            if tuple(buffers[name].shape) != shape:
                raise ModelError("initializer %s has shape %s, buffer has %s"
                                 % (name, list(shape), list(buffers[name].shape)))
            out["buffers"].append(name)
        else:
            array = numpy_helper.to_array(t)
            copy = _copied_parameter(array, sources) if array.dtype.kind == "f" else None
            if copy is None:
                out["constants"].append(name)
                continue
            names, transposed = copy
            covered.add(id(params[names[0]]))
            out["copies"][name] = {"parameter": names[0], "transposed": transposed}
    # Eval-mode export writes parameters equal at export (all-ones norm scales, zero
    # biases) once and the others as Identity of it under their own names.
    for node in onnx_model.graph.node:
        if (node.op_type == "Identity" and len(node.input) == 1 and node.input[0] in inits
                and node.output[0] in params and node.output[0] not in inits):
            p = params[node.output[0]]
            if id(p) in named or id(p) in covered:
                continue
            named[id(p)] = node.output[0]
            covered.add(id(p))
            out["deduplicated"][node.output[0]] = node.input[0]
    missing = [names[0] for pid, names in aliases.items() if pid not in covered]
    if missing:
        raise ModelError("parameter(s) not among the ONNX initializers: %s"
                         % ", ".join(sorted(missing)))
    return out


def load_onnx_weights(module, onnx_model, imap=None):
    """Copy every initializer mapped to a parameter or buffer into `module` (in place).
    A parameter that is an initializer by name is loaded from that one; one that is only
    copied, from its first copy. Returns the initializer map."""
    if imap is None:
        imap = initializer_map(module, onnx_model)
    params, buffers, _ = _module_tensors(module)
    arrays = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
    loaded = set()
    with torch.no_grad():
        for name in imap["parameters"]:
            params[name].copy_(torch.from_numpy(np.array(arrays[name])))
            loaded.add(id(params[name]))
        for name, source in imap.get("deduplicated", {}).items():
            params[name].copy_(torch.from_numpy(np.array(arrays[source])))
            loaded.add(id(params[name]))
        for name, copy in imap["copies"].items():
            p = params[copy["parameter"]]
            if id(p) not in loaded:
                value = torch.from_numpy(np.array(arrays[name]))
                p.copy_(value.T if copy["transposed"] else value)
                loaded.add(id(p))
        for name in imap["buffers"]:
            buffers[name].copy_(torch.from_numpy(np.array(arrays[name])))
    return imap


def module_weights(module, imap):
    """{initializer name: numpy array} of the module's current parameters (a copy as
    its initializer holds it: transposed where that is) and buffers."""
    params, buffers, _ = _module_tensors(module)
    out = {n: params[n].detach().numpy().copy()
           for n in list(imap["parameters"]) + list(imap.get("deduplicated", {}))}
    for name, copy in imap["copies"].items():
        value = params[copy["parameter"]].detach().numpy()
        out[name] = (value.T if copy["transposed"] else value).copy()
    out.update({n: buffers[n].detach().numpy().copy() for n in imap["buffers"]})
    return out


def check_static(onnx_model, outputs=True):
    """Raise ModelError if a graph input (or output) has a symbolic dimension."""
    g = onnx_model.graph
    for vi in list(g.input) + (list(g.output) if outputs else []):
        dims = vi.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            raise ModelError("graph %s %s has a symbolic dimension" % (
                "input" if vi in g.input else "output", vi.name))


def build(kind, out_dir, seed=0, batch=8, samples=0, text=DEFAULT_TEXT, image_size=IMAGE,
          image_data="digits", layers=0):
    """Build, export and write everything; returns (module, config dict)."""
    if batch < 1:
        raise ModelError("--batch must be >= 1")
    if image_size < 32 or image_size % 8:
        raise ModelError("--image-size %d: must be a multiple of 8, at least 32" % image_size)
    os.makedirs(out_dir, exist_ok=True)
    x, target = make_data(kind, samples, seed, text, image_size, image_data)
    if len(x) < batch:
        raise ModelError("%d samples, fewer than the batch %d" % (len(x), batch))
    if layers and kind in IMAGE_MODELS:
        raise ModelError("--layers is for the transformer models")
    model, cfg = build_model(kind, seed, layers=layers)
    model.train()
    in_name = input_name(kind)
    path = os.path.join(out_dir, "model.onnx")
    export(model, torch.from_numpy(x[:batch]), path, in_name)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    check_static(m)
    imap = initializer_map(model, m)
    ops = sorted(graph_op_types(m.graph))
    with open(os.path.join(out_dir, "ops.txt"), "w") as f:
        f.write("".join(op + "\n" for op in ops))
    np.save(os.path.join(out_dir, in_name + ".npy"), x)
    np.save(os.path.join(out_dir, "target.npy"), target)
    out_shape = [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim]
    meta = {
        "model": kind,
        "seed": seed,
        "batch": batch,
        "input": in_name,
        "input_shape": list(x.shape[1:]),
        "output": "logits",
        "output_shape": out_shape,
        "loss": "cross_entropy",
        "samples": int(len(x)),
        "config": cfg,
        "initializers": imap,
        "opset": 17,
        "export": {"training": "TRAINING", "do_constant_folding": False,
                   "torch": torch.__version__},
    }
    if kind not in IMAGE_MODELS:
        import transformers
        meta["export"]["transformers"] = transformers.__version__
        meta["text"] = os.path.abspath(text)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(meta, f, indent=1, default=str)
        f.write("\n")
    return model, meta


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=MODELS)
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--seed", type=int, default=0,
                   help="torch.manual_seed for the weights; data masks/shuffles use seed+1 (default 0)")
    p.add_argument("--batch", type=int, default=8,
                   help="the static batch dimension of the exported graph (default 8)")
    p.add_argument("--samples", type=int, default=0,
                   help="number of samples N (default: every window of the text; 512 images)")
    p.add_argument("--image-size", type=int, default=IMAGE,
                   help="image models: height and width (default %d)" % IMAGE)
    p.add_argument("--image-data", choices=["digits", "noise"], default="digits",
                   help="image models: upscaled digits (default) or N(0,1) noise with the digits' labels")
    p.add_argument("--layers", type=int, default=0,
                   help="transformer models: the number of blocks (default: the small config's 2)")
    p.add_argument("--text", default=DEFAULT_TEXT,
                   help="text file for the LM token stream (default %s)" % DEFAULT_TEXT)
    args = p.parse_args(argv)
    if args.model in IMAGE_MODELS and args.samples == 0:
        args.samples = 512
    t0 = time.time()
    try:
        model, meta = build(args.model, args.out, args.seed, args.batch, args.samples, args.text,
                            args.image_size, args.image_data, args.layers)
    except ModelError as e:
        raise SystemExit("hf_models: error: %s" % e)
    nparams = sum(p.numel() for p in model.parameters())
    ops = open(os.path.join(args.out, "ops.txt")).read().split()
    print("hf_models: %s params=%d %s %s -> logits %s, %d op types, %d samples -> %s (%.1fs)"
          % (args.model, nparams, meta["input"], [args.batch] + meta["input_shape"],
             meta["output_shape"], len(ops), meta["samples"], args.out, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
