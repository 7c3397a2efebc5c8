#!/usr/bin/env bash
# The ONNX backend node tests of every op loomc supports, run through
# `loom-run --forward`; fails on any failure not listed in
# test/models/node_conformance_known_failures.txt, or when fewer than 95% of
# the tests of the listed ops pass (counted over all of them, not only those
# that run).
source "$(dirname "$0")/lib.sh"
$PY "$MODELS/node_conformance.py" --loom-run "$LOOM_BIN/loom-run" --loomc "$LOOM_BIN/loomc" \
  --min-pass-rate 95
