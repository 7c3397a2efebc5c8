#!/usr/bin/env bash
# make fuzz: runs each fuzz target of FUZZ_BUILD (built with LOOM_FUZZ=ON)
# for SECONDS, seeded from test/fuzz/seeds, the importer's lit models and
# the regression inputs, each keeping its growing corpus in
# FUZZ_BUILD/fuzz/NAME/corpus. Prints a line per target (runs, runs a
# second, coverage); a crash leaves its input in FUZZ_BUILD/fuzz/NAME/ and
# fails the run: fix it, then add the input to test/fuzz/regressions/NAME/,
# where ctest runs it on every build.
#   test/fuzz/run.sh FUZZ_BUILD SECONDS [TARGET...]
set -euo pipefail
build=$(cd "$1" && pwd); seconds=$2; shift 2
src=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(plan npy checkpoint onnx onnxtext)
declare -A seeds=([plan]="$src/seeds/plan" [npy]="$src/seeds/npy"
                  [checkpoint]="$src/seeds/checkpoint"
                  [onnx]="$src/seeds/onnx" [onnxtext]="$src/../Frontend")
declare -A maxlen=([plan]=65536 [npy]=4096 [checkpoint]=16384 [onnx]=65536
                   [onnxtext]=16384)
failed=0
for t in "${targets[@]}"; do
  bin="$build/bin/loom-fuzz-$t"
  [ -x "$bin" ] || { echo "fuzz: $bin is missing; build FUZZ_BUILD with -DLOOM_FUZZ=ON" >&2; exit 1; }
  work="$build/fuzz/$t"
  mkdir -p "$work/corpus"
  dirs=("$work/corpus" "${seeds[$t]}")
  [ -d "$src/regressions/$t" ] && dirs+=("$src/regressions/$t")
  # One process, a fixed time; -rss_limit_mb catches an allocation a file
  # claims but does not hold; -timeout a hang.
  rc=0
  (cd "$work" && "$bin" -max_total_time="$seconds" -max_len="${maxlen[$t]}" \
     -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
     -artifact_prefix="$work/" "${dirs[@]}") >"$work/log.txt" 2>&1 || rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/log.txt" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'exec/s: [0-9]*' "$work/log.txt" | tail -1 | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$work/log.txt" | tail -1 | grep -o '[0-9]*$' || echo 0)
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz: $t FAILED after $runs runs: $(ls "$work"/crash-* "$work"/oom-* "$work"/timeout-* "$work"/leak-* 2>/dev/null | head -3 | tr '\n' ' ')(log: $work/log.txt)"
  else
    echo "fuzz: $t ok: $runs runs in ${seconds} s, $rate runs/s, coverage $cov edges"
  fi
done
exit $failed
