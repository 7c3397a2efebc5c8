#!/usr/bin/env bash
# The one-shot GPU check, ON THE GPU MACHINE (a few minutes).
# Made by bench/gpu/prepare.sh on a machine with MLIR; see docs/cuda.md.
#   usage: bash bench/gpu/run.sh BUNDLE.tar.xz
# Steps (each prints PASS/FAIL/SKIP; the summary is the last lines; the
# exit status is 1 when a step failed):
#   1. the machine: nvidia-smi, where libcublasLt / libnccl come from
#   2. the carried binaries load (ldd finds every library)
#   3. LoomCudaTests: every CUDA kernel against the CPU kernel, and a hand-
#      written MLP training plan on both backends
#   4. loom-run on a loomc-compiled MLP plan (784-512-512-10, AdamW, 20
#      steps) with --device cpu and --device cuda: losses within rtol 1e-4
#   5. a small GPT-2 (every GPT-2 op), 10 AdamW steps, cpu vs cuda: fp32
#      plan within rtol 1e-4; bf16 plan within rtol 2e-2 (bf16 storage, fp32
#      compute on both sides, different summation orders)
#   6. GPT-2 124M (bf16, global batch from the bundle, --init random:1):
#      Loom vs PyTorch (bf16 autocast, flash attention, fused AdamW) side by
#      side: tokens/s, TFLOP/s, MFU against the measured bf16 peak,
#      and a LOOM_PROFILE table of Loom's step; then Loom alone with each
#      attention algorithm in $GPU_CHECK_ATTENTION (default: gemm)
#   7. when at most 240 s have passed and an mpirun of loom-run's Open MPI
#      is there (else SKIP, saying why): the small GPT-2 as tp=2 on 2 ranks,
#      as dp=4 ZeRO-3 on 4 and as pp=2 (1F1B, 4 micro-batches: sends and
#      receives between the stages) on 2, every rank on the one GPU (--collectives
#      auto must pick host staging), 10 AdamW steps, against the same plan
#      on cpu ranks: losses within rtol 1e-4 (at most about 100 s)
#   8. when at most 260 s have passed: compute-sanitizer (at most 100 s)
#      memcheck on the attention, layout, bf16 and padded-GEMM kernel tests
#   9. when at most 300 s have passed: PyTorch's side again under
#      torch.compile, and the step-time ratio of Loom to it
# Logs and metrics are written to a scratch folder and packed after every
# step into gpu-logs.tar.gz, with the summary in summary.txt, under $OUT
# (when the job runner sets it; only a few files come back) or ./gpu-out.
set -uo pipefail
BUNDLE=${1:?usage: run.sh BUNDLE.tar.xz}
RESULTS=${OUT:-$PWD/gpu-out}
mkdir -p "$RESULTS"
OUTDIR=$(mktemp -d)
WORK=$(mktemp -d)
tar -xJf "$BUNDLE" -C "$WORK" || { echo "run.sh: cannot unpack $BUNDLE" >&2; exit 1; }
B=$WORK/gpu-bundle
declare -a SUMMARY
record() {
  SUMMARY+=("$1: $2")
  echo "== $1: $2"
  printf '%s\n' "${SUMMARY[@]}" >"$RESULTS/summary.txt"
  tar -czf "$RESULTS/gpu-logs.tar.gz" -C "$OUTDIR" .
}

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
timeout 150 "$B/bin/LoomCudaTests" --gtest_output=json:"$OUTDIR/cuda_tests.json" \
  >"$OUTDIR/cuda_tests.log" 2>&1
rc=$?
grep -E "^\[ *(FAILED|PASSED) *\]|^\[ *SKIPPED *\] [0-9]|Failure|error|^attention " "$OUTDIR/cuda_tests.log" | head -60
passed=$(grep -o 'PASSED  \] [0-9]*' "$OUTDIR/cuda_tests.log" | grep -o '[0-9]*$')
skipped=$(grep -o 'SKIPPED \] [0-9]* test' "$OUTDIR/cuda_tests.log" | grep -o '[0-9]*' | head -1)
if [ "$rc" != 0 ]; then
  record "LoomCudaTests" "FAIL (exit $rc; gpu-logs:cuda_tests.log)"
elif [ -n "$skipped" ] && [ "$skipped" != 0 ]; then
  # On a GPU no test skips; a skip means no device or a test that opted out.
  record "LoomCudaTests" "SKIP (${passed:-0} passed, $skipped skipped: gpu-logs:cuda_tests.log)"
else
  record "LoomCudaTests" "PASS (${passed:-0} tests)"
fi

echo "== 4. loom-run: MLP plan on cpu and cuda"
cd "$B/mlp"
ok=1
for dev in cpu cuda; do
  if ! timeout 90 "$B/bin/loom-run" mlp.loomplan --data x=x.npy --data target=target.npy \
      --steps 20 --log-every 5 --device $dev --metrics "$OUTDIR/mlp_$dev.jsonl" \
      2>&1 | tee "$OUTDIR/mlp_$dev.log"; then
    ok=0
  fi
done
# The CPU run on 1e-7-perturbed weights and data: the comparison's sensitivity.
timeout 90 "$B/bin/loom-run" mlp.loomplan --model pert/model.onnx --data x=pert/x.npy \
  --data target=target.npy --steps 20 --device cpu --metrics "$OUTDIR/mlp_cpu_pert.jsonl" \
  > "$OUTDIR/mlp_cpu_pert.log" 2>&1 || ok=0
if [ $ok = 1 ] && python3 compare.py --metrics "$OUTDIR/mlp_cuda.jsonl" \
     --metrics2 "$OUTDIR/mlp_cpu.jsonl" --rtol 1e-4 --sensitivity "$OUTDIR/mlp_cpu_pert.jsonl" \
     2>&1 | tee "$OUTDIR/mlp_compare.log"; then
  ms=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print('%.3f ms/step after the first' % (1e3*sum(x['step_time_s'] for x in r[1:])/max(1,len(r)-1)))" "$OUTDIR/mlp_cuda.jsonl")
  record "MLP cpu vs cuda losses (rtol 1e-4)" "PASS (cuda $ms)"
else
  record "MLP cpu vs cuda losses (rtol 1e-4)" "FAIL (gpu-logs:mlp_*.log)"
fi

# cpu vs cuda on one plan (data in the current directory): train_both NAME PLAN STEPS.
train_both() {
  local name=$1 plan=$2 steps=$3 dev ok=1
  for dev in cpu cuda; do
    timeout 90 "$B/bin/loom-run" "$plan" --data input_ids=input_ids.npy \
      --data target=target.npy --steps "$steps" --log-every 5 --device $dev \
      --metrics "$OUTDIR/${name}_$dev.jsonl" 2>&1 | tee "$OUTDIR/${name}_$dev.log" || ok=0
  done
  # The CPU run on 1e-7-perturbed weights: the comparison's sensitivity.
  timeout 90 "$B/bin/loom-run" "$plan" --model pert/model.onnx --data input_ids=input_ids.npy \
    --data target=target.npy --steps "$steps" --device cpu \
    --metrics "$OUTDIR/${name}_cpu_pert.jsonl" > "$OUTDIR/${name}_cpu_pert.log" 2>&1 || ok=0
  return $((1 - ok))
}

echo "== 5. small GPT-2: cpu vs cuda, fp32 and bf16"
cd "$B/gpt2s"
for prec_tol in fp32:1e-4 bf16:2e-2; do
  prec=${prec_tol%%:*} tol=${prec_tol#*:}
  if train_both gpt2s_$prec $prec.loomplan 10 &&
     python3 "$B/mlp/compare.py" --metrics "$OUTDIR/gpt2s_${prec}_cuda.jsonl" \
       --metrics2 "$OUTDIR/gpt2s_${prec}_cpu.jsonl" --rtol $tol \
       --sensitivity "$OUTDIR/gpt2s_${prec}_cpu_pert.jsonl" 2>&1 |
       tee "$OUTDIR/gpt2s_${prec}_compare.log"; then
    record "GPT-2 small $prec cpu vs cuda (rtol $tol)" "PASS"
  else
    record "GPT-2 small $prec cpu vs cuda (rtol $tol)" "FAIL (gpu-logs:gpt2s_${prec}_*.log)"
  fi
  # The device ledger's high-water mark against the arena and the kernels'
  # workspace, and what cudaMemGetInfo saw in use (docs/runtime.md).
  record "GPT-2 small $prec cuda memory" "$(python3 -c "import json,sys; m=[json.loads(l) for l in open(sys.argv[1])][-1]; print('peak %d = arena %d + workspace %d: %s; device in use %.1f MiB' % (m['peak_memory_bytes'], m['arena_bytes'], m['workspace_bytes'], 'as planned' if m['peak_memory_bytes'] == m['arena_bytes'] + m['workspace_bytes'] else 'MORE', m.get('device_memory_used_bytes', -1) / 2**20))" "$OUTDIR/gpt2s_${prec}_cuda.jsonl" 2>&1)"
done

echo "== 6. GPT-2 124M: Loom vs PyTorch"
cd "$B/gpt2-124m"
# bench NAME PREC [gpt2_bench.py options]: one benchmark, its log and JSON.
bench() {
  local name=$1 prec=$2
  shift 2
  timeout 200 python3 gpt2_bench.py --plan $prec.loomplan --model-json model.json \
    --loom-run "$B/bin/loom-run" --batch "$(cat batch)" --precision $prec \
    --json "$OUTDIR/$name.json" "$@" 2>&1 | tee "$OUTDIR/$name.log"
}
figures() {
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); l=r['sides'][0]; print('%.1f ms/step, %.0f tokens/s, %.1f TFLOP/s, MFU %.1f%% of measured %.0f%s' % (1e3*l['step_s'], l['tokens_per_s'], l['tflops'], 100*l['mfu_measured_peak'], r['measured_bf16_peak_tflops'], '; Loom/PyTorch step time %.2f' % r['ratio_loom_over_torch'] if 'ratio_loom_over_torch' in r else ''))" "$OUTDIR/$1.json"
}
for prec in bf16 fp32; do
  if bench gpt2_124m_$prec $prec --profile-out "$OUTDIR/gpt2_124m_${prec}_profile.txt"; then
    record "GPT-2 124M $prec" "$(figures gpt2_124m_$prec)"
    # Loom alone with each other attention algorithm (LOOM_CUDA_ATTENTION).
    for alg in ${GPU_CHECK_ATTENTION-gemm}; do
      if LOOM_CUDA_ATTENTION=$alg bench gpt2_124m_${prec}_$alg $prec --skip-torch; then
        record "GPT-2 124M $prec, attention $alg" "$(figures gpt2_124m_${prec}_$alg)"
      else
        record "GPT-2 124M $prec, attention $alg" "FAIL (gpu-logs:gpt2_124m_${prec}_$alg.log)"
      fi
    done
    break # fp32 is the fallback figure when bf16 does not run
  else
    record "GPT-2 124M $prec" "FAIL (gpu-logs:gpt2_124m_$prec.log)"
  fi
done

echo "== 7. small GPT-2 on 2 and 4 ranks sharing the GPU (if time is left)"
# loom-run links the build machine's Open MPI (libmpi.so.40): the mpirun here
# must be the same major.minor, and its own libmpi goes first (its plugins
# are where it was installed).
cd "$B/gpt2s"
MPIRUN=${MPIRUN:-$(command -v mpirun || command -v mpiexec || true)}
BUILT_MPI=$(grep -o '[0-9]*\.[0-9]*' "$B/mpi-version" 2>/dev/null | head -1)
HERE_MPI=""
[ -n "$MPIRUN" ] && HERE_MPI=$("$MPIRUN" --version 2>&1 | grep -o 'Open MPI[^0-9]*[0-9]*\.[0-9]*' | grep -o '[0-9]*\.[0-9]*$' | head -1)
multi_skip=""
if [ -z "$MPIRUN" ]; then
  multi_skip="no mpirun on this machine (loom-run needs Open MPI ${BUILT_MPI:-?}'s)"
elif [ -z "$HERE_MPI" ]; then
  multi_skip="$MPIRUN is not Open MPI (loom-run needs Open MPI ${BUILT_MPI:-?})"
elif [ -n "$BUILT_MPI" ] && [ "$HERE_MPI" != "$BUILT_MPI" ]; then
  multi_skip="$MPIRUN is Open MPI $HERE_MPI, loom-run was built with $BUILT_MPI"
elif [ ! -e tp2.loomplan ] || [ ! -e zero3.loomplan ]; then
  multi_skip="the bundle has no tp2/zero3 plans (an older prepare.sh)"
elif [ "$SECONDS" -gt 240 ]; then
  multi_skip="${SECONDS}s used, not enough time left"
fi
# train_ranks NAME PLAN NP: cpu, cuda and the perturbed cpu run under mpirun.
train_ranks() {
  local name=$1 plan=$2 np=$3 dev libs=$LD_LIBRARY_PATH
  local mpilib
  mpilib=$(ompi_info --parsable --path libdir 2>/dev/null | sed -n 's/^path:libdir://p')
  [ -n "$mpilib" ] && libs=$mpilib:$libs
  local mpi=("$MPIRUN" --allow-run-as-root --oversubscribe -np "$np" -x LD_LIBRARY_PATH="$libs")
  local run=(--data input_ids=input_ids.npy --data target=target.npy --steps 10 --log-every 5)
  for dev in cpu cuda; do
    timeout 60 "${mpi[@]}" "$B/bin/loom-run" "$plan" "${run[@]}" --device $dev \
      --metrics "$OUTDIR/${name}_$dev.jsonl" >"$OUTDIR/${name}_$dev.log" 2>&1 ||
      { tail -20 "$OUTDIR/${name}_$dev.log"; return 1; }
    cat "$OUTDIR/${name}_$dev.log"
  done
  # auto must have seen the shared GPU (the start-up line says what it took).
  grep -q "host-staged collectives ($np ranks share 1 GPU)" "$OUTDIR/${name}_cuda.log" || {
    echo "no 'host-staged collectives ($np ranks share 1 GPU)' on the start-up line"
    return 1
  }
  timeout 60 "${mpi[@]}" "$B/bin/loom-run" "$plan" --model pert/model.onnx "${run[@]}" \
    --device cpu --metrics "$OUTDIR/${name}_cpu_pert.jsonl" >"$OUTDIR/${name}_cpu_pert.log" 2>&1
}
for spec in tp2:2 zero3:4 pp2:2; do
  name=${spec%:*} np=${spec#*:}
  if [ ! -e $name.loomplan ]; then
    record "GPT-2 small $name" "SKIP (the bundle has no $name plan: an older prepare.sh)"
    continue
  fi
  label="GPT-2 small $name on $np ranks sharing the GPU, cpu vs cuda (rtol 1e-4)"
  if [ -n "$multi_skip" ]; then
    record "$label" "SKIP ($multi_skip)"
  elif train_ranks gpt2s_$name $name.loomplan $np 2>&1 | tee "$OUTDIR/gpt2s_${name}_steps.log" &&
       python3 "$B/mlp/compare.py" --metrics "$OUTDIR/gpt2s_${name}_cuda.jsonl" \
         --metrics2 "$OUTDIR/gpt2s_${name}_cpu.jsonl" --rtol 1e-4 \
         --sensitivity "$OUTDIR/gpt2s_${name}_cpu_pert.jsonl" 2>&1 |
         tee "$OUTDIR/gpt2s_${name}_compare.log"; then
    record "$label" "PASS"
  else
    record "$label" "FAIL (gpu-logs:gpt2s_${name}_*.log)"
    # One hang or failure is enough: the other plan would spend the same.
    multi_skip="the $name run failed"
  fi
done

echo "== 8. compute-sanitizer memcheck (if time is left)"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -z "$SAN" ]; then
  record "memcheck" "SKIP (no compute-sanitizer)"
elif [ "$SECONDS" -gt 260 ]; then
  record "memcheck" "SKIP (${SECONDS}s used, not enough time left)"
elif timeout 100 "$SAN" --tool memcheck --error-exitcode 9 \
    "$B/bin/LoomCudaTests" --gtest_filter='Algorithms/CudaAttention.*:CudaLayout*:CudaBf16*:CudaPaddedGemm*' \
    >"$OUTDIR/memcheck.log" 2>&1; then
  record "memcheck" "PASS ($(grep -o 'ERROR SUMMARY: [0-9]* errors' "$OUTDIR/memcheck.log" | tail -1))"
else
  record "memcheck" "FAIL or timeout (gpu-logs:memcheck.log: $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$OUTDIR/memcheck.log" | tail -1))"
fi

echo "== 9. PyTorch with torch.compile (if time is left)"
cd "$B/gpt2-124m"
if [ ! -e "$OUTDIR/gpt2_124m_bf16.json" ]; then
  record "PyTorch compiled" "SKIP (no Loom bf16 figure to compare with)"
elif [ "$SECONDS" -gt 300 ]; then
  record "PyTorch compiled" "SKIP (${SECONDS}s used, not enough time left)"
elif timeout 150 python3 torch_gpt2.py --device cuda --precision bf16 --compile \
    --batch "$(cat batch)" --steps 20 --warmup 5 --json "$OUTDIR/torch_compiled.json" \
    --layers 12 --hidden 768 --heads 12 --seq 1024 --vocab 50257 \
    >"$OUTDIR/torch_compiled.log" 2>&1; then
  record "PyTorch compiled" "$(python3 -c "import json,sys; t=json.load(open(sys.argv[1])); l=json.load(open(sys.argv[2]))['sides'][0]; print('%.1f ms/step, %.1f TFLOP/s; Loom/PyTorch-compiled step time %.2f' % (1e3*t['step_s'], t['tflops'], l['step_s']/t['step_s']))" "$OUTDIR/torch_compiled.json" "$OUTDIR/gpt2_124m_bf16.json")"
else
  record "PyTorch compiled" "not measured: torch.compile failed or timed out (gpu-logs:torch_compiled.log)"
fi

echo
echo "== summary (${SECONDS}s)"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
rm -rf "$WORK" "$OUTDIR"
# Exit status 1 when any step failed.
! printf '%s\n' "${SUMMARY[@]}" | grep -q ': FAIL'

