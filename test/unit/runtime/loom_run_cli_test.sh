#!/usr/bin/env bash
# loom-run end to end under mpirun: a 2-rank run, its agreement with 1 rank,
# and errors that must exit 1 with one message (never hang or crash).
# usage: loom_run_cli_test.sh LOOM_RUN SMOKE_BIN WORKDIR MPIRUN
set -u
LOOM_RUN=$1 SMOKE=$2 DIR=$3 MPIRUN=$4
MPI="$MPIRUN --allow-run-as-root --oversubscribe"
rm -rf "$DIR" && mkdir -p "$DIR" && cd "$DIR" || exit 1
"$SMOKE" --write "$DIR" || { echo "FAIL: cannot write test files"; exit 1; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error NP EXPECTED_TEXT ARGS...: exit code 1, exactly one error line.
expect_error() {
  local np=$1 text=$2; shift 2
  timeout 60 $MPI -np "$np" "$LOOM_RUN" "$@" >out.txt 2>err.txt
  local rc=$?
  local n; n=$(grep -c "^loom-run: error: " err.txt)
  if [ "$rc" -eq 124 ]; then fail "hang: $*"; return; fi
  # mpirun reports a non-zero rank status as its own exit code.
  if [ "$rc" -eq 0 ]; then fail "exit 0 for: $*"; fi
  if [ "$n" -ne 1 ]; then fail "expected 1 error line, got $n for: $*"; cat err.txt; fi
  grep -q -- "$text" err.txt || { fail "missing '$text' for: $*"; cat err.txt; }
  grep -qE "core dumped|Segmentation|signal [0-9]+|MPI_ABORT|terminate called" err.txt && fail "crash for: $*"
}

DATA=(--data x=x.npy --data target=y.npy)

timeout 120 $MPI -np 2 "$LOOM_RUN" dp2.loomplan "${DATA[@]}" --steps 5 \
  --metrics m2.jsonl >run2.txt 2>&1 || { fail "2-rank run failed"; cat run2.txt; }
timeout 60 "$LOOM_RUN" dp1.loomplan "${DATA[@]}" --steps 5 --metrics m1.jsonl \
  >run1.txt 2>&1 || { fail "1-rank run failed"; cat run1.txt; }
cat run2.txt
grep -q "world size 2, mesh dp=2" run2.txt || fail "no header line"
grep -q "^step 5/5  loss " run2.txt || fail "no step line"
grep -q "^done: 5 steps" run2.txt || fail "no final line"
[ "$(grep -c '^step ' run2.txt)" -eq 5 ] || fail "steps printed more than once"
[ "$(wc -l <m2.jsonl)" -eq 5 ] || fail "metrics should have 5 lines"
# The 2-rank losses equal the 1-rank losses to ~6 digits.
l2=$(sed -n 's/.*"loss":\([^,]*\).*/\1/p' m2.jsonl | cut -c1-7)
l1=$(sed -n 's/.*"loss":\([^,]*\).*/\1/p' m1.jsonl | cut -c1-7)
[ "$l1" = "$l2" ] || fail "losses differ: 1 rank [$l1] vs 2 ranks [$l2]"

expect_error 1 "plan is for 2 rank(s) but 1 were launched; run with mpirun -np 2" \
  dp2.loomplan "${DATA[@]}" --steps 1
expect_error 2 "no data for 'target'" dp2.loomplan --data x=x.npy --steps 1
expect_error 2 "not an input or target of the plan" dp2.loomplan "${DATA[@]}" \
  --data w=x.npy --steps 1
expect_error 2 "data for 'x' has shape \[10, 4\]" dp2.loomplan --data x=bad_x.npy \
  --data target=y.npy --steps 1
expect_error 2 "cannot open 'missing.npy'" dp2.loomplan --data x=missing.npy \
  --data target=y.npy --steps 1
expect_error 2 "cannot open plan 'nope.loomplan'" nope.loomplan "${DATA[@]}" --steps 1
expect_error 2 "missing --steps" dp2.loomplan "${DATA[@]}"

# --forward with a stand-in loomc that records its arguments and emits a
# prepared forward plan; then one that fails.
cat >fake-loomc <<FAKE
#!/usr/bin/env bash
echo "\$@" >"$DIR/loomc-args.txt"
while [ \$# -gt 0 ]; do [ "\$1" = -o ] && cp "$DIR/forward.loomplan" "\$2"; shift; done
FAKE
chmod +x fake-loomc
LOOMC=$DIR/fake-loomc timeout 60 "$LOOM_RUN" --forward m.onnx --input x=fx.npy \
  --output-dir out/sub >fwd.txt 2>&1 || { fail "--forward failed"; cat fwd.txt; }
grep -q -- "m.onnx --forward-only --input-shape x=3x2 -o " loomc-args.txt \
  || { fail "loomc arguments"; cat loomc-args.txt; }
[ -f out/sub/y.npy ] || fail "--forward wrote no out/sub/y.npy"
# y = [1*2-2, 3*2-4, 5*2-6] = [0, 2, 4] as float32 at the end of the file.
[ "$(tail -c 12 out/sub/y.npy | od -An -tf4 | xargs)" = "0 2 4" ] \
  || fail "--forward output values"
printf '#!/usr/bin/env bash\necho "m.onnx:3: error: unsupported op Foo" >&2\nexit 3\n' >bad-loomc
chmod +x bad-loomc
LOOMC=$DIR/bad-loomc "$LOOM_RUN" --forward m.onnx --input x=fx.npy \
  --output-dir out2 >fwd2.txt 2>&1
[ $? -eq 1 ] || fail "failing loomc must give exit 1"
[ "$(cat fwd2.txt)" = "loom-run: error: cannot compile 'm.onnx' for --forward: unsupported op Foo" ] \
  || { fail "loomc failure must be one line carrying its message"; cat fwd2.txt; }
printf '#!/usr/bin/env bash\nexit 3\n' >mute-loomc
chmod +x mute-loomc
LOOMC=$DIR/mute-loomc "$LOOM_RUN" --forward m.onnx --input x=fx.npy \
  --output-dir out3 >fwd3.txt 2>&1
grep -q "^loom-run: error: cannot compile 'm.onnx' for --forward: exit code 3$" fwd3.txt \
  || { fail "silent loomc failure message"; cat fwd3.txt; }

timeout 30 "$LOOM_RUN" --help | grep -q -- "--export-onnx" || fail "--help"

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "loom-run CLI: all checks passed"
