#!/usr/bin/env bash
# `loom-run --forward` writes every graph output, matching PyTorch's forward
# of the same ONNX graph; the exported trained model runs forward too.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/mlp.py" --out . --sizes 20,16,16,5 --activation sigmoid --samples 12 --seed 9
loom_run --forward model.onnx --input x=x.npy --output-dir out
[ -f out/logits.npy ] || fail "no out/logits.npy"
$PY - <<'PY'
import sys
import numpy as np, torch
sys.path.insert(0, "%s/test/models" % __import__("os").environ["LOOM_SRC"])
from torch_train import load_onnx_module
m = load_onnx_module("model.onnx")
x = np.load("x.npy")
with torch.no_grad():
    ref = m(torch.from_numpy(x))
ref = (ref[0] if isinstance(ref, (list, tuple)) else ref).numpy()
got = np.load("out/logits.npy")
assert got.shape == ref.shape, (got.shape, ref.shape)
err = np.abs(got - ref).max()
assert np.allclose(got, ref, rtol=1e-5, atol=1e-6), err
print("ok: forward matches PyTorch, max abs err %.3g" % err)
PY
# A model trained by loom-run and exported still runs forward.
loomc model.onnx --cluster cpu:1 --global-batch 4 -o p.loomplan --quiet
loom_run p.loomplan --data x=x.npy --data target=target.npy --steps 3 \
  --export-onnx trained.onnx --quiet
loom_run --forward trained.onnx --input x=x.npy --output-dir out2
[ -f out2/logits.npy ] || fail "no out2/logits.npy"
echo "ok: exported model runs forward"
