#!/usr/bin/env bash
# Prepares the one-shot GPU check, ON A BUILD MACHINE WITH MLIR: the GPU
# machine has no MLIR (so no loomc), no protobuf/ONNX/OpenBLAS/MPI
# development files and no network, so everything it needs is made on the
# build machine and
# carried as one tarball:
#   bin/loom-run, bin/LoomCudaTests   built with -DLOOM_ENABLE_CUDA=ON, sm_90
#   lib/                               their shared libraries except glibc and
#                                      the CUDA libraries (libcublasLt,
#                                      libnccl are found on the GPU machine)
#   libstdcxx/                         GCC 12's libstdc++ (used only if the
#                                      GPU machine's is older)
#   mlp/                               an MLP 784-512-512-10 as ONNX, data, and
#                                      its 1-rank AdamW plan compiled by loomc
#   gpt2s/                             a small GPT-2 (2 layers, d=128, s=64;
#                                      test/models/hf_models.py), its data,
#                                      fp32 and bf16 plans, and fp32 plans for
#                                      2 ranks (tp=2) and 4 (dp=4 ZeRO-3) that
#                                      run with the ranks sharing the one GPU
#   mpi-version                        the Open MPI loom-run was built with
#   gpt2-124m/                         GPT-2 124M (l=12 h=768 a=12 s=1024
#                                      V=50257) planned without weights
#                                      (loomc --no-weights; loom-run then takes
#                                      --init random:SEED), bf16 and fp32 plans
#                                      for global batch $GPT2_BATCH on one H200,
#                                      and the benchmark scripts
#
#   usage: bench/gpu/prepare.sh [BUILD_DIR]     (default build-cuda)
# then, in the repository root on the GPU machine, with the (git-ignored)
# bundle copied to the same path:
#   bash bench/gpu/run.sh build-cuda/gpu-bundle.tar.xz
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build-cuda}" && pwd)
PY=/usr/bin/python3 # Debian's, with torch and onnx (docs/ENVIRONMENT)
GPT2_BATCH=${GPT2_BATCH:-32}
STAGE=$BUILD/gpu-bundle
rm -rf "$STAGE" && mkdir -p "$STAGE"/{bin,lib,libstdcxx,mlp,gpt2s,gpt2-124m}
LOOMC="$BUILD/bin/loomc"

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
cp "$SRC/test/models/compare.py" "$SRC/test/models/tolerance.py" .
# 1e-7-perturbed copies: the CPU run on them is the sensitivity of each
# cpu-vs-cuda comparison (compare.py --sensitivity).
$PY "$SRC/test/models/perturb.py" --out pert model.onnx x.npy >/dev/null

# A small GPT-2 with stored weights: every GPT-2 op on both backends, fp32 and
# bf16 (attention, embedding gather, slices, transposes, layer norm, GELU).
cd "$STAGE/gpt2s"
$PY "$SRC/test/models/hf_models.py" --model gpt2 --out . --batch 8 --samples 160 >/dev/null
rm -f config.json ops.txt
$PY "$SRC/test/models/perturb.py" --out pert model.onnx >/dev/null
for prec in fp32 bf16; do
  "$LOOMC" model.onnx --cluster cpu:1 --global-batch 8 --loss cross_entropy \
    --optimizer adamw --lr 1e-3 --precision $prec -o $prec.loomplan --quiet
done
# Multi-rank plans of the same model: tensor parallel over 2 ranks, ZeRO-3
# over 4 and 2 pipeline stages (run.sh puts every rank on the one GPU,
# host-staged collectives and transfers).
"$LOOMC" model.onnx --cluster cpu:2 --force tp=2 --global-batch 8 --loss cross_entropy \
  --optimizer adamw --lr 1e-3 -o tp2.loomplan --quiet
"$LOOMC" model.onnx --cluster cpu:4 --force zero=3 --global-batch 8 --loss cross_entropy \
  --optimizer adamw --lr 1e-3 -o zero3.loomplan --quiet
# Two pipeline stages (1F1B, 4 micro-batches): sends and receives between
# the two ranks.
"$LOOMC" model.onnx --cluster cpu:2 --force pp=2,micro=4 --global-batch 8 --loss cross_entropy \
  --optimizer adamw --lr 1e-3 -o pp2.loomplan --quiet
# run.sh needs an mpirun of the same Open MPI there (major.minor).
(mpirun --version 2>/dev/null || true) | head -1 >"$STAGE/mpi-version"

# GPT-2 124M, planned without weights, and the benchmark's two sides.
cd "$STAGE/gpt2-124m"
$PY "$SRC/bench/gpu/gpt2_export.py" --out . --size 124m
for prec in bf16 fp32; do
  "$LOOMC" model.onnx --no-weights --cluster h200:1x1 --global-batch "$GPT2_BATCH" \
    --loss cross_entropy --optimizer adamw --lr 6e-4 --precision $prec -o $prec.loomplan \
    --summary-json $prec.summary.json --quiet
done
rm model.onnx # the plans do not need it under --init random
cp "$SRC/bench/gpu/gpt2_bench.py" "$SRC/bench/gpu/torch_gpt2.py" .
echo "$GPT2_BATCH" > batch

cd "$BUILD"
tar -cJf gpu-bundle.tar.xz gpu-bundle
echo "bundle: $BUILD/gpu-bundle.tar.xz ($(du -h gpu-bundle.tar.xz | cut -f1))"
