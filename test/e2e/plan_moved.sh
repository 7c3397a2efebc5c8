#!/usr/bin/env bash
# A plan travels with its model: compiled in one folder, run from another
# (another machine's paths), it finds the model next to itself or where
# --model says, and says in one line what to pass when it finds none.
source "$(dirname "$0")/lib.sh"

mkdir -p compiled moved elsewhere
(cd compiled &&
  $PY "$MODELS/mlp.py" --out . --sizes 8,16,4 --samples 64 --seed 1 &&
  loomc model.onnx --cluster cpu:1 --global-batch 8 -o p.loomplan --quiet)
train() { loom_run "$1" --data x=compiled/x.npy --data target=compiled/target.npy \
  --steps 3 --quiet --metrics "$2" "${@:3}"; }
train compiled/p.loomplan before.jsonl

# The recorded (absolute) path is gone; the model sits next to the moved plan.
mv compiled/p.loomplan compiled/model.onnx moved/
train moved/p.loomplan beside.jsonl

# Neither the recorded path nor the plan's folder has it.
mv moved/model.onnx elsewhere/
expect_error "pass --model MODEL.onnx" train moved/p.loomplan x.jsonl
train moved/p.loomplan flag.jsonl --model elsewhere/model.onnx
expect_error "--model 'nowhere.onnx': no such file" train moved/p.loomplan x.jsonl --model nowhere.onnx
expect_error "--model 'nowhere.onnx': no such file" train moved/p.loomplan x.jsonl \
  --model nowhere.onnx --init random:3
# Random init reads no model.
train moved/p.loomplan random.jsonl --init random:3

$PY - <<'PY'
import json
loss = lambda f: [json.loads(l)["loss"] for l in open(f)]
ref = loss("before.jsonl")
for f in ("beside.jsonl", "flag.jsonl"):
    assert loss(f) == ref, (f, loss(f), ref)
assert loss("random.jsonl") != ref
print("moved plan: same losses", ref)
PY
