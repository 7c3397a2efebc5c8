#!/usr/bin/env bash
# Pipeline stages as planned (loom-partition-stages, docs/planner.md
# "Pipeline stages"): the GPT-2 parity model (2 layers) cut into 2 stages of
# one layer each under every schedule, the stage of the embedding's and the
# head's updates, and the one-line refusal of more stages than layers.
# pipeline_parity.sh runs the stages.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/hf_models.py" --model gpt2 --out . --batch 8 > /dev/null
opts=(--global-batch 8 --optimizer adamw --lr 1e-3)
for schedule in gpipe 1f1b zb-h1; do
  loomc model.onnx --cluster cpu:2 --force pp=2,micro=4,schedule=$schedule "${opts[@]}" \
    --emit=mlir-planned -o planned.mlir
  $PY - "$schedule" <<'PY' || fail "--force pp=2,schedule=$1: planned stages"
import re, sys
text = open('planned.mlir').read()
schedule = sys.argv[1]
pipeline = re.search(r'loom\.pipeline = \{(.*?)virtual_stages', text)
assert pipeline, 'no loom.pipeline on the mesh'
p = pipeline.group(1)
assert 'layers = [array<i64: 0, 0>, array<i64: 1, 1>]' in p, p
assert 'schedule = "%s"' % schedule in p, p
orders = re.search(r'order = \[(.*?)\]', p).group(1)
assert orders.count('"') == 4, orders  # one order a device
stages = re.findall(r'loom\.stage = (\d)', text)
assert set(stages) == {'0', '1'}, set(stages)
# The word embedding's update runs where the embedding is read first (stage
# 0), the final layer norm's on the last stage.
updates = re.findall(r'loom\.adamw [^\n]*loom\.stage = (\d)[^\n]*: tensor<(\d+x\d+|\d+)xf32>', text)
assert updates[0] == ('0', '512x128'), updates[0]
assert updates[-1][0] == '1', updates[-1]
PY
done
loomc model.onnx --cluster cpu:4 --force pp=2,micro=4,schedule=interleaved,virtual=2 "${opts[@]}" \
  --emit=mlir-planned -o interleaved.mlir 2> err.txt && fail "interleaved on 2 layers: expected a refusal"
grep -q "needs at least 4 stages' worth of layers: the op names show 2 numbered layers" err.txt ||
  { cat err.txt; fail "interleaved on 2 layers: wrong error"; }
# Without a micro-batch count, the fewest that keep 1F1B's waits at a fifth
# of the step: 1 + 1/m <= 1.25 on 2 devices, m = 4 of the 8 samples.
loomc model.onnx --cluster cpu:2 --force pp=2 "${opts[@]}" --plan-only --quiet \
  --summary-json auto.json
$PY -c "import json, sys
s = json.load(open('auto.json'))
sys.exit(0 if s['num_micro_batches'] == 4 else 'chose %d micro-batches' % s['num_micro_batches'])" ||
  fail "--force pp=2: default micro-batches"
echo "pipeline plan: ok"
