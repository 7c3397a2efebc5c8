# Shared helpers for the e2e scripts (sourced).
set -euo pipefail
: "${LOOM_BIN:?}" "${LOOM_SRC:?}" "${LOOM_WORK:?}"
PY=/usr/bin/python3
MODELS="$LOOM_SRC/test/models"
MPIRUN=("${LOOM_MPIEXEC:-mpirun}" --allow-run-as-root --oversubscribe)
export OMPI_MCA_rmaps_base_oversubscribe=1
# Each test works in its own folder.
WORK="$LOOM_WORK/$(basename "$0" .sh)"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"

loomc() { "$LOOM_BIN/loomc" "$@"; }
# Every run through these two that writes metrics and succeeds is checked:
# on every step the root rank's measured high-water mark of tensor bytes is
# its planned arena plus its kernels' workspace (measured_as_planned below;
# memory_as_planned also holds the arena against loomc's figures).
loom_run() { "$LOOM_BIN/loom-run" "$@" || return; measured_as_planned "$@"; }
loom_run_np() {
  local n=$1; shift
  "${MPIRUN[@]}" -np "$n" "$LOOM_BIN/loom-run" "$@" || return
  measured_as_planned "$@"
}

# measured_as_planned LOOM_RUN_ARGS... : the --metrics file of those
# arguments, if any, shows nothing allocated for tensors beyond the arena and
# the kernels' workspace on any step.
measured_as_planned() {
  local metrics=""
  while [ $# -gt 0 ]; do
    [ "$1" = --metrics ] && [ $# -gt 1 ] && metrics=$2
    shift
  done
  [ -n "$metrics" ] || return 0
  $PY - "$metrics" <<'PY' || fail "memory measured in $metrics is not the plan's arena"
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    assert m['peak_memory_bytes'] == m['arena_bytes'] + m['workspace_bytes'], m
PY
}

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_error EXPECTED_SUBSTRING CMD... : the command must exit 1 (bad
# input; not a signal), print exactly one line mentioning 'error:' and
# EXPECTED. expect_error_code CODE EXPECTED_SUBSTRING CMD... : the same with
# another exit code (loomc's: 2 unsupported model, 3 does not fit).
expect_error() { expect_error_code 1 "$@"; }
expect_error_code() {
  local code=$1 want=$2; shift 2
  local rc=0
  "$@" >out.txt 2>err.txt || rc=$?
  [ "$rc" -eq "$code" ] || { cat out.txt err.txt; fail "'$*' exited $rc, expected $code"; }
  local n
  n=$(grep -c "error:" err.txt || true)
  [ "$n" -eq 1 ] || { cat err.txt; fail "'$*' printed $n error lines, expected 1"; }
  grep -qF -- "$want" err.txt || { cat err.txt; fail "'$*' error does not mention '$want'"; }
  ! ls core* >/dev/null 2>&1 || fail "'$*' left a core dump"
  echo "ok: $(cat err.txt)"
}

# memory_as_planned METRICS SUMMARY_JSON : on every step the root rank's
# measured high-water mark of tensor bytes (its memory ledger) is its planned
# arena (loomc's per-rank peak, CPU ranks: no kernel workspace planned)
# plus what its kernels took at bind, measured: nothing is allocated for
# tensors after start-up. And the busiest program's arena is within 5% of
# the plan's live-set bound (the most bytes live at once in any program: what
# first-fit placement adds to the peak), which the memory estimate made from
# the planned step before emission equals.
memory_as_planned() {
  $PY - "$1" "$2" <<'PY' || fail "memory of $1 against $2"
import json, sys
summary = json.load(open(sys.argv[2]))['predicted']
planned = summary['peak_memory_bytes_per_device'][0]
busiest = (max(summary['peak_memory_bytes_per_device'])
           - summary['memory_breakdown_bytes_per_device']['workspace'])
live = summary['live_set_bytes']
assert live <= busiest <= 1.05 * live, ('arena', busiest, 'live set', live)
estimated = summary['estimated_peak_bytes']
assert estimated == live, ('estimate', estimated, 'live set', live)
for line in open(sys.argv[1]):
    m = json.loads(line)
    assert m['arena_bytes'] == planned, ('step', m['step'], m['arena_bytes'], planned)
    assert m['peak_memory_bytes'] == m['arena_bytes'] + m['workspace_bytes'], m
print('memory as planned: arena %d + kernel workspace %d bytes' %
      (m['arena_bytes'], m['workspace_bytes']))
PY
}

# perturbed DIR FILE... : copies of the files in DIR with every floating-point
# value moved by one rounding error (perturb.py, 1e-7 relative). A reference
# re-run on them measures the sensitivity that compare.py --sensitivity checks
# each tolerance against (test/models/README.md, "Well-posed comparisons").
perturbed() { local out=$1; shift; $PY "$MODELS/perturb.py" --out "$out" "$@" > /dev/null; }

# reference_runs PLAN RUN_ARGS... : the 1-rank reference of a parity test:
# m1.jsonl and t1.onnx, then the same on pert/model.onnx (pert/m1.jsonl,
# pert/t1.onnx) and on 2 threads (m1-threads2.jsonl, t1-threads2.onnx), the
# sensitivities compare.py --sensitivity weighs each tolerance against.
reference_runs() {
  local plan=$1; shift
  loom_run "$plan" "$@" --metrics m1.jsonl --export-onnx t1.onnx
  loom_run "$plan" --model pert/model.onnx "$@" --metrics pert/m1.jsonl \
    --export-onnx pert/t1.onnx
  LOOM_NUM_THREADS=2 loom_run "$plan" "$@" --metrics m1-threads2.jsonl \
    --export-onnx t1-threads2.onnx
}

# torch_ref DIR OUT ARGS... : torch_train.py on DIR/model.onnx with DIR/x.npy and
# DIR/target.npy (the mlp.py layout), losses OUT.json, weights OUT.npz.
torch_ref() {
  local dir=$1 out=$2; shift 2
  $PY "$MODELS/torch_train.py" --model "$dir/model.onnx" --data x="$dir/x.npy" \
    --data target="$dir/target.npy" --losses-out "$out.json" --weights-out "$out.npz" "$@" > /dev/null
}

# hf_ref DIR OUT ARGS... : hf_train.py on the model in DIR (hf_models.py's layout),
# losses OUT.json, weights OUT.npz.
hf_ref() {
  local dir=$1 out=$2; shift 2
  $PY "$MODELS/hf_train.py" --model-dir "$dir" --losses-out "$out.json" --weights-out "$out.npz" \
    "$@" > /dev/null
}
