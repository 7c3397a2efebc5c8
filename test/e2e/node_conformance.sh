#!/usr/bin/env bash
# The ONNX backend node tests of every op loomc supports, run through
# `loom-run --forward`; fails on any failure not listed in
# test/models/node_conformance_known_failures.txt.
source "$(dirname "$0")/lib.sh"
$PY "$MODELS/node_conformance.py" --loom-run "$LOOM_BIN/loom-run" --loomc "$LOOM_BIN/loomc"
