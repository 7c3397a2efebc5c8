#!/usr/bin/env bash
# Real models from Hugging Face and torchvision, exported by torch.onnx:
# forward parity with ONNX Runtime, and training parity with PyTorch itself
# (same weights from the ONNX file, same data order, AdamW defaults).
#
# Every comparison is well-posed: the reference is run again on inputs
# perturbed by 1e-7 relative (perturb.py) and on 2 threads, and compare.py
# fails as ILL-POSED unless that moves the reference by at most a tenth of
# the tolerance. The figures quoted below are those measurements.
source "$(dirname "$0")/lib.sh"

# The exported graphs have a static batch: forward passes take one batch.
first_batch() { $PY -c "import numpy as np; np.save('$2', np.load('$1')[:$3])"; }

# forward_parity INPUT BATCH RTOL ATOL: loom-run --forward against ONNX Runtime,
# ONNX Runtime's sensitivity measured on the perturbed model and input.
forward_parity() {
  local in=$1 b=$2 rtol=$3 atol=$4
  first_batch $in.npy fwd.npy $b
  first_batch pert/$in.npy pert/fwd.npy $b
  loom_run --forward model.onnx --input $in=fwd.npy --output-dir loom-fwd
  $PY "$MODELS/ort_forward.py" --model model.onnx --input $in=fwd.npy --output-dir ort-fwd
  $PY "$MODELS/ort_forward.py" --model pert/model.onnx --input $in=pert/fwd.npy \
    --output-dir pert/ort-fwd
  $PY "$MODELS/compare_outputs.py" --a loom-fwd --b ort-fwd --rtol $rtol --atol $atol \
    --sensitivity pert/ort-fwd
}

# GPT-2, BERT, LLaMA: 10 AdamW steps. Losses within 1e-4 of PyTorch (the
# reference moves by <= 2e-7 under perturbation, <= 1e-7 on 2 threads).
# Final weights: the update of each tensor within 1e-3 in relative L2
# (compare.py --initial). Element-wise bounds on AdamW weights are ill-posed:
# perturbing the reference's inputs by 1e-7 moves single weights by up to
# 1.2 times the old 1e-4 + 5e-5 bound (LLaMA's lm_head), because AdamW turns
# a gradient that nearly cancels into a step of +-lr on the sign of rounding
# noise. In L2 the reference moves by <= 3.2e-5 (LLaMA's lm_head), 1.9e-5
# (GPT-2 layer-norm scales), 1.6e-5 (BERT), so 1e-3 keeps a factor 30.
# Attention key biases have a zero true gradient (softmax ignores a shift
# shared by all keys), so their update is rounding noise in both programs:
# they must stay put (update RMS <= 1e-4; measured 2.7e-6 at most) and are
# left out of the relative comparison.
declare -A ZERO_GRAD=(
  [gpt2]="transformer.h.*.attn.c_attn.bias[128:256]"
  [bert]="bert.encoder.layer.*.attention.self.key.bias"
  [llama]="")
for m in gpt2 bert llama; do
  mkdir -p $m && cd $m
  $PY "$MODELS/hf_models.py" --model $m --out . --batch 8 > /dev/null
  in=$($PY -c "import json; print(json.load(open('config.json'))['input'])")
  perturbed pert model.onnx config.json $in.npy target.npy
  loomc model.onnx --cluster cpu:1 --global-batch 8 --optimizer adamw --lr 1e-3 \
    --verify-plan -o p1.loomplan --quiet
  loom_run p1.loomplan --data $in=$in.npy --data target=target.npy --steps 10 \
    --metrics m1.jsonl --export-onnx trained.onnx --quiet
  opts=(--global-batch 8 --steps 10 --optimizer adamw --lr 1e-3)
  hf_ref . ref "${opts[@]}" --threads 1
  hf_ref pert pert/ref "${opts[@]}" --threads 1
  hf_ref . threads2 "${opts[@]}" --threads 2
  zero=()
  [ -z "${ZERO_GRAD[$m]}" ] || zero=(--zero-gradient "${ZERO_GRAD[$m]}")
  echo "$m:"
  $PY "$MODELS/compare.py" --metrics m1.jsonl --reference-losses ref.json --rtol 1e-4 \
    --sensitivity pert/ref.json --sensitivity threads2.json
  $PY "$MODELS/compare.py" --onnx trained.onnx --reference-weights ref.npz --initial model.onnx \
    --rtol 1e-3 "${zero[@]}" --sensitivity pert/ref.npz@pert/model.onnx --sensitivity threads2.npz
  # Forward logits within 1e-4 (ONNX Runtime moves by <= 0.03 of that).
  forward_parity $in 8 1e-4 1e-4
  cd ..
done

# Data parallelism on real models: GPT-2, BERT (its constant token type ids
# split with the batch) and LLaMA on 2 ranks match 1 rank within 1e-5 (1 rank
# on perturbed inputs moves by <= 2e-7, on 2 threads by 0).
for m in gpt2 bert llama; do
  cd $m
  loomc model.onnx --cluster cpu:2 --global-batch 8 --optimizer adamw --lr 1e-3 -o p2.loomplan \
    --summary-json s2.json --quiet
  run=(--data target=target.npy --steps 10 --quiet)
  loom_run_np 2 p2.loomplan --data input_ids=input_ids.npy "${run[@]}" --metrics m2.jsonl
  memory_as_planned m2.jsonl s2.json
  loom_run p1.loomplan --model pert/model.onnx --data input_ids=input_ids.npy "${run[@]}" \
    --metrics pert/m1.jsonl
  LOOM_NUM_THREADS=2 loom_run p1.loomplan --data input_ids=input_ids.npy "${run[@]}" \
    --metrics m1-threads2.jsonl
  $PY "$MODELS/compare.py" --metrics m2.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
    --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl
  cd ..
done

# ResNet-18 in training mode (BatchNormalization with batch statistics), at
# batch 16 on 64x64 images of N(0,1) noise. ReLU and max-pool make a ResNet's
# gradient jump where an input crosses zero or a tie, so rounding differences
# grow from step to step; how fast depends on the data and the step size.
# Measured with PyTorch alone, 1e-7-perturbed inputs, loss at step 5: the
# upscaled digits at batch 8 on 32x32 with AdamW lr 1e-3 (the old test) 1e-1;
# digits at batch 16 on 64x64, 6e-4 even at SGD lr 1e-4 (a digit's flat
# background puts many ReLU and max-pool inputs at near-ties); noise images
# with AdamW lr 1e-3 3e-2, with lr 3e-5 5e-7. The last is the test.
#
# One kink flip matters more than 1e-7 shows: float32 forward passes of this
# net differ by ~1e-6 relative between implementations (Loom, ONNX Runtime and
# PyTorch each vs PyTorch in float64), and a pre-activation that close to zero
# flips its ReLU in one of them: one flipped element moves the gradient of every
# earlier layer by ~3e-3 in relative L2. So each ResNet reference is also re-run
# on 1e-6-perturbed inputs (pert6/), the size of that discrepancy.
mkdir -p resnet && cd resnet
$PY "$MODELS/hf_models.py" --model resnet18 --out . --batch 16 --image-size 64 \
  --image-data noise > /dev/null
perturbed pert model.onnx config.json images.npy target.npy
$PY "$MODELS/perturb.py" --rel 1e-6 --out pert6 model.onnx config.json images.npy target.npy > /dev/null
# Forward logits within 1e-4 (rtol 1e-3 of the logits' scale).
forward_parity images 16 1e-3 1e-4
# The gradient of every trainable parameter, recovered from one SGD step at
# lr 10 (a large step keeps the float32 rounding of w - lr*g far below the
# update). BatchNorm's running statistics (no gradients) are left out here:
# syncbn_parity.sh checks them against PyTorch's buffers.
loomc model.onnx --cluster cpu:1 --global-batch 16 --optimizer sgd --lr 10 -o sgd.loomplan --quiet
loom_run sgd.loomplan --data images=images.npy --data target=target.npy --steps 1 \
  --export-onnx sgd1.onnx --quiet
opts=(--global-batch 16 --steps 1 --optimizer sgd --lr 10)
stats=(--exclude '*running_mean' --exclude '*running_var' --exclude '*num_batches_tracked')
# 1. Exact, on Loom's branch: PyTorch takes at every ReLU and MaxPool the branch
# Loom's forward took (hf_train.py --kinks-from, from the Relu and MaxPool
# inputs of Loom's forward pass of the batch). Each tensor within 1e-4 in
# relative L2; the reference moves by <= 4.2e-6 on 1e-7-perturbed inputs.
$PY "$MODELS/onnx_taps.py" --model model.onnx --op Relu --op MaxPool --out taps.onnx > /dev/null
first_batch images.npy batch1.npy 16
loom_run --forward taps.onnx --input images=batch1.npy --output-dir loom-kinks
hf_ref . sgd-branch "${opts[@]}" --threads 1 --kinks-from loom-kinks
hf_ref pert pert/sgd-branch "${opts[@]}" --threads 1 --kinks-from loom-kinks
hf_ref . sgd-branch-threads2 "${opts[@]}" --threads 2 --kinks-from loom-kinks
$PY "$MODELS/compare.py" --onnx sgd1.onnx --reference-weights sgd-branch.npz --initial model.onnx \
  --rtol 1e-4 "${stats[@]}" --sensitivity pert/sgd-branch.npz@pert/model.onnx \
  --sensitivity sgd-branch-threads2.npz
# 2. Against PyTorch's own branches: within 1e-1. The reference moves by <= 4e-6
# on 1e-7-perturbed inputs but by up to 6e-3 on 1e-6-perturbed ones (a ReLU
# flip, above), and Loom's forward flips one or two such elements against
# PyTorch's (measured 3.4e-3); 1e-1 is the bound both measurements justify.
hf_ref . sgd-ref "${opts[@]}" --threads 1
hf_ref pert pert/sgd-ref "${opts[@]}" --threads 1
hf_ref pert6 pert6/sgd-ref "${opts[@]}" --threads 1
hf_ref . sgd-threads2 "${opts[@]}" --threads 2
$PY "$MODELS/compare.py" --onnx sgd1.onnx --reference-weights sgd-ref.npz --initial model.onnx \
  --rtol 1e-1 "${stats[@]}" --sensitivity pert/sgd-ref.npz@pert/model.onnx \
  --sensitivity pert6/sgd-ref.npz@pert6/model.onnx --sensitivity sgd-threads2.npz
# Five AdamW steps, losses within 1e-4 (1e-7-perturbed: <= 5e-7). On
# 1e-6-perturbed inputs PyTorch's own losses move by 3e-5 to 6.5e-5 (three
# seeds; one ReLU flip, above): printed below, not a tenth of the tolerance
# (at lr 1e-5 it is still 2e-5, and the updates then barely move the losses).
# On some machines (an AMD EPYC with Debian's torch 1.13) even the 1e-7
# perturbation moves PyTorch's losses by 5.5e-5 at step 5: there compare.py
# finds the check ill-posed (exit 3) and it is reported as not checked; the
# gradients above and the dp / tp runs against one rank still are.
loomc model.onnx --cluster cpu:1 --global-batch 16 --optimizer adamw --lr 3e-5 -o adamw.loomplan --quiet
loom_run adamw.loomplan --data images=images.npy --data target=target.npy --steps 5 \
  --metrics m.jsonl --quiet
opts=(--global-batch 16 --steps 5 --optimizer adamw --lr 3e-5)
hf_ref . ref "${opts[@]}" --threads 1
hf_ref pert pert/ref "${opts[@]}" --threads 1
hf_ref pert6 pert6/ref "${opts[@]}" --threads 1
hf_ref . threads2 "${opts[@]}" --threads 2
rc=0
$PY "$MODELS/compare.py" --metrics m.jsonl --reference-losses ref.json --rtol 1e-4 \
  --sensitivity pert/ref.json --sensitivity threads2.json || rc=$?
if [ "$rc" = 3 ]; then
  echo "not checked: ResNet-18's AdamW losses, ill-posed on this machine (above)"
elif [ "$rc" != 0 ]; then
  fail "ResNet-18's AdamW losses against PyTorch (compare.py exit $rc)"
fi
# The comparison has power: without its updates the run's losses differ by more
# than 5x the tolerance from step 3 on.
hf_ref . still --global-batch 16 --steps 5 --optimizer adamw --lr 0 --threads 1
$PY - <<'PY'
import json
ref, still, p6 = (json.load(open(f)) for f in ("ref.json", "still.json", "pert6/ref.json"))
rel = lambda a, b: [abs(x - y) / abs(y) for x, y in zip(a, b)]
moved, kink = rel(ref, still), max(rel(p6, ref))
assert min(moved[2:]) > 5e-4, ("the updates barely change the losses", moved)
print("ok: the updates move the losses by %s relative; 1e-6-perturbed PyTorch by %.2g (%.2g of "
      "the tolerance, not checked)" % (", ".join("%.1e" % v for v in moved), kink, kink / 1e-4))
PY
