#!/usr/bin/env bash
# loom-elastic (docs/elastic.md): GPT-2 (global batch 12, AdamW, a token
# stream) trained 30 steps with a checkpoint every 10.
# - Uninterrupted, asked for 5 ranks: loomc cannot split 12 over 5, so it
#   runs on 4 (the reference), and once more on 1e-7-perturbed weights (the
#   sensitivity of the reference).
# - One rank's loom-run killed (kill -9, from outside) at step 15: the
#   launcher names the rank, plans for the 3 left, they resume from the
#   step-10 checkpoint and finish; the metrics file holds steps 1-30 once
#   each, within 1e-5 relative of the reference.
# - Its newest two checkpoints damaged (a flipped byte): a new launch falls
#   back to step 10 and trains steps 11-30 again, within 1e-5.
# - A hostfile that grows from 2 to 3 slots while the job runs: restarted on
#   3 ranks, within 1e-5.
# - Ranks that fail of their own (a token outside the vocabulary) are not
#   restarted: loom-run's error, then the launcher's one line; nor is an
#   mpirun that starts no rank; and its flags' misuse is refused in one line.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/hf_models.py" --model gpt2 --out . --batch 12 > /dev/null
perturbed pert model.onnx config.json
$PY - <<'PY'
import numpy as np
S, V, N = 64, 512, 48          # the model's sequence and vocabulary; 4 steps of 12
tokens = np.random.default_rng(3).integers(0, V, N * S + 1).astype(np.uint16)
tokens.tofile("tokens.bin")
tokens[5 * S + 7] = 600         # outside the vocabulary
tokens.tofile("bad_tokens.bin")
PY
elastic() { # CHECKPOINT_DIR ARGS...: loom-elastic on GPT-2, 30 steps
  local ck=$1; shift
  "$LOOM_BIN/loom-elastic" --model model.onnx --global-batch 12 --optimizer adamw \
    --lr 1e-3 --tokens tokens.bin --steps 30 --checkpoint-dir "$ck" \
    --checkpoint-every 10 --log-every 10 --backoff 0.2 \
    --mpirun "${MPIRUN[0]}" --mpirun-arg=--allow-run-as-root \
    --mpirun-arg=--oversubscribe "$@"
}
same_as_reference() { # METRICS
  $PY "$MODELS/compare.py" --metrics "$1" --metrics2 m4.jsonl --rtol 1e-5 \
    --sensitivity pert/m4.jsonl
  $PY - "$1" <<'PY' || fail "$1 does not hold steps 1-30 once each"
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
assert steps == list(range(1, 31)), steps
PY
}

# --- The reference: 5 asked, 4 planned --------------------------------------
elastic ref --np 5 --metrics m4.jsonl 2> ref.err
grep -q "no plan for 5 device(s)" ref.err || { cat ref.err; fail "5 ranks were planned"; }
grep -q "planned for 4 device(s)" ref.err || { cat ref.err; fail "no fallback to 4"; }
elastic pert/ck --np 4 --model pert/model.onnx --metrics pert/m4.jsonl 2> /dev/null

# --- kill -9 of rank 1 at step 15 ------------------------------------------
elastic ck --np 4 --metrics killed.jsonl > killed.out 2> killed.err &
launcher=$!
records=ck/.elastic/attempt-0
for _ in $(seq 1 3000); do
  [ "$(cat killed.jsonl 2> /dev/null | wc -l)" -ge 15 ] && break
  sleep 0.01
done
# Every rank is paused while rank 1 is killed, so the step is known.
pids=$(for r in 0 1 2 3; do awk '{print $2}' $records/rank-$r; done)
kill -STOP $pids
at=$(wc -l < killed.jsonl)
kill -9 "$(awk '{print $2}' $records/rank-1)"
kill -CONT $pids
wait $launcher || { cat killed.err; fail "loom-elastic did not finish after the kill"; }
echo "rank 1 killed after step $at"
[ "$at" -ge 15 ] && [ "$at" -lt 20 ] || fail "the kill came after step $at, not in 15-19"
grep -q "rank 1 on .* was lost: killed by signal 9" killed.err || { cat killed.err; fail "rank 1 not named"; }
grep -q "planned for 3 device(s)" killed.err || { cat killed.err; fail "not re-planned for 3"; }
grep -q "resumed from ck/step-00000010 (step 10 of 30)" killed.out || { cat killed.out; fail "not resumed from step 10"; }
grep -q "done on 3 rank(s) after 1 restart(s)" killed.err || { cat killed.err; fail "not done on 3"; }
same_as_reference killed.jsonl

# --- Damaged checkpoints: back to step 10 -----------------------------------
for step in 20 30; do
  $PY - ck/step-000000$step/rank-00000.bin <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 1]))
PY
done
cp killed.jsonl damaged.jsonl
elastic ck --np 4 --metrics damaged.jsonl > damaged.out 2> damaged.err
[ "$(grep -c "warning: ck/step-000000[23]0: .*a damaged checkpoint" damaged.out damaged.err \
      | awk -F: '{s += $NF} END {print s}')" -eq 2 ] || { cat damaged.out damaged.err; fail "damaged checkpoints not named"; }
grep -q "resumed from ck/step-00000010" damaged.out || { cat damaged.out; fail "no fallback to step 10"; }
same_as_reference damaged.jsonl

# --- A hostfile that grows ---------------------------------------------------
echo "localhost slots=2" > hosts
elastic grown --hostfile hosts --metrics grown.jsonl > grown.out 2> grown.err &
launcher=$!
steps_in() { cat "$1" 2> /dev/null | wc -l; }
for _ in $(seq 1 3000); do
  [ "$(steps_in grown.jsonl)" -ge 3 ] && break
  sleep 0.01
done
# The ranks are paused until the launcher has seen the new hostfile (it
# looks once a second), so the job cannot end before.
pids=$(for r in 0 1; do awk '{print $2}' grown/.elastic/attempt-0/rank-$r; done)
kill -STOP $pids
echo "localhost slots=3" > hosts
for _ in $(seq 1 300); do
  grep -q "the hostfile now offers" grown.err && break
  sleep 0.1
done
kill -CONT $pids 2> /dev/null || true
wait $launcher || { cat grown.err; fail "loom-elastic did not finish after the hostfile grew"; }
grep -q "the hostfile now offers 3 device(s)" grown.err || { cat grown.err; fail "growth not seen"; }
grep -q "done on 3 rank(s) after 0 restart(s)" grown.err || { cat grown.err; fail "not done on 3"; }
same_as_reference grown.jsonl

# --- Not restarted: the ranks' own error ------------------------------------
rc=0
elastic bad --np 2 --tokens bad_tokens.bin > bad.out 2> bad.err || rc=$?
[ "$rc" -eq 1 ] || { cat bad.out bad.err; fail "ranks' own error: exit $rc, expected 1"; }
grep -q "bad_tokens.bin: token 600 at position 327 is outside" bad.err || { cat bad.err; fail "the ranks' error is not shown"; }
grep -q "loom-elastic: error: the ranks failed of their own" bad.err || { cat bad.err; fail "no launcher line"; }
! grep -q "start 1:" bad.err || fail "restarted after the ranks' own error"
echo "ok: not restarted: $(grep 'loom-elastic: error' bad.err)"

# --- Flags ------------------------------------------------------------------
expect_error "missing --checkpoint-dir D" "$LOOM_BIN/loom-elastic" --np 2 --model model.onnx --steps 3
expect_error "--resume is what loom-elastic does" "$LOOM_BIN/loom-elastic" --np 2 --model model.onnx \
  --steps 3 --checkpoint-dir x --resume
expect_error "--min-np 3 is more than --np 2" "$LOOM_BIN/loom-elastic" --np 2 --min-np 3 \
  --model model.onnx --steps 3 --checkpoint-dir x
expect_error "--cluster takes a preset's name without a count" "$LOOM_BIN/loom-elastic" --np 2 \
  --cluster cpu:2 --model model.onnx --steps 3 --checkpoint-dir x
expect_error "how many devices?" "$LOOM_BIN/loom-elastic" --model model.onnx --steps 3 \
  --checkpoint-dir x
# A model loomc does not support (its exit code 2) is not retried on fewer
# devices.
$PY "$MODELS/bad_inputs.py" --out bad --sizes 8,16,4 --samples 64 > /dev/null
expect_error "loomc cannot plan the model (exit 2): bad/unknown_op.onnx:0:0: error: unsupported ONNX op 'Hardmax'" \
  "$LOOM_BIN/loom-elastic" --np 2 --model bad/unknown_op.onnx --global-batch 8 --steps 3 \
  --checkpoint-dir unsupported
! grep -q "no plan for 1 device" err.txt || fail "retried an unsupported model on fewer devices"
# A launcher that starts no rank is not a lost rank: no restart.
expect_error "mpirun started no rank" elastic nostart --np 2 --mpirun-arg=--no-such-flag
echo "elastic: ok"
