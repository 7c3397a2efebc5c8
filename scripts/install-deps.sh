#!/usr/bin/env bash
# Installs every package Loom needs to build and test, on Debian 12, as root.
# Idempotent: does nothing when all packages are present.
set -euo pipefail

PKGS=(
  cmake ninja-build g++ make pkg-config
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  libopenmpi-dev openmpi-bin
  libopenblas-dev
  coinor-libcbc-dev
  libgtest-dev
  python3-numpy python3-torch python3-onnx python3-sklearn python3-torchvision
  python3-venv
)

# `--fuzz` (make fuzz): clang with libFuzzer, the sanitizer runtimes and OpenMP.
if [ "${1:-}" = --fuzz ]; then
  PKGS+=(clang-22 libclang-rt-22-dev libomp-22-dev)
fi
# `--slurm` (test/e2e/slurm.sh): Slurm's daemons and clients, and munge.
if [ "${1:-}" = --slurm ]; then
  PKGS+=(slurm-wlm munge)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

here=$(cd "$(dirname "$0")" && pwd)
if [ ${#missing[@]} -eq 0 ]; then
  # The reference venv (onnxruntime, transformers) on top of Debian's Python.
  exec bash "$here/install-python-env.sh"
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root (or: sudo $0)" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

bash "$here/install-python-env.sh"
