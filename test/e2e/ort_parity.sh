#!/usr/bin/env bash
# Forward parity with ONNX Runtime: `loom-run --forward` and onnxruntime agree
# on every graph output.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/mlp.py" --out mlp --sizes 32,64,64,10 --activation tanh --samples 16 --seed 4
loom_run --forward mlp/model.onnx --input x=mlp/x.npy --output-dir mlp/loom
$PY "$MODELS/ort_forward.py" --model mlp/model.onnx --input x=mlp/x.npy --output-dir mlp/ort
# ONNX Runtime's own sensitivity: the same forward on 1e-7-perturbed weights and
# input moves the logits by 0.077 of rtol 1e-5 + atol 1e-6 (too close to the
# 0.1 limit to hold on every CPU), 0.026 of the bound used.
perturbed mlp/pert mlp/model.onnx mlp/x.npy
$PY "$MODELS/ort_forward.py" --model mlp/pert/model.onnx --input x=mlp/pert/x.npy \
  --output-dir mlp/pert/ort
$PY "$MODELS/compare_outputs.py" --a mlp/loom --b mlp/ort --rtol 3e-5 --atol 3e-6 \
  --sensitivity mlp/pert/ort
