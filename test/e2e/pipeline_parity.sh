#!/usr/bin/env bash
# Pipeline parallelism run (loom-split-stages, docs/planner.md "Pipeline
# stages"): the GPT-2 parity model with 4 layers as pp=2 (1F1B), pp=4,
# pp=2 x dp=2, pp=2 x tp=2, interleaved pp=2 with 2 chunks a device, ZB-H1
# pp=2, GPipe pp=2 and pp=2 x dp=2 with ZeRO-3, 10 AdamW steps on CPU ranks each, against the same
# model on 1 rank without stages: losses within 1e-5 relative, exported
# weights' updates within 3e-4 in relative L2 (compare.py --initial). The
# sensitivity measurement (1e-7-perturbed weights and data, 2 threads) is
# repeated here: the 4-layer reference's own updates move by 1.3e-5
# (measured), which 1e-4 could not tell from rounding. The tied embedding
# is read on the first and the last stage. Every plan also
# passes --verify-plan (the ranks as threads against the 1-rank plan), and
# the micro-batches each stage holds at once, counted by the runtime in the
# metrics, are those of its schedule in the summary. LLaMA runs as ZB-H1
# pp=2 against its own 1-rank run.
source "$(dirname "$0")/lib.sh"

$PY "$MODELS/hf_models.py" --model gpt2 --out . --batch 8 --layers 4 > /dev/null
perturbed pert model.onnx config.json input_ids.npy target.npy
opts=(--global-batch 8 --optimizer adamw --lr 1e-3)
loomc model.onnx --cluster cpu:1 "${opts[@]}" -o p1.loomplan --quiet
run=(--data input_ids=input_ids.npy --data target=target.npy --steps 10 --quiet)
reference_runs p1.loomplan "${run[@]}"

for spec in "pp=2,micro=4:2" "pp=4,micro=4:4" "pp=2,dp=2,micro=2:4" "pp=2,tp=2,micro=2:4" \
            "pp=2,micro=4,schedule=interleaved,virtual=2:2" "pp=2,micro=4,schedule=zb-h1:2" \
            "pp=2,micro=4,schedule=gpipe:2" "pp=2,dp=2,micro=2,zero=3:4"; do
  force=${spec%:*} n=${spec#*:}
  pp=${force#pp=} pp=${pp%%,*}
  echo "gpt2 --force $force:"
  loomc model.onnx --cluster cpu:$n --force $force "${opts[@]}" --verify-plan \
    -o pp.loomplan --summary-json pp.json --quiet
  # One program a pipeline device, each run by its dp x tp ranks.
  programs=$("$LOOM_BIN/loomc" model.onnx --cluster cpu:$n --force $force "${opts[@]}" \
    --dump-plan --plan-only | grep -c '^programs {' || true)
  [ "$programs" -eq "$pp" ] || fail "--force $force: $programs programs, expected $pp"
  loom_run_np $n pp.loomplan "${run[@]}" --metrics mpp.jsonl --export-onnx tpp.onnx </dev/null
  memory_as_planned mpp.jsonl pp.json
  # The micro-batches each stage held at once, as the runtime counted them,
  # are its schedule's (the summary's): p - d on device d for 1F1B, m for
  # GPipe; and the measured waits are a share of the step.
  $PY - "$force" <<'PY' || fail "--force $force: micro-batches in flight"
import json, sys
force = dict(kv.split('=') for kv in sys.argv[1].split(','))
pp, micro = int(force['pp']), int(force['micro'])
schedule = force.get('schedule', '1f1b')
summary = json.load(open('pp.json'))
assert summary['schedule'] == schedule and summary['num_micro_batches'] == micro, summary
planned = {}
for k, st in enumerate(summary['stages']):
    planned[k % pp] = st['micro_batches_in_flight']
planned = [planned[d] for d in range(pp)]
want = {'gpipe': [micro] * pp, '1f1b': [min(pp - d, micro) for d in range(pp)],
        'zb-h1': [pp] * pp}.get(schedule)
assert want is None or planned == want, (planned, want)
for line in open('mpp.jsonl'):
    m = json.loads(line)
    measured = [st['micro_batches_in_flight'] for st in m['stages']]
    assert measured == planned, ('step', m['step'], measured, planned)
    assert all(0 <= st['bubble_fraction'] < 1 for st in m['stages']), m
print('in flight:', planned)
PY
  $PY "$MODELS/compare.py" --metrics mpp.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
    --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl
  $PY "$MODELS/compare.py" --onnx tpp.onnx --reference-weights t1.onnx --initial model.onnx \
    --rtol 3e-4 --zero-gradient "transformer.h.*.attn.c_attn.bias[128:256]" \
    --sensitivity pert/t1.onnx@pert/model.onnx --sensitivity t1-threads2.onnx
done
# LLaMA (RMS norms, rotary positions, an untied head) as ZB-H1 pp=2.
mkdir -p llama && cd llama
$PY "$MODELS/hf_models.py" --model llama --out . --batch 8 > /dev/null
perturbed pert model.onnx config.json input_ids.npy target.npy
loomc model.onnx --cluster cpu:1 "${opts[@]}" -o p1.loomplan --quiet
reference_runs p1.loomplan "${run[@]}"
echo "llama --force pp=2,micro=4,schedule=zb-h1:"
loomc model.onnx --cluster cpu:2 --force pp=2,micro=4,schedule=zb-h1 "${opts[@]}" \
  --verify-plan -o pp.loomplan --quiet
loom_run_np 2 pp.loomplan "${run[@]}" --metrics mpp.jsonl --export-onnx tpp.onnx </dev/null
$PY "$MODELS/compare.py" --metrics mpp.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
  --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl
# Its reference's own updates move by 4e-5 (lm_head, perturbed): 1e-3.
$PY "$MODELS/compare.py" --onnx tpp.onnx --reference-weights t1.onnx --initial model.onnx \
  --rtol 1e-3 --sensitivity pert/t1.onnx@pert/model.onnx --sensitivity t1-threads2.onnx
cd ..
echo "pipeline parity: ok"
