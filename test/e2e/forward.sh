#!/usr/bin/env bash
# `loom-run --forward` writes every graph output, matching PyTorch's forward
# of the same ONNX graph; the exported trained model runs forward too.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/mlp.py" --out . --sizes 20,16,16,5 --activation sigmoid --samples 12 --seed 9
loom_run --forward model.onnx --input x=x.npy --output-dir out
[ -f out/logits.npy ] || fail "no out/logits.npy"
# PyTorch's forward of the same graph (torch_train.py's interpreter), and again
# on 1e-7-perturbed weights and input for its sensitivity.
torch_forward() {  # torch_forward MODEL X OUTDIR
  $PY - "$@" <<'PY'
import os, sys
import numpy as np, torch
sys.path.insert(0, "%s/test/models" % os.environ["LOOM_SRC"])
from torch_train import load_onnx_module
model, x, out = sys.argv[1:4]
with torch.no_grad():
    ref = load_onnx_module(model)(torch.from_numpy(np.load(x)))
os.makedirs(out, exist_ok=True)
np.save(os.path.join(out, "logits.npy"), (ref[0] if isinstance(ref, (list, tuple)) else ref).numpy())
PY
}
perturbed pert model.onnx x.npy
torch_forward model.onnx x.npy ref
torch_forward pert/model.onnx pert/x.npy pert/ref
$PY "$MODELS/compare_outputs.py" --a out --b ref --rtol 1e-5 --atol 1e-6 --sensitivity pert/ref
# A model trained by loom-run and exported still runs forward.
loomc model.onnx --cluster cpu:1 --global-batch 4 -o p.loomplan --quiet
loom_run p.loomplan --data x=x.npy --data target=target.npy --steps 3 \
  --export-onnx trained.onnx --quiet
loom_run --forward trained.onnx --input x=x.npy --output-dir out2
[ -f out2/logits.npy ] || fail "no out2/logits.npy"
echo "ok: exported model runs forward"
