#!/usr/bin/env bash
# This machine's curves: loom-run --profile measures them on 2 ranks, and
# loomc --calibration plans with them (docs/cluster-spec.md, "Calibration").
source "$(dirname "$0")/lib.sh"

export LOOM_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
"${MPIRUN[@]}" -np 2 "$LOOM_BIN/loom-run" --profile cal.json | tee profile.txt
grep -q "profile: 2 rank(s), 1 thread(s) each: products up to" profile.txt ||
  fail "no profile line"
$PY - <<'PY'
import json
c = json.load(open("cal.json"))
assert c["loom_calibration"] == 1 and c["ranks"] == 2, c
assert c["device"]["peak_tflops"]["fp32"] > 0 and c["device"]["hbm_gbps"] > 0, c
assert c["gemm"]["half_dim"] >= 0 and c["intra_node"]["bandwidth_gbps"] > 0, c
# Written, both, when products over operands out of cache measured slower.
g = c["gemm"]
assert ("operand_gbps" in g) == ("cache_mib" in g), c
assert g.get("operand_gbps", 1) > 0 and 4 <= g.get("cache_mib", 4) <= 128, c
assert len(c["measured"]["gemm_square"]) == 7 and len(c["measured"]["all_reduce"]) == 12, c
print("calibration:", c["device"], c["gemm"], c["intra_node"])
PY

$PY "$MODELS/mlp.py" --out . --sizes 64,256,10 --samples 64 --seed 1 > /dev/null
plan() { loomc model.onnx --cluster cpu:2 --global-batch 16 --summary-json "$1" \
  --plan-only --quiet "${@:2}"; }
plan datasheet.json
plan calibrated.json --calibration cal.json
plan spec.json --cluster "cpu:2@cal.json"
$PY - <<'PY'
import json
s = {f: json.load(open(f + ".json")) for f in ("datasheet", "calibrated", "spec")}
d, c = (s[f]["predicted"]["step_time_s"] for f in ("datasheet", "calibrated"))
assert d != c, (d, c)
assert s["spec"]["predicted"] == s["calibrated"]["predicted"]
print("predicted step: datasheet %.3g s, calibrated %.3g s" % (d, c))
PY
# The model spec planner reads it too.
loomc --model-spec gpt:l=2,h=64,a=4,s=16,v=128 --cluster cpu:2 --calibration cal.json \
  --global-batch 8 --quiet --summary-json ms.json

expect_error "measured with 2 rank(s) but 'cpu:4' has 4 a node" \
  loomc model.onnx --cluster cpu:4 --global-batch 16 --plan-only --calibration cal.json
echo '{"loom_calibration": 1}' > broken.json
expect_error "bad calibration file 'broken.json': missing or non-positive 'ranks'" \
  loomc model.onnx --cluster cpu:2 --global-batch 16 --plan-only --calibration broken.json
expect_error "--profile FILE takes --quiet only" "$LOOM_BIN/loom-run" --profile x.json p.loomplan
