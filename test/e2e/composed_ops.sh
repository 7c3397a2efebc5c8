#!/usr/bin/env bash
# The ONNX ops loom builds from other ops (Pad, CumSum, pooling, Clip, Abs,
# Tile, Einsum, activations, reductions, LogSoftmax; test/models/composed_ops.py)
# on float32 runtime inputs, and the same ops folded from constants (with
# GatherElements and ScatterND): `loom-run --forward` against ONNX Runtime's
# outputs, every test required to pass.
source "$(dirname "$0")/lib.sh"
$PY "$MODELS/composed_ops.py" --out composed
$PY "$MODELS/node_conformance.py" --loom-run "$LOOM_BIN/loom-run" --loomc "$LOOM_BIN/loomc" \
  --data-dir composed --known-failures /dev/null --require-all
