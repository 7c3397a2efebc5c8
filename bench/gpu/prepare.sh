#!/usr/bin/env bash
# Prepares the one-shot GPU check, ON THIS (non-GPU) MACHINE: the lent GPU
# machine has no MLIR (so no loomc), no protobuf/ONNX/OpenBLAS/MPI
# development files and no network, so everything it needs is made here and
# carried as one tarball:
#   bin/loom-run, bin/LoomCudaTests   built with -DLOOM_ENABLE_CUDA=ON, sm_90
#   lib/                               their shared libraries except glibc and
#                                      the CUDA libraries (libcublasLt,
#                                      libnccl are found on the GPU machine)
#   libstdcxx/                         GCC 12's libstdc++ (used only if the
#                                      GPU machine's is older)
#   mlp/                               an MLP 784-512-512-10 as ONNX, data, and
#                                      its 1-rank AdamW plan compiled by loomc
#
#   usage: bench/gpu/prepare.sh [BUILD_DIR]     (default build-cuda)
# then, with the device tool (carry names the bundle; it is git-ignored):
#   run(command="bash bench/gpu/run.sh build-cuda/gpu-bundle.tar.xz",
#       carry=["build-cuda/gpu-bundle.tar.xz"], timeout_s=420)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build-cuda}" && pwd)
PY=/usr/bin/python3 # Debian's, with torch and onnx (docs/ENVIRONMENT)
STAGE=$BUILD/gpu-bundle
rm -rf "$STAGE" && mkdir -p "$STAGE"/{bin,lib,libstdcxx,mlp}

grep -q 'LOOM_HAVE_CUDA:INTERNAL=ON\|Loom CUDA backend: ON' "$BUILD/CMakeCache.txt" 2>/dev/null ||
  cmake -S "$SRC" -B "$BUILD" -DLOOM_ENABLE_CUDA=ON >/dev/null
cmake --build "$BUILD" --target loom-run LoomCudaTests loomc

cp "$BUILD/bin/loom-run" "$BUILD/bin/LoomCudaTests" "$STAGE/bin/"
# Shared libraries: everything ldd resolves except glibc's own and CUDA's.
for exe in "$STAGE"/bin/*; do ldd "$exe"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
      libcublas*|libnccl*|libcudart*|libcuda.so*) ;;
      libstdc++*) cp -L "$lib" "$STAGE/libstdcxx/" ;;
      *) cp -L "$lib" "$STAGE/lib/" ;;
    esac
  done

# The model, data and plan (same MLP as test/e2e/mlp_adamw_parity.sh).
cd "$STAGE/mlp"
$PY "$SRC/test/models/mlp.py" --out . --sizes 784,512,512,10 --batch 32 \
  --samples 2048 --seed 3 >/dev/null
"$BUILD/bin/loomc" model.onnx --cluster cpu:1 --global-batch 64 \
  --loss cross_entropy --optimizer adamw --lr 1e-3 -o mlp.loomplan --quiet
cp "$SRC/test/models/compare.py" .

cd "$BUILD"
tar -cJf gpu-bundle.tar.xz gpu-bundle
echo "bundle: $BUILD/gpu-bundle.tar.xz ($(du -h gpu-bundle.tar.xz | cut -f1))"
