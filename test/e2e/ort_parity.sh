#!/usr/bin/env bash
# Forward parity with ONNX Runtime: `loom-run --forward` and onnxruntime agree
# on every graph output.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/mlp.py" --out mlp --sizes 32,64,64,10 --activation tanh --samples 16 --seed 4
loom_run --forward mlp/model.onnx --input x=mlp/x.npy --output-dir mlp/loom
$PY "$MODELS/ort_forward.py" --model mlp/model.onnx --input x=mlp/x.npy --output-dir mlp/ort
$PY "$MODELS/compare_outputs.py" --a mlp/loom --b mlp/ort --rtol 1e-5 --atol 1e-6
