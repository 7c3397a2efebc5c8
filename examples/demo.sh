#!/usr/bin/env bash
# The Loom demo: train a classifier of handwritten digits (scikit-learn's
# bundled 8x8 digits) with data parallelism on 4 CPU ranks, then check it on
# held-out images with `loom-run --forward`.
#   usage: examples/demo.sh [BUILD_DIR] [WORK_DIR]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
WORK=${2:-$BUILD/demo}
BIN=$BUILD/bin
PY=/usr/bin/python3
mkdir -p "$WORK" && cd "$WORK"

echo "== 1. the model and data: a PyTorch MLP 64-128-128-10 exported to ONNX, 1797 digits"
$PY "$SRC/test/models/digits.py" --out . >/dev/null
$PY - <<'PY'
import numpy as np
x, y = np.load("x.npy"), np.load("target.npy")
np.save("train_x.npy", x[:1500]); np.save("train_y.npy", y[:1500])
np.save("test_x.npy", x[1500:]); np.save("test_y.npy", y[1500:])
print("   1500 training images, 297 held out")
PY

echo "== 2. loomc plans the training step for 4 CPU ranks"
"$BIN/loomc" model.onnx --cluster cpu:4 --global-batch 64 --loss cross_entropy \
  --optimizer adamw --lr 2e-3 -o demo.loomplan

echo "== 3. loom-run trains it under mpirun -np 4"
mpirun --allow-run-as-root --oversubscribe -np 4 "$BIN/loom-run" demo.loomplan \
  --data x=train_x.npy --data target=train_y.npy --steps 400 --log-every 40 \
  --metrics metrics.jsonl --export-onnx trained.onnx

echo "== 4. the trained model, exported to ONNX, classifies held-out digits"
"$BIN/loom-run" --forward trained.onnx --input x=test_x.npy --output-dir eval
$PY - <<'PY'
import numpy as np
logits, y = np.load("eval/logits.npy"), np.load("test_y.npy")
print("   held-out accuracy: %.1f%% (%d images)" % (100 * (logits.argmax(1) == y).mean(), len(y)))
PY
echo "== files are in $WORK (metrics.jsonl, trained.onnx)"
