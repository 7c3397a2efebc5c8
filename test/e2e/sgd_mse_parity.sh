#!/usr/bin/env bash
# SGD with momentum and weight decay on a regression MLP (tanh, mse), on 1 and
# 2 ranks, against PyTorch.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/mlp.py" --out . --sizes 16,32,4 --activation tanh --task regress \
  --samples 256 --seed 5
for n in 1 2; do
  loomc model.onnx --cluster cpu:$n --global-batch 32 --loss mse --optimizer sgd \
    --lr 0.05 --momentum 0.9 --weight-decay 1e-3 --verify-plan -o p$n.loomplan --quiet
done
loom_run p1.loomplan --data x=x.npy --data target=target.npy --steps 30 \
  --metrics m1.jsonl --export-onnx t1.onnx --quiet
loom_run_np 2 p2.loomplan --data x=x.npy --data target=target.npy --steps 30 \
  --metrics m2.jsonl --quiet
$PY "$MODELS/torch_train.py" --model model.onnx --data x=x.npy --data target=target.npy \
  --global-batch 32 --steps 30 --optimizer sgd --lr 0.05 --momentum 0.9 \
  --weight-decay 1e-3 --loss mse --losses-out ref.json --weights-out ref.npz
$PY "$MODELS/compare.py" --metrics m2.jsonl --metrics2 m1.jsonl --rtol 1e-5
$PY "$MODELS/compare.py" --metrics m1.jsonl --reference-losses ref.json --rtol 1e-4
$PY "$MODELS/compare.py" --onnx t1.onnx --reference-weights ref.npz --rtol 1e-4 --atol 1e-5
