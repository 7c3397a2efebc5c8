#!/usr/bin/env bash
# Real models from Hugging Face and torchvision, exported by torch.onnx:
# forward parity with ONNX Runtime, and training parity with PyTorch itself
# (same weights from the ONNX file, same data order, AdamW defaults).
source "$(dirname "$0")/lib.sh"

# The exported graphs have a static batch of 8: forward passes take 8 samples.
first_batch() { $PY -c "import numpy as np; np.save('$2', np.load('$1')[:8])"; }

# GPT-2, BERT, LLaMA: 10 AdamW steps, losses within 1e-4 of PyTorch, final
# weights within 1e-4 relative (5e-5 absolute: attention key biases have a
# zero true gradient and follow rounding noise under AdamW).
for m in gpt2 bert llama; do
  mkdir -p $m && cd $m
  $PY "$MODELS/hf_models.py" --model $m --out . --batch 8 > /dev/null
  in=$($PY -c "import json; print(json.load(open('config.json'))['input'])")
  loomc model.onnx --cluster cpu:1 --global-batch 8 --optimizer adamw --lr 1e-3 \
    --verify-plan -o p1.loomplan --quiet
  loom_run p1.loomplan --data $in=$in.npy --data target=target.npy --steps 10 \
    --metrics m1.jsonl --export-onnx trained.onnx --quiet
  $PY "$MODELS/hf_train.py" --model-dir . --global-batch 8 --steps 10 --optimizer adamw \
    --lr 1e-3 --losses-out ref.json --weights-out ref.npz --threads 1 > /dev/null
  echo "$m:"
  $PY "$MODELS/compare.py" --metrics m1.jsonl --reference-losses ref.json --rtol 1e-4
  $PY "$MODELS/compare.py" --onnx trained.onnx --reference-weights ref.npz --rtol 1e-4 --atol 5e-5
  first_batch $in.npy fwd.npy
  loom_run --forward model.onnx --input $in=fwd.npy --output-dir loom-fwd
  $PY "$MODELS/ort_forward.py" --model model.onnx --input $in=fwd.npy --output-dir ort-fwd
  $PY "$MODELS/compare_outputs.py" --a loom-fwd --b ort-fwd --rtol 1e-4 --atol 1e-4
  cd ..
done

# Data parallelism on real models: GPT-2 and LLaMA on 2 ranks match 1 rank.
for m in gpt2 llama; do
  cd $m
  loomc model.onnx --cluster cpu:2 --global-batch 8 --optimizer adamw --lr 1e-3 -o p2.loomplan --quiet
  loom_run_np 2 p2.loomplan --data input_ids=input_ids.npy --data target=target.npy --steps 10 \
    --metrics m2.jsonl --quiet
  $PY "$MODELS/compare.py" --metrics m2.jsonl --metrics2 m1.jsonl --rtol 1e-5
  cd ..
done

# ResNet-18 in training mode (BatchNormalization with batch statistics).
# Forward parity with ONNX Runtime; one gradient (the weights after one SGD
# step) against PyTorch; the first two AdamW losses within 1e-4. Later steps
# are not compared: at batch 8 on 32x32 images the trajectory is chaotic —
# PyTorch on 1 thread and on 2 threads already differ by percents after 4
# steps (docs/frontend.md).
mkdir -p resnet && cd resnet
$PY "$MODELS/hf_models.py" --model resnet18 --out . --batch 8 > /dev/null
first_batch images.npy fwd.npy
loom_run --forward model.onnx --input images=fwd.npy --output-dir loom-fwd
$PY "$MODELS/ort_forward.py" --model model.onnx --input images=fwd.npy --output-dir ort-fwd
$PY "$MODELS/compare_outputs.py" --a loom-fwd --b ort-fwd --rtol 1e-3 --atol 1e-4
loomc model.onnx --cluster cpu:1 --global-batch 8 --optimizer sgd --lr 0.01 -o sgd.loomplan --quiet
loom_run sgd.loomplan --data images=images.npy --data target=target.npy --steps 1 \
  --export-onnx sgd1.onnx --quiet
$PY "$MODELS/hf_train.py" --model-dir . --global-batch 8 --steps 1 --optimizer sgd --lr 0.01 \
  --losses-out sgd-ref.json --weights-out sgd-ref.npz --threads 1 > /dev/null
$PY - <<'PY'
# The gradient of every trainable parameter, recovered from one SGD step.
import numpy as np, onnx
from onnx import numpy_helper
init = lambda p: {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(p).graph.initializer}
w0, loom, ref = init("model.onnx"), init("sgd1.onnx"), np.load("sgd-ref.npz")
worst = 0.0
for k in ref.files:
    if "running" in k or "num_batches" in k or k not in loom:
        continue
    g_loom, g_ref = (w0[k] - loom[k]) / 0.01, (w0[k] - ref[k].astype(np.float64)) / 0.01
    err = np.abs(g_loom - g_ref).max() / (np.abs(g_ref).max() + 1e-12)
    worst = max(worst, err)
    assert err < 2e-3, (k, err)
print("OK resnet18 gradients after one step: worst error %.2g of each tensor's largest entry" % worst)
PY
loomc model.onnx --cluster cpu:1 --global-batch 8 --optimizer adamw --lr 1e-3 -o adamw.loomplan --quiet
loom_run adamw.loomplan --data images=images.npy --data target=target.npy --steps 2 \
  --metrics m.jsonl --quiet
$PY "$MODELS/hf_train.py" --model-dir . --global-batch 8 --steps 2 --optimizer adamw --lr 1e-3 \
  --losses-out ref.json --threads 1 > /dev/null
$PY "$MODELS/compare.py" --metrics m.jsonl --reference-losses ref.json --rtol 1e-4
