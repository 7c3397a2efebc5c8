#!/usr/bin/env bash
# Activation recomputation (loom-choose-recompute, loom-recompute;
# docs/planner.md "Recomputation") on the GPT-2 parity model with 4 layers:
# - `--force remat=selective` and `full` shrink the arena; their losses over
#   10 AdamW steps equal the plan without recomputation bit for bit (the
#   clones run the same kernels on the same inputs);
# - with the device memory set half-way between the peaks without and with
#   full recomputation (and one micro-batch, so that recomputation, not
#   micro-batches, must make it fit), loomc chooses by itself: the plan fits
#   that memory, recomputes less time than full recomputation, and trains
#   bit for bit like the plan without;
# - with micro-batches free too, loomc keeps the faster of the two ways;
# - under dp=2, tp=2 (selective and full, where the backward also gathers
#   the sequence-parallel norms' outputs again), dp=2 with ZeRO-3 and as
#   pipeline stages (pp=2, 1F1B, each stage choosing for its own program),
#   recomputed plans match the 1-rank run within 1e-5
#   (the sensitivity of the reference is measured as in pipeline_parity.sh);
# - LLaMA's recomputed plans train bit for bit like its plan without;
# - every run's measured memory is its planned arena plus its kernels'
#   workspace, taken at start-up (memory_as_planned, lib.sh).
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/hf_models.py" --model gpt2 --out . --batch 8 --layers 4 > /dev/null
perturbed pert model.onnx config.json input_ids.npy target.npy
opts=(--global-batch 8 --optimizer adamw --lr 1e-3)
run=(--data input_ids=input_ids.npy --data target=target.npy --steps 10 --quiet)

for mode in none selective full; do
  loomc model.onnx --cluster cpu:1 "${opts[@]}" --force remat=$mode \
    -o $mode.loomplan --summary-json $mode.json --quiet
  loom_run $mode.loomplan "${run[@]}" --metrics m-$mode.jsonl
  memory_as_planned m-$mode.jsonl $mode.json
done
$PY - <<'PY' || fail "recomputation's memory figures"
import json
s = {m: json.load(open(m + '.json')) for m in ('none', 'selective', 'full')}
peak = {m: s[m]['predicted']['peak_memory_bytes_per_device'][0] for m in s}
assert peak['full'] < peak['selective'] < peak['none'], peak
for m in ('selective', 'full'):
    r = s[m]['recompute']
    assert s[m]['remat'] == m and r['layers'] == 4, s[m]
    assert r[m + '_layers'] == 4 and r['predicted_time_s'] > 0, r
assert (s['selective']['recompute']['predicted_time_s']
        < s['full']['recompute']['predicted_time_s'])
for m in s:  # the placement's share above the live-set bound
    live = s[m]['predicted']['live_set_bytes']
    assert live <= peak[m] <= 1.05 * live, (m, live, peak[m])
print('peaks:', peak)
PY
for mode in selective full; do
  $PY "$MODELS/compare.py" --metrics m-$mode.jsonl --metrics2 m-none.jsonl --rtol 0
done

# A device between the two peaks: loomc recomputes just enough.
$PY - <<'PY' > cluster.json
import json
s = {m: json.load(open(m + '.json')) for m in ('none', 'full')}
peak = {m: s[m]['predicted']['peak_memory_bytes_per_device'][0] for m in s}
print(json.dumps({'nodes': 1, 'devices_per_node': 1,
                  'device': {'name': 'cpu', 'memory_gib': (peak['none'] + peak['full']) / 2 / 2**30,
                             'peak_tflops': {'fp32': 0.05, 'bf16': 0.05}, 'hbm_gbps': 10},
                  'intra_node': {'bandwidth_gbps': 5, 'latency_us': 5}}))
PY
loomc model.onnx --cluster cluster.json "${opts[@]}" --force micro=1 \
  -o auto.loomplan --summary-json auto.json --quiet
loom_run auto.loomplan "${run[@]}" --metrics m-auto.jsonl
memory_as_planned m-auto.jsonl auto.json
$PY - <<'PY' || fail "the recomputation chosen for a device between the peaks"
import json
auto, full = json.load(open('auto.json')), json.load(open('full.json'))
r = auto['recompute']
assert auto['remat'] == 'auto' and r['full_layers'] + r['selective_layers'] > 0, auto
assert auto['predicted']['peak_memory_bytes_per_device'][0] <= auto['device_memory_bytes'], auto
assert r['predicted_time_s'] <= full['recompute']['predicted_time_s'], (r, full['recompute'])
print('auto:', r)
PY
$PY "$MODELS/compare.py" --metrics m-auto.jsonl --metrics2 m-none.jsonl --rtol 0

# A device just below the peak without recomputation, micro-batches free:
# loomc weighs 2 micro-batches against recomputing, and keeps the plan of
# shorter predicted step.
$PY - <<'PY' > cluster2.json
import json
c = json.load(open('cluster.json'))
c['device']['memory_gib'] = json.load(open('none.json'))['predicted']['peak_memory_bytes_per_device'][0] * 0.97 / 2**30
print(json.dumps(c))
PY
loomc model.onnx --cluster cluster2.json "${opts[@]}" --plan-only --summary-json w.json --quiet
loomc model.onnx --cluster cluster2.json "${opts[@]}" --force micro=2 --plan-only \
  --summary-json w-micro.json --quiet
loomc model.onnx --cluster cluster2.json "${opts[@]}" --force micro=1,remat=auto --plan-only \
  --summary-json w-remat.json --quiet
$PY - <<'PY' || fail "micro-batches weighed against recomputation"
import json
w, m, r = (json.load(open(f + '.json')) for f in ('w', 'w-micro', 'w-remat'))
t = lambda s: s['predicted']['step_time_s']
best = min((m, r), key=t)
assert (w['num_micro_batches'], w['remat']) == (best['num_micro_batches'], best['remat']), (w, best)
print('weighed: %d micro-batch(es), remat %s, %.4g s (micro-batches %.4g s, recomputation %.4g s)'
      % (w['num_micro_batches'], w['remat'], t(w), t(m), t(r)))
PY

# Every plan shape: data parallel with selective, pipeline stages with full
# (each pp device recomputes its own layers), against the 1-rank reference.
loomc model.onnx --cluster cpu:1 "${opts[@]}" -o p1.loomplan --quiet
reference_runs p1.loomplan "${run[@]}"
for spec in "dp=2,remat=selective:2" "tp=2,remat=selective:2" "tp=2,remat=full:2" \
            "dp=2,zero=3,remat=full:2" \
            "pp=2,micro=4,remat=full:2"; do
  force=${spec%:*} n=${spec#*:}
  echo "gpt2 --force $force:"
  loomc model.onnx --cluster cpu:$n --force $force "${opts[@]}" --verify-plan \
    -o r.loomplan --summary-json r.json --quiet
  $PY -c "import json,sys; r = json.load(open('r.json'))['recompute']; \
sys.exit(0 if r['full_layers'] + r['selective_layers'] > 0 else 1)" \
    || fail "--force $force recomputed nothing"
  loom_run_np $n r.loomplan "${run[@]}" --metrics mr.jsonl </dev/null
  memory_as_planned mr.jsonl r.json
  $PY "$MODELS/compare.py" --metrics mr.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
    --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl
done
# LLaMA (RMS norms, rotary positions, SwiGLU): both modes train bit for bit
# like its plan without recomputation.
mkdir -p llama && cd llama
$PY "$MODELS/hf_models.py" --model llama --out . --batch 8 > /dev/null
for mode in none selective full; do
  loomc model.onnx --cluster cpu:1 "${opts[@]}" --force remat=$mode -o $mode.loomplan \
    --summary-json $mode.json --quiet
  loom_run $mode.loomplan "${run[@]}" --metrics m-$mode.jsonl
  memory_as_planned m-$mode.jsonl $mode.json
done
$PY - <<'PY' || fail "LLaMA's recomputation"
import json
peak = {m: json.load(open(m + '.json'))['predicted']['peak_memory_bytes_per_device'][0]
        for m in ('none', 'selective', 'full')}
assert peak['full'] < peak['selective'] < peak['none'], peak
print('llama peaks:', peak)
PY
for mode in selective full; do
  $PY "$MODELS/compare.py" --metrics m-$mode.jsonl --metrics2 m-none.jsonl --rtol 0
done
cd ..
echo "recompute parity: ok"
