#!/usr/bin/env bash
# Acceptance 3: the demo trains on 4 CPU ranks, prints the plan and a falling
# loss, in under two minutes (the ctest TIMEOUT).
source "$(dirname "$0")/lib.sh"
bash "$LOOM_SRC/examples/demo.sh" "$(dirname "$LOOM_BIN")" "$WORK" | tee demo.log
grep -q "mesh        pp=1 dp=4 tp=1" demo.log || fail "the demo did not print the plan"
$PY - <<'PY'
import json
losses = [json.loads(l)["loss"] for l in open("metrics.jsonl")]
first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
assert last < 0.6 * first, (first, last)
print("ok: demo loss %.3f -> %.3f over %d steps" % (first, last, len(losses)))
PY
grep -q "held-out cross-entropy" demo.log || fail "the demo did not evaluate the trained model"
