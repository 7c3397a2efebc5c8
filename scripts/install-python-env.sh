#!/usr/bin/env bash
# Creates the Python environment for the Hugging Face / ONNX Runtime reference
# checks (test/models/hf_*.py, ort_forward.py), on Debian 12, as root.
#
#   ${LOOM_VENV:-/opt/loom-venv}: a venv over Debian's /usr/bin/python3 with
#   --system-site-packages, so Debian's torch 1.13, onnx 1.12, numpy 1.24,
#   protobuf 4.21 and torchvision 0.14 are the ones used, plus the exact
#   PyPI versions pinned below.
#
# Idempotent: when every pin is already installed it checks versions locally
# (no network) and exits in well under a second. Prints one line.
#
# Why these versions (see test/models/README.md):
#   transformers 4.49.0 — the newest release that imports and exports with
#     torch 1.13 (4.50 needs torch.distributed.tensor, i.e. torch >= 2); it has
#     LlamaForCausalLM with num_key_value_heads (GQA; since 4.31) and the
#     eager attention path that torch 1.13's ONNX exporter can trace.
#   onnxruntime 1.26.0 — the newest release whose requirements are met by
#     Debian's numpy 1.24 and protobuf 4.21 (1.27 requires protobuf >= 4.25.8,
#     which would shadow Debian's and break its onnx 1.12); runs opset 17,
#     including BatchNormalization with training_mode=1.
#   the rest: the dependency versions pip resolves for those two, pinned so
#     that a rebuilt venv is the same venv.
set -euo pipefail

VENV="${LOOM_VENV:-/opt/loom-venv}"
PY=/usr/bin/python3

PINS=(
  transformers==4.49.0
  tokenizers==0.21.4
  huggingface_hub==0.36.2
  safetensors==0.8.0
  hf-xet==1.8.0
  regex==2026.11.19
  tqdm==4.70.1
  filelock==4.3.1
  fsspec==2026.9.0
  onnxruntime==1.26.0
  flatbuffers==25.12.19
)
# Debian packages this environment needs beyond scripts/install-deps.sh's list.
DEBS=(python3-venv python3-torchvision python3-torch python3-onnx python3-numpy)

# Fast path: the venv exists and every pin (and the Debian modules) are there.
check_py='
import sys
from importlib import metadata
bad = []
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        have = None
    if have != want:
        bad.append("%s (%s)" % (pin, have or "missing"))
for name in ("torch", "torchvision", "onnx", "numpy"):  # from Debian: version only, no import
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        bad.append("%s (missing)" % name)
if bad:
    print(", ".join(bad))
    sys.exit(1)
'
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$check_py" "${PINS[@]}" >/dev/null 2>&1; then
  echo "install-python-env: $VENV up to date (transformers 4.49.0, onnxruntime 1.26.0)"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-python-env: $VENV missing or out of date; run as root (or: sudo $0)" >&2
  exit 1
fi

LOG="$(mktemp /tmp/install-python-env.XXXXXX.log)"
fail() {
  echo "install-python-env: error: $1 (log: $LOG)" >&2
  tail -n 20 "$LOG" >&2 || true
  exit 1
}

missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    >>"$LOG" 2>&1 || fail "apt-get install ${missing[*]} failed"
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV" >>"$LOG" 2>&1 || fail "cannot create venv $VENV"
fi
# PIP_* from the caller's environment (e.g. a user config) must not redirect the install.
env -u PIP_TARGET -u PIP_PREFIX -u PIP_USER PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$VENV/bin/python" -m pip install --no-input "${PINS[@]}" >>"$LOG" 2>&1 \
  || fail "pip install failed"

why="$("$VENV/bin/python" -c "$check_py" "${PINS[@]}" 2>&1)" || fail "after install: $why"
# numpy/torch must still be Debian's: a wheel pulling in its own numpy would break torch 1.13.
np_path="$("$VENV/bin/python" -c 'import numpy; print(numpy.__file__)')"
case "$np_path" in
  /usr/lib/python3/dist-packages/*) ;;
  *) fail "numpy resolves to $np_path, not Debian's python3-numpy" ;;
esac
rm -f "$LOG"
echo "install-python-env: installed $VENV (transformers 4.49.0, onnxruntime 1.26.0)"
