#!/usr/bin/env bash
# loomc --model-spec -o: a transformer given by its shape is built as the
# model an exported Hugging Face GPT-2 (or LLaMA) of that shape imports to, planned by
# the default search and compiled once; `loom-run --init random:SEED` trains
# it. Its losses equal those of the exported GPT-2 of the same shape planned
# --no-weights (same parameter names, so the same initial values), and its
# plan on 2 ranks trains like its 1-rank plan within 1e-5 (docs/loomc.md,
# "Planning by shape").
source "$(dirname "$0")/lib.sh"

# test/models/hf_models.py's GPT-2: 2 layers, width 128, 4 heads, 64 tokens,
# 512 symbols.
$PY "$MODELS/hf_models.py" --model gpt2 --out . --batch 8 > /dev/null
spec=gpt:l=2,h=128,a=4,s=64,v=512
opts=(--global-batch 8 --optimizer adamw --lr 1e-3)
loomc --model-spec $spec --cluster cpu:1 "${opts[@]}" -o spec1.loomplan --quiet
loomc --model-spec $spec --cluster cpu:2 "${opts[@]}" -o spec2.loomplan \
  --summary-json spec2.json --verify-plan | tee spec2.txt
grep -q "verify-plan: 2 steps on 2 CPU ranks match" spec2.txt || fail "the model-spec plan was not verified"
grep -q "^  chosen      dp=" spec2.txt || fail "the model-spec plan names no search choice"
loomc model.onnx --no-weights --cluster cpu:1 "${opts[@]}" -o onnx1.loomplan --quiet
# One summary schema: the plan-only search's JSON has the fields of the
# compiled plan's that a search can know, with the same values.
loomc --model-spec $spec --cluster cpu:2 "${opts[@]}" --summary-json spec2-search.json --quiet
$PY - <<'PY'
import json
a, b = json.load(open("spec2-search.json")), json.load(open("spec2.json"))
shared = ["mesh", "micro_batch", "num_micro_batches", "schedule", "zero_stage", "remat",
          "precision", "world_size", "global_batch", "cluster", "device_memory_bytes",
          "device_usable_memory_bytes", "planning_time_s", "num_parameters"]
missing = [k for k in shared if k not in a or k not in b]
assert not missing, missing
same = [k for k in shared if k not in ("planning_time_s", "num_parameters")]
assert all(a[k] == b[k] for k in same), [(k, a[k], b[k]) for k in same if a[k] != b[k]]
for s in (a, b):
    assert s["predicted"]["step_time_s"] > 0 and s["predicted"]["basis"] == "datasheet", s
print("one schema:", {k: a[k] for k in ("mesh", "micro_batch", "zero_stage", "remat")})
PY

DATA=(--data input_ids=input_ids.npy --data target=target.npy --steps 5 --quiet --init random:7)
loom_run spec1.loomplan "${DATA[@]}" --metrics spec1.jsonl
loom_run onnx1.loomplan "${DATA[@]}" --metrics onnx1.jsonl
loom_run_np 2 spec2.loomplan "${DATA[@]}" --metrics spec2.jsonl
LOOM_NUM_THREADS=2 loom_run spec1.loomplan "${DATA[@]}" --metrics spec1-threads2.jsonl
# The same step as the export's, op for op (the norms' epsilon and the
# attention's scale rounded to f32 as the export stores them): bit for bit.
$PY "$MODELS/compare.py" --metrics spec1.jsonl --metrics2 onnx1.jsonl --rtol 0
$PY "$MODELS/compare.py" --metrics spec2.jsonl --metrics2 spec1.jsonl --rtol 1e-5 \
  --sensitivity spec1-threads2.jsonl

# A LLaMA shape is built as the model an exported Hugging Face LLaMA of
# that shape imports to (test/models/hf_models.py's: 2 layers, width 128, 4
# heads over 2 key-value heads, MLP 344, 64 tokens, 512 symbols): bit for
# bit the export's step, and its 2-rank plan verified against its 1-rank.
$PY "$MODELS/hf_models.py" --model llama --out llama --batch 8 > /dev/null
llama=gpt:arch=llama,l=2,h=128,a=4,kv_heads=2,ffn=344,s=64,v=512
loomc --model-spec $llama --cluster cpu:1 "${opts[@]}" -o llama1.loomplan --quiet
loomc llama/model.onnx --no-weights --cluster cpu:1 "${opts[@]}" -o llama-onnx1.loomplan --quiet
LDATA=(--data input_ids=llama/input_ids.npy --data target=llama/target.npy --steps 5 --quiet --init random:7)
loom_run llama1.loomplan "${LDATA[@]}" --metrics llama1.jsonl
loom_run llama-onnx1.loomplan "${LDATA[@]}" --metrics llama-onnx1.jsonl
$PY "$MODELS/compare.py" --metrics llama1.jsonl --metrics2 llama-onnx1.jsonl --rtol 0
loomc --model-spec $llama --cluster cpu:2 "${opts[@]}" -o llama2.loomplan --verify-plan | tee llama2.txt
grep -q "verify-plan: 2 steps on 2 CPU ranks match" llama2.txt || fail "the LLaMA spec's plan was not verified"
expect_error "the head dimension 5 is odd; rotary embeddings rotate pairs" \
  loomc --model-spec gpt:arch=llama,l=2,h=20,a=4,s=16,v=128 --global-batch 8 -o l.loomplan
expect_error "--model-spec builds a training step: give --global-batch" \
  loomc --model-spec $spec -o x.loomplan
