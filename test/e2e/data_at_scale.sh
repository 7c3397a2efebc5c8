#!/usr/bin/env bash
# Data at scale (docs/data.md): token streams, the seeded order, mapped files.
# - A uint16 token stream (raw, uint32, and a 1-D .npy) trains as the same
#   windows given as two int64 .npy files: losses within 1e-7 relative (they
#   are the same samples; the run is bitwise the same).
# - With --seed 7 the order is shuffled; 1 rank, dp=2, tp=2 and pp=2 read the
#   same samples in the same order: losses within 1e-5 of the 1-rank run
#   (compare.py, against the sensitivity of the reference to 1e-7-perturbed
#   weights and to 2 threads), on .npy data and on a token stream; and the
#   shuffled losses are not the sequential ones.
# - A 20 GiB sparse token file (truncate, the small stream's windows written
#   at its start) trains 5 steps on 2 ranks, in file order (losses equal the
#   small file's) and shuffled over the whole file, each rank's peak RSS
#   (ru_maxrss) under 1 GiB and within 64 MiB of the same run on the small
#   file.
# - Validation (--valid-tokens, --eval-every): the pass leaves training
#   bitwise unchanged, its loss after step 5 is bitwise step 6's loss where
#   the two read the same samples with the same weights, and dp=2, tp=2 and
#   pp=2 evaluate as 1 rank does within 1e-5.
# - Each refusal has its one-line message: a stream shorter than one sample,
#   a raw file that is not whole tokens, a token outside the vocabulary (named
#   by its position in the file, found by rank 1 at step 3 while rank 0 waits),
#   inputs and target of different sample counts, a float id that is not a
#   whole number, a plan that is not a token model, and the flags' misuse.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/hf_models.py" --model gpt2 --out . --batch 8 > /dev/null
opts=(--global-batch 8 --optimizer adamw --lr 1e-3 --quiet)
loomc model.onnx --cluster cpu:1 "${opts[@]}" -o p1.loomplan
$PY - <<'PY'
import numpy as np
S, V, N = 64, 512, 40          # the model's sequence and vocabulary; 5 steps of 8
tokens = np.random.default_rng(3).integers(0, V, N * S + 1).astype(np.uint16)
tokens.tofile("tokens.bin")
tokens.astype(np.uint32).tofile("tokens32.bin")
np.save("tokens.npy", tokens.astype(np.int32))
win = tokens.astype(np.int64)[np.arange(N)[:, None] * S + np.arange(S + 1)[None, :]]
np.save("ids.npy", np.ascontiguousarray(win[:, :S]))
np.save("next.npy", np.ascontiguousarray(win[:, 1:]))
np.save("ids_u16.npy", win[:, :S].astype(np.uint16))
np.save("next_short.npy", np.ascontiguousarray(win[:12, 1:]))
np.save("next_float.npy", np.where(np.arange(S) == 5, 0.5, win[:, 1:]).astype(np.float32))
bad = tokens.copy()
bad[2 * 8 * S + 4 * S + 10] = 600  # step 3, window 20: rank 1's first
bad.tofile("bad_tokens.bin")
tokens[:3].tofile("three.bin")
open("odd.bin", "wb").write(b"\0" * 7)
PY

# --- A token stream is its windows -------------------------------------------
same_losses() { # A B: the metrics' losses within 1e-7 relative
  $PY - "$1" "$2" <<'PY' || fail "$1 and $2 differ"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:3])
assert len(a) == len(b) == 7, (a, b)
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
assert worst <= 1e-7, (worst, a, b)
print("%s = %s (relative %.1e)" % (sys.argv[1], sys.argv[2], worst))
PY
}
# 7 steps: 5 of epoch 0, then the file again from its start.
loom_run p1.loomplan --data input_ids=ids.npy --data target=next.npy --steps 7 --metrics npy.jsonl
loom_run p1.loomplan --tokens tokens.bin --steps 7 --metrics tok.jsonl
loom_run p1.loomplan --tokens tokens32.bin --tokens-dtype uint32 --steps 7 --metrics tok32.jsonl
loom_run p1.loomplan --tokens tokens.npy --steps 7 --metrics toknpy.jsonl
loom_run p1.loomplan --data input_ids=ids_u16.npy --data target=next.npy --steps 7 --metrics u16.jsonl
for m in tok tok32 toknpy u16; do same_losses $m.jsonl npy.jsonl; done

# --- The seeded order does not depend on the plan ----------------------------
perturbed pert model.onnx config.json
run=(--data input_ids=ids.npy --data target=next.npy --steps 7 --seed 7)
reference_runs p1.loomplan "${run[@]}"
$PY - <<'PY' || fail "the seeded order changed nothing"
import json
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in ("m1.jsonl", "npy.jsonl"))
assert a[0] != b[0] and a[3] != b[3], (a, b)
PY
for force in dp=2 tp=2 pp=2; do
  loomc model.onnx --cluster cpu:2 --force $force "${opts[@]}" -o $force.loomplan
  loom_run_np 2 $force.loomplan "${run[@]}" --metrics $force.jsonl
  $PY "$MODELS/compare.py" --metrics $force.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
    --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl
done
# A token stream in the seeded order: the same windows, so the same losses.
loom_run_np 2 dp=2.loomplan --tokens tokens.bin --steps 7 --seed 7 --metrics tok-dp2.jsonl
$PY "$MODELS/compare.py" --metrics tok-dp2.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
  --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl

# --- Validation ----------------------------------------------------------------
# The training stream as validation data, batch 0 only: the eval loss after
# step 5 is the model after step 5 on samples 0..7, which is what step 6
# trains on (5 batches an epoch, file order): bitwise its loss. The steps'
# losses are those of the run without validation, bitwise: the pass undoes
# its updates.
loom_run p1.loomplan --tokens tokens.bin --steps 7 --valid-tokens tokens.bin \
  --eval-every 5 --eval-batches 1 --metrics ev1.jsonl
$PY - <<'PY' || fail "validation loss"
import json
ev = [json.loads(l) for l in open("ev1.jsonl")]
tok = [json.loads(l) for l in open("tok.jsonl")]
assert [m["loss"] for m in ev] == [m["loss"] for m in tok], (ev, tok)
assert [m["step"] for m in ev if "eval_loss" in m] == [5, 7], ev
assert ev[4]["eval_loss"] == tok[5]["loss"], (ev[4], tok[5])
print("eval loss after step 5 %.9g = step 6's loss" % ev[4]["eval_loss"])
PY
# Every plan evaluates the same: all 5 batches, 1 rank (and its sensitivity)
# against dp=2, tp=2 and pp=2.
evals() { # METRICS OUT: the eval losses, numbered from 1, as a metrics file
  $PY -c "import json, sys
evals = [json.loads(l) for l in open(sys.argv[1])]
evals = [m['eval_loss'] for m in evals if 'eval_loss' in m]
with open(sys.argv[2], 'w') as out:
    for i, loss in enumerate(evals):
        out.write(json.dumps({'step': i + 1, 'loss': loss}) + '\n')" "$1" "$2"
}
valid=(--tokens tokens.bin --steps 7 --valid-tokens tokens.bin --eval-every 2 --quiet)
loom_run p1.loomplan "${valid[@]}" --metrics e1.jsonl
loom_run p1.loomplan --model pert/model.onnx "${valid[@]}" --metrics pert/e1.jsonl
LOOM_NUM_THREADS=2 loom_run p1.loomplan "${valid[@]}" --metrics e1-threads2.jsonl
for f in e1 pert/e1 e1-threads2; do evals $f.jsonl $f.eval.jsonl; done
for force in dp=2 tp=2 pp=2; do
  loom_run_np 2 $force.loomplan "${valid[@]}" --metrics e-$force.jsonl
  evals e-$force.jsonl e-$force.eval.jsonl
  $PY "$MODELS/compare.py" --metrics e-$force.eval.jsonl --metrics2 e1.eval.jsonl --rtol 1e-5 \
    --sensitivity pert/e1.eval.jsonl --sensitivity e1-threads2.eval.jsonl
done

# --- 20 GiB on 2 ranks, each under 1 GiB ------------------------------------
truncate -s 20G big.bin
dd if=tokens.bin of=big.bin conv=notrunc status=none
cat > rss.py <<'PY'
# rss.py OUT_PATTERN CMD...: runs CMD; writes its peak RSS in bytes to
# OUT_PATTERN % (this MPI rank).
import os, resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
with open(sys.argv[1] % rank, "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
sys.exit(rc)
PY
rss_run() { # NAME LOOM_RUN_ARGS...
  local name=$1; shift
  "${MPIRUN[@]}" -np 2 $PY rss.py "$name.rss%d" "$LOOM_BIN/loom-run" dp=2.loomplan \
    --steps 5 --metrics "$name.jsonl" "$@"
}
rss_run small --tokens tokens.bin
rss_run big --tokens big.bin
rss_run bigshuffled --tokens big.bin --seed 7
$PY - <<'PY' || fail "peak RSS of the 20 GiB run"
import json, math
small = [json.loads(l)["loss"] for l in open("small.jsonl")]
big = [json.loads(l)["loss"] for l in open("big.jsonl")]
assert big == small, (big, small)
assert all(math.isfinite(json.loads(l)["loss"]) for l in open("bigshuffled.jsonl"))
for rank in (0, 1):
    base = int(open("small.rss%d" % rank).read())
    for name in ("big", "bigshuffled"):
        rss = int(open("%s.rss%d" % (name, rank)).read())
        print("rank %d: %s %.1f MiB peak RSS, small file %.1f MiB"
              % (rank, name, rss / 2**20, base / 2**20))
        assert rss < 2**30 and rss < base + 64 * 2**20, (name, rank, rss, base)
PY

# --- Refusals -----------------------------------------------------------------
expect_error "three.bin: holds 3 token(s), fewer than one sample's 65 (the plan's sequence of 64 and the next token)" \
  loom_run p1.loomplan --tokens three.bin --steps 1
expect_error "odd.bin: 7 bytes is not a whole number of uint16 tokens; pass --tokens-dtype" \
  loom_run p1.loomplan --tokens odd.bin --steps 1
expect_error "bad_tokens.bin: token 600 at position 1290 is outside [0, 512), the model's vocabulary" \
  timeout 60 "${MPIRUN[@]}" -np 2 "$LOOM_BIN/loom-run" dp=2.loomplan --tokens bad_tokens.bin --steps 5
grep -q "rank 1: " err.txt || fail "the token error is not rank 1's"
expect_error "ids.npy holds 40 sample(s) for 'input_ids' but next_short.npy holds 12 for 'target'" \
  loom_run p1.loomplan --data input_ids=ids.npy --data target=next_short.npy --steps 1
expect_error "next_float.npy: 0.5 at sample 0, element 5 is not a whole number that fits int64" \
  loom_run p1.loomplan --data input_ids=ids.npy --data target=next_float.npy --steps 1
expect_error "--tokens gives the target (each window's next tokens); drop --data target=next.npy" \
  loom_run p1.loomplan --tokens tokens.bin --data target=next.npy --steps 1
expect_error "--tokens-dtype applies to --tokens FILE" \
  loom_run p1.loomplan --data input_ids=ids.npy --data target=next.npy --tokens-dtype uint32 --steps 1
expect_error "--order must be sequential or shuffled, got 'random'" \
  loom_run p1.loomplan --tokens tokens.bin --order random --steps 1
expect_error "validation data needs --eval-every N" \
  loom_run p1.loomplan --tokens tokens.bin --valid-tokens tokens.bin --steps 1
expect_error "--eval-every and --eval-batches need validation data" \
  loom_run p1.loomplan --tokens tokens.bin --eval-every 2 --steps 1
expect_error "the validation data holds 40 sample(s): 5 whole batch(es) of 8, and --eval-batches asks for 6" \
  loom_run p1.loomplan --tokens tokens.bin --valid-tokens tokens.bin --eval-every 1 --eval-batches 6 --steps 1
expect_error "validation data: no data for 'target'; pass --valid-data target=FILE.npy" \
  loom_run p1.loomplan --tokens tokens.bin --valid-data input_ids=ids.npy --eval-every 1 --steps 1
$PY "$MODELS/mlp.py" --out mlp --sizes 8,16,4 --samples 64 --seed 1 > /dev/null
loomc mlp/model.onnx --cluster cpu:1 --global-batch 8 -o mlp.loomplan --quiet
expect_error "a token stream feeds a plan's one int64 input of shape [b, s] and its cross_entropy target" \
  loom_run mlp.loomplan --tokens tokens.bin --steps 1
