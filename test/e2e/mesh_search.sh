#!/usr/bin/env bash
# loomc plans an ONNX model by itself: without a pinned mesh, its training
# step is read into the planner's table and the joint search chooses the
# mesh, micro-batches, schedule, ZeRO stage and recomputation; the plan of
# that choice is compiled once (docs/loomc.md, "How loomc plans"), and checked
# against the 1-rank run by --verify-plan (2 steps, 1e-5).
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/hf_models.py" --model gpt2 --out . --batch 8 > /dev/null
opts=(--global-batch 8 --optimizer adamw --lr 1e-3)
loomc model.onnx --cluster cpu:4 "${opts[@]}" --explain --verify-plan \
  -o s.loomplan --summary-json s.json | tee search.txt
$PY - <<'PY'
import json
s = json.load(open("s.json"))
chosen, alts = s["search"]["chosen"], s["alternatives"]
# The compiled plan is the search's choice, the fastest of every mesh's best.
assert s["mesh"] == chosen["mesh"], (s["mesh"], chosen["mesh"])
assert s["zero_stage"] == chosen["zero_stage"], (s["zero_stage"], chosen)
assert chosen == alts[0] and all(a["step_time_s"] >= chosen["step_time_s"] for a in alts)
assert len({(a["mesh"]["dp"], a["mesh"]["tp"], a["mesh"]["pp"]) for a in alts}) == len(alts)
assert s["search"]["candidates"] >= s["search"]["feasible"] > 0, s["search"]
assert s["binding_constraint"].startswith("none"), s["binding_constraint"]
# The search's model and the compiled plan's estimate agree within a third.
r = chosen["step_time_s"] / s["predicted"]["step_time_s"]
assert 0.75 <= r <= 1.33, r
print("chose", chosen["mesh"], "zero", chosen["zero_stage"], "search/compiled %.3f" % r)
PY
grep -q "^  why         mesh dp=" search.txt || fail "--explain names no reason for the mesh"
grep -q "verify-plan: 2 steps on 4 CPU ranks match" search.txt || fail "the chosen plan was not verified"
loom_run_np 4 s.loomplan --data input_ids=input_ids.npy --data target=target.npy \
  --steps 3 --quiet --metrics m.jsonl

# Pins that leave the mesh free narrow the search; a pinned mesh is not searched.
loomc model.onnx --cluster cpu:4 "${opts[@]}" --force zero=0,micro=2 --plan-only \
  --summary-json z.json --quiet
$PY - <<'PY'
import json
c = json.load(open("z.json"))["search"]["chosen"]
assert c["zero_stage"] == 0 and c["num_micro_batches"] == 2, c
PY
loomc model.onnx --cluster cpu:4 "${opts[@]}" --force tp=2 --plan-only --explain > pinned.txt
grep -q "search      none: --force pins the mesh" pinned.txt || { cat pinned.txt; fail "a pinned mesh was searched"; }
grep -q "mesh        pp=1 dp=2 tp=2" pinned.txt || { cat pinned.txt; fail "tp=2 was not the mesh"; }

# No plan fits: the search says why, and the data-parallel plan's refusal ends it.
echo '{"nodes": 1, "devices_per_node": 4, "device": {"name": "tiny", "memory_gib": 0.001, "peak_tflops": {"fp32": 1, "bf16": 1}}, "intra_node": {"bandwidth_gbps": 1}}' > tiny.json
expect_error_code 3 "the plan needs" loomc model.onnx --cluster tiny.json "${opts[@]}" --plan-only
expect_error "--search-seconds must be positive" \
  loomc model.onnx --cluster cpu:4 "${opts[@]}" --plan-only --search-seconds 0

# The joint search's memory model against the compiler's proven memory for
# the same model (this GPT-2's shape) and choices: within -5% and +20%, the
# model erring on the side of more (docs/planner.md, "Joint search").
for f in dp=2,zero=0 dp=2,zero=1 dp=2,zero=3 tp=2 tp=2,remat=full dp=2,zero=0,remat=selective; do
  loomc --model-spec gpt:l=2,h=128,a=4,s=64,v=512 --cluster cpu:2 --global-batch 8 \
    --force $f,micro=1 --summary-json spec.json --quiet
  loomc model.onnx --cluster cpu:2 "${opts[@]}" --force $f,micro=1 --summary-json onnx.json \
    --plan-only --quiet
  $PY - "$f" <<'PY'
import json, sys
spec = json.load(open("spec.json"))["plan"]["peak_memory_bytes_per_device"]
onnx = max(json.load(open("onnx.json"))["predicted"]["peak_memory_bytes_per_device"])
r = spec / onnx
print("%s: model %d, compiler %d bytes (%+.1f%%)" % (sys.argv[1], spec, onnx, 100 * (r - 1)))
assert 0.95 <= r <= 1.20, r
PY
done
