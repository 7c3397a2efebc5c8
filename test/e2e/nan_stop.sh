#!/usr/bin/env bash
# A loss that is not finite stops loom-run after its step: exit status 3, one
# error line naming the step and the samples it read, that step's metrics
# line, and no export; on 2 ranks too, without a hang. --check-numerics names
# the data sample, or the first instruction (and its ONNX node) that wrote a
# NaN or inf. docs/runtime.md, "Non-finite values".
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/mlp.py" --out . --sizes 16,32,4 --samples 256 --seed 1 > /dev/null
# Global batch 8: step 8 reads samples 56..63; 2 ranks split it 56..59 | 60..63.
$PY - <<'PY'
import numpy as np
x = np.load("x.npy")
for sample, name in ((57, "x57.npy"), (61, "x61.npy")):
    bad = x.copy()
    bad[sample, 3] = np.nan
    np.save(name, bad)
PY
for n in 1 2; do
  loomc model.onnx --cluster cpu:$n --force dp=$n --global-batch 8 --loss cross_entropy \
    --optimizer adamw --lr 1e-3 -o p$n.loomplan --quiet
done
loomc model.onnx --cluster cpu:1 --global-batch 8 --loss cross_entropy \
  --optimizer adamw --lr 1e30 -o lr1e30.loomplan --quiet

# run_stop NAME NP ARGS...: runs loom-run ARGS on NP ranks (as loom_run_np,
# under a timeout) with stdout/stderr in NAME.out / NAME.err; it must end by
# itself with a non-zero status that is not a timeout, and print exactly one
# loom-run error line (left in $line; the status in $rc_of_last).
run_stop() {
  local name=$1 np=$2; shift 2
  local rc=0
  if [ "$np" -eq 1 ]; then
    timeout 120 "$LOOM_BIN/loom-run" "$@" >"$name.out" 2>"$name.err" || rc=$?
  else
    timeout 120 "${MPIRUN[@]}" -np "$np" "$LOOM_BIN/loom-run" "$@" \
      >"$name.out" 2>"$name.err" || rc=$?
  fi
  [ "$rc" -ne 124 ] || { cat "$name.err"; fail "$name: hung (timeout)"; }
  [ "$rc" -ne 0 ] || { cat "$name.out" "$name.err"; fail "$name: exited 0"; }
  local n
  n=$(grep -c "^loom-run: error: " "$name.err" || true)
  [ "$n" -eq 1 ] || { cat "$name.err"; fail "$name: $n error lines, expected 1"; }
  ! grep -qE "core dumped|Segmentation|signal [0-9]+|MPI_ABORT|terminate called" "$name.err" \
    || { cat "$name.err"; fail "$name: crashed"; }
  line=$(grep "^loom-run: error: " "$name.err")
  rc_of_last=$rc
}

# expect_metrics NAME FILE STEPS: FILE has STEPS lines and the last loss is null.
expect_metrics() {
  local name=$1 file=$2 steps=$3
  [ "$(wc -l < "$file")" -eq "$steps" ] || { cat "$file"; fail "$name: metrics should have $steps lines"; }
  tail -n 1 "$file" | grep -q "^{\"step\":$steps,\"loss\":null," \
    || { tail -n 1 "$file"; fail "$name: the last metrics line is not step $steps with a null loss"; }
}

DATA=(--data target=target.npy --steps 20)
LOSS_AT_8="loom-run: error: the loss is nan at step 8 (samples 56..63 of the data); rerun with --check-numerics to find the first instruction that produced it"

# The control: clean data trains all 20 steps and exports.
loom_run p1.loomplan --data x=x.npy "${DATA[@]}" --export-onnx clean.onnx --quiet
[ -s clean.onnx ] || fail "the clean run exported nothing"

# 1 rank, NaN in sample 57: stops at step 8 with exit status 3.
run_stop nan1 1 p1.loomplan --data x=x57.npy "${DATA[@]}" --metrics nan1.jsonl \
  --export-onnx nan1.onnx
[ "$rc_of_last" -eq 3 ] || fail "nan1: exit status $rc_of_last, expected 3"
[ "$line" = "$LOSS_AT_8" ] || fail "nan1: wrong message: $line"
expect_metrics nan1 nan1.jsonl 8
[ ! -e nan1.onnx ] || fail "nan1: the diverged weights were exported"
grep -q "^step 8/20  loss -\?nan " nan1.out || { cat nan1.out; fail "nan1: no step 8 line"; }
! grep -q "^step 9/\|^done:" nan1.out || { cat nan1.out; fail "nan1: ran past step 8"; }
echo "ok: 1 rank: $line"

# 2 ranks: both stop at step 8, rank 0 alone prints, nothing hangs.
run_stop nan2 2 p2.loomplan --data x=x57.npy "${DATA[@]}" --metrics nan2.jsonl \
  --export-onnx nan2.onnx
[ "$line" = "$LOSS_AT_8" ] || fail "nan2: wrong message: $line"
expect_metrics nan2 nan2.jsonl 8
[ ! -e nan2.onnx ] || fail "nan2: the diverged weights were exported"
echo "ok: 2 ranks (exit $rc_of_last): $line"

# --check-numerics blames the data: the sample, on the rank that read it.
run_stop cn1 1 p1.loomplan --data x=x57.npy "${DATA[@]}" --check-numerics
[ "$rc_of_last" -eq 3 ] || fail "cn1: exit status $rc_of_last, expected 3"
[ "$line" = "loom-run: error: step 8: the data 'x' has nan in sample 57 (element 3 of the sample)" ] \
  || fail "cn1: wrong message: $line"
echo "ok: $line"
run_stop cn2 2 p2.loomplan --data x=x61.npy "${DATA[@]}" --check-numerics
[ "$line" = "loom-run: error: rank 1: step 8: the data 'x' has nan in sample 61 (element 3 of the sample)" ] \
  || fail "cn2: wrong message: $line"
echo "ok: $line"

# --lr 1e30: step 1's loss is finite (the update comes after it), a later
# one is not; the run stops there.
run_stop lr 1 lr1e30.loomplan --data x=x.npy "${DATA[@]}" --metrics lr.jsonl \
  --export-onnx lr.onnx
[ "$rc_of_last" -eq 3 ] || fail "lr: exit status $rc_of_last, expected 3"
[[ "$line" =~ ^loom-run:\ error:\ the\ loss\ is\ (nan|inf|-inf)\ at\ step\ ([0-9]+)\ \(samples\ [0-9.]+\ of\ the\ data\)\;\ rerun\ with\ --check-numerics ]] \
  || fail "lr: wrong message: $line"
lr_step=${BASH_REMATCH[2]}
[ "$lr_step" -ge 2 ] && [ "$lr_step" -lt 20 ] || fail "lr: stopped at step $lr_step"
expect_metrics lr lr.jsonl "$lr_step"
[ ! -e lr.onnx ] || fail "lr: the diverged weights were exported"
echo "ok: --lr 1e30: $line"

# --check-numerics names the first instruction that wrote a non-finite value,
# no later than the step whose loss was, and its node is one of the model's.
run_stop cnlr 1 lr1e30.loomplan --data x=x.npy "${DATA[@]}" --check-numerics
[ "$rc_of_last" -eq 3 ] || fail "cnlr: exit status $rc_of_last, expected 3"
re="^loom-run: error: step ([0-9]+): instruction [0-9]+ '[a-z0-9_]+' \(ONNX node '([^']+)'\) wrote (nan|-?inf) to buffer '[^']+' at element [0-9]+$"
[[ "$line" =~ $re ]] || fail "cnlr: wrong message: $line"
[ "${BASH_REMATCH[1]}" -le "$lr_step" ] || fail "cnlr: step ${BASH_REMATCH[1]} is after the loss's step $lr_step"
NODE=${BASH_REMATCH[2]} $PY - <<'PY' || fail "cnlr: the named node is not in model.onnx: $line"
import os, sys, onnx
names = {n.name for n in onnx.load("model.onnx").graph.node}
sys.exit(0 if os.environ["NODE"] in names else 1)
PY
echo "ok: --lr 1e30 --check-numerics: $line"
