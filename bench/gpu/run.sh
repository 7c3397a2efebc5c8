#!/usr/bin/env bash
# The one-shot GPU check, ON THE LENT GPU MACHINE (one call, a few minutes).
# Made by bench/gpu/prepare.sh on a machine with MLIR; see docs/cuda.md.
#   usage: bash bench/gpu/run.sh BUNDLE.tar.xz
# Steps (each prints PASS/FAIL/SKIP; the summary is the last lines):
#   1. the machine: nvidia-smi, where libcublasLt / libnccl come from
#   2. the carried binaries load (ldd finds every library)
#   3. LoomCudaTests: every CUDA kernel against the CPU kernel, and a hand-
#      written MLP training plan on both backends
#   4. loom-run on a loomc-compiled MLP plan (784-512-512-10, AdamW, 20
#      steps) with --device cpu and --device cuda: losses within rtol 1e-4
# Logs and metrics go to $OUT (when the device tool sets it) or ./gpu-out.
set -uo pipefail
BUNDLE=${1:?usage: run.sh BUNDLE.tar.xz}
OUTDIR=${OUT:-$PWD/gpu-out}
mkdir -p "$OUTDIR"
WORK=$(mktemp -d)
tar -xJf "$BUNDLE" -C "$WORK"
B=$WORK/gpu-bundle
declare -a SUMMARY
record() { SUMMARY+=("$1: $2"); echo "== $1: $2"; }

echo "== 1. machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
# CUDA libraries: the toolkit's, else the pip wheels PyTorch brings.
CUDA_LIBS=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib; do
  [ -e "$d/libcublasLt.so.13" ] && CUDA_LIBS="$CUDA_LIBS:$d"
  [ -e "$d/libnccl.so.2" ] && CUDA_LIBS="$CUDA_LIBS:$d"
done
for mod in nvidia.cu13 nvidia.cublas nvidia.nccl; do
  p=$(python3 -c "import $mod, os; print(os.path.dirname($mod.__path__[0] + '/x'))" 2>/dev/null) || continue
  for sub in lib lib64; do [ -d "$p/$sub" ] && CUDA_LIBS="$CUDA_LIBS:$p/$sub"; done
done
LIBS=$B/lib$CUDA_LIBS
# GCC 12's libstdc++ only when the machine's is older (it needs glibc 2.36).
SYS_STDCXX=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 /{print $NF; exit}')
if [ -z "$SYS_STDCXX" ] || ! grep -q GLIBCXX_3.4.30 "$SYS_STDCXX"; then
  LIBS=$B/libstdcxx:$LIBS
fi
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ldd --version | head -1

echo "== 2. the carried binaries load"
missing=$(for e in "$B"/bin/*; do ldd "$e"; done 2>&1 | grep -E "not found|GLIBC" | sort -u)
if [ -n "$missing" ]; then
  echo "$missing"
  record "binaries load" "FAIL (missing libraries or glibc too old; see above)"
else
  record "binaries load" "PASS"
fi

echo "== 3. CUDA kernels against the CPU kernels"
timeout 300 "$B/bin/LoomCudaTests" --gtest_output=json:"$OUTDIR/cuda_tests.json" \
  >"$OUTDIR/cuda_tests.log" 2>&1
rc=$?
grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|error|cuda |cpu " "$OUTDIR/cuda_tests.log" | head -120
if grep -q "SKIPPED" "$OUTDIR/cuda_tests.log" && ! grep -q "PASSED  \] [1-9]" "$OUTDIR/cuda_tests.log"; then
  record "LoomCudaTests" "SKIP (no CUDA device visible?)"
elif [ "$rc" = 0 ]; then
  record "LoomCudaTests" "PASS ($(grep -o 'PASSED  \] [0-9]* tests' "$OUTDIR/cuda_tests.log"))"
else
  record "LoomCudaTests" "FAIL (exit $rc; $OUTDIR/cuda_tests.log)"
fi

echo "== 4. loom-run: MLP plan on cpu and cuda"
cd "$B/mlp"
ok=1
for dev in cpu cuda; do
  if ! timeout 180 "$B/bin/loom-run" mlp.loomplan --data x=x.npy --data target=target.npy \
      --steps 20 --log-every 5 --device $dev --metrics "$OUTDIR/mlp_$dev.jsonl" \
      2>&1 | tee "$OUTDIR/mlp_$dev.log"; then
    ok=0
  fi
done
if [ $ok = 1 ] && python3 compare.py --metrics "$OUTDIR/mlp_cuda.jsonl" \
     --metrics2 "$OUTDIR/mlp_cpu.jsonl" --rtol 1e-4 2>&1 | tee "$OUTDIR/mlp_compare.log"; then
  ms=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print('%.3f ms/step after the first' % (1e3*sum(x['step_time_s'] for x in r[1:])/max(1,len(r)-1)))" "$OUTDIR/mlp_cuda.jsonl")
  record "MLP cpu vs cuda losses (rtol 1e-4)" "PASS (cuda $ms)"
else
  record "MLP cpu vs cuda losses (rtol 1e-4)" "FAIL ($OUTDIR/mlp_*.log)"
fi

echo
echo "== summary"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
rm -rf "$WORK"
