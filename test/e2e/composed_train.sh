#!/usr/bin/env bash
# A classifier built from the ops loom composes from other ops (Elu, PRelu,
# Softplus, Celu, LeakyRelu, Sum, ReduceL2, HardSigmoid, Softsign, Sinh, Mean,
# a dilated MaxPool, Einsum with a diagonal, ReduceLogSumExp, ReduceMin,
# HardSwish, LogSoftmax; test/models/composed_train.py) trains 10 AdamW steps on
# 1 and 2 ranks (losses within 1e-5 relative), and matches PyTorch's own
# functions (F.elu, torch.einsum, F.max_pool2d, torch.amin, ...) from the same
# weights and data (losses 1e-4, final weights 1e-4 in relative L2): the
# gradients of the compositions are PyTorch's. Each reference is re-run on
# 1e-7-perturbed inputs and on 2 threads (compare.py --sensitivity).
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/composed_train.py" --out . --samples 64
for n in 1 2; do
  loomc model.onnx --cluster cpu:$n --global-batch 8 --loss cross_entropy \
    --optimizer adamw --lr 1e-2 --verify-plan -o p$n.loomplan --quiet
done
loom_run p1.loomplan --data x=x.npy --data target=target.npy --steps 10 \
  --metrics m1.jsonl --export-onnx t1.onnx --quiet
loom_run_np 2 p2.loomplan --data x=x.npy --data target=target.npy --steps 10 \
  --metrics m2.jsonl --export-onnx t2.onnx --quiet
perturbed pert model.onnx x.npy target.npy
opts=(--global-batch 8 --steps 10 --optimizer adamw --lr 1e-2 --loss cross_entropy)
torch_ref . ref "${opts[@]}" --threads 1
torch_ref pert pert/ref "${opts[@]}" --threads 1
torch_ref . threads2 "${opts[@]}" --threads 2
loom_run p1.loomplan --model pert/model.onnx --data x=pert/x.npy --data target=pert/target.npy \
  --steps 10 --metrics pert/m1.jsonl --quiet
LOOM_NUM_THREADS=2 loom_run p1.loomplan --data x=x.npy --data target=target.npy --steps 10 \
  --metrics m1-threads2.jsonl --quiet

$PY "$MODELS/compare.py" --metrics m2.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
  --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl
for m in m1 m2; do
  $PY "$MODELS/compare.py" --metrics $m.jsonl --reference-losses ref.json --rtol 1e-4 \
    --sensitivity pert/ref.json --sensitivity threads2.json
done
for t in t1 t2; do
  $PY "$MODELS/compare.py" --onnx $t.onnx --reference-weights ref.npz --initial model.onnx \
    --rtol 1e-4 --sensitivity pert/ref.npz@pert/model.onnx --sensitivity threads2.npz
done
