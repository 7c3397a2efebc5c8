#!/usr/bin/env bash
# The Loom demo: a small GPT-2 (Hugging Face transformers, random init) learns
# the text of the GNU GPL character by character, with data parallelism on 4
# CPU ranks; then the trained model, exported back to ONNX, is evaluated on
# held-out text with `loom-run --forward`.
#   usage: examples/demo.sh [BUILD_DIR] [WORK_DIR]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
WORK=${2:-$BUILD/demo}
BIN=$BUILD/bin
PY=/usr/bin/python3
mkdir -p "$WORK" && cd "$WORK"

echo "== 1. the model and data: GPT-2 (2 layers, d=128, 4 heads, 64 characters of"
echo "      context) exported from PyTorch to ONNX; the GPL-3 text as characters"
$PY "$SRC/test/models/hf_models.py" --model gpt2 --out . --batch 8 >/dev/null
$PY - <<'PY'
import numpy as np
x, y = np.load("input_ids.npy"), np.load("target.npy")
n = len(x) - 48  # the last 48 windows are held out
np.save("train_x.npy", x[:n]); np.save("train_y.npy", y[:n])
np.save("test_x.npy", x[n:n + 8]); np.save("test_y.npy", y[n:n + 8])
print("   %d training windows of 64 characters, 8 held out for evaluation" % n)
PY

echo "== 2. loomc plans the training step for 4 CPU ranks"
"$BIN/loomc" model.onnx --cluster cpu:4 --global-batch 32 --loss cross_entropy \
  --optimizer adamw --lr 1e-3 -o demo.loomplan

echo "== 3. loom-run trains it under mpirun -np 4"
mpirun --allow-run-as-root --oversubscribe -np 4 "$BIN/loom-run" demo.loomplan \
  --data input_ids=train_x.npy --data target=train_y.npy --steps 200 --log-every 20 \
  --metrics metrics.jsonl --export-onnx trained.onnx

echo "== 4. the trained model, exported to ONNX, on held-out text"
"$BIN/loom-run" --forward model.onnx --input input_ids=test_x.npy --output-dir eval-before
"$BIN/loom-run" --forward trained.onnx --input input_ids=test_x.npy --output-dir eval-after
$PY - <<'PY'
import numpy as np
y = np.load("test_y.npy")
def loss(d):
    z = np.load(d + "/logits.npy").astype(np.float64)
    z -= z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, y[..., None], -1).mean()
before, after = loss("eval-before"), loss("eval-after")
print("   held-out cross-entropy: %.3f before training, %.3f after (%.2f bits/char)"
      % (before, after, after / np.log(2)))
PY
echo "== files are in $WORK (metrics.jsonl, trained.onnx)"
