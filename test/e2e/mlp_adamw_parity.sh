#!/usr/bin/env bash
# Acceptance 1 and 2: a PyTorch-exported MLP 784-512-512-10 trains 20 AdamW
# steps on 1 and 4 ranks (losses within 1e-5 relative), and matches PyTorch
# itself from the same weights and data (losses and final weights, 1e-4).
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/mlp.py" --out . --sizes 784,512,512,10 --batch 32 --samples 2048 --seed 3
for n in 1 4; do
  loomc model.onnx --cluster cpu:$n --global-batch 64 --loss cross_entropy \
    --optimizer adamw --lr 1e-3 --verify-plan -o p$n.loomplan --summary-json s$n.json --quiet
done
loom_run p1.loomplan --data x=x.npy --data target=target.npy --steps 20 \
  --metrics m1.jsonl --export-onnx t1.onnx --quiet
loom_run_np 4 p4.loomplan --data x=x.npy --data target=target.npy --steps 20 \
  --metrics m4.jsonl --export-onnx t4.onnx --quiet
$PY "$MODELS/torch_train.py" --model model.onnx --data x=x.npy --data target=target.npy \
  --global-batch 64 --steps 20 --optimizer adamw --lr 1e-3 --loss cross_entropy \
  --losses-out ref.json --weights-out ref.npz

$PY "$MODELS/compare.py" --metrics m4.jsonl --metrics2 m1.jsonl --rtol 1e-5
$PY "$MODELS/compare.py" --metrics m1.jsonl --reference-losses ref.json --rtol 1e-4
$PY "$MODELS/compare.py" --metrics m4.jsonl --reference-losses ref.json --rtol 1e-4
$PY "$MODELS/compare.py" --onnx t1.onnx --reference-weights ref.npz --rtol 1e-4 --atol 1e-5
$PY "$MODELS/compare.py" --onnx t4.onnx --reference-weights ref.npz --rtol 1e-4 --atol 1e-5
# The loss must actually fall, and the summary must describe 4-way DP.
$PY - <<'PY'
import json
losses = [json.loads(l)["loss"] for l in open("m4.jsonl")]
assert losses[-1] < 0.6 * losses[0], losses
s = json.load(open("s4.json"))
assert s["mesh"] == {"dp": 4, "tp": 1, "pp": 1}, s["mesh"]
assert s["world_size"] == 4 and s["num_parameters"] == 669706, s
print("ok: loss %.4f -> %.4f, summary mesh %s" % (losses[0], losses[-1], s["mesh"]))
PY
