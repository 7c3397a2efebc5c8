#!/usr/bin/env bash
# Gradient accumulation over micro-batches (loomc --force micro=N or
# --micro-batch b, loom-unroll-micro-batches): the small GPT-2 as 4
# micro-batches on 1 rank, dp=2 x 4 micro-batches, dp=2 x tp=2 x 2, ZeRO-2
# and ZeRO-3 over dp=2 x 2, and --micro-batch 1 on 2 ranks; BERT (whose
# exported token-type constant is split over dp and micro) as dp=2 x 2; 10
# AdamW steps each, against the same model on 1 rank without micro-batches:
# losses within 1e-5 relative, exported weights' updates within 1e-4 in
# relative L2 (compare.py --initial), the tolerances of sharding_parity.sh,
# whose sensitivity measurement (1e-7-perturbed weights and data, 2
# threads) is repeated here. Plans and summaries say how many micro-batches
# they run, and micro-batches shrink the arena.
source "$(dirname "$0")/lib.sh"

opts=(--global-batch 8 --optimizer adamw --lr 1e-3)
declare -A SPECS=(
  [gpt2]="micro=4:1 dp=2,micro=4:2 dp=2,tp=2,micro=2:4 zero=2,micro=2:2 zero=3,micro=2:2"
  [bert]="dp=2,micro=2:2")
declare -A ZERO_GRAD=(
  [gpt2]="transformer.h.*.attn.c_attn.bias[128:256]"
  [bert]="bert.encoder.layer.*.attention.self.key.bias")
declare -A WEIGHT_RTOL=([gpt2]=1e-4 [bert]=1e-3)
for m in gpt2 bert; do
  mkdir -p $m && cd $m
  $PY "$MODELS/hf_models.py" --model $m --out . --batch 8 > /dev/null
  perturbed pert model.onnx config.json input_ids.npy target.npy
  loomc model.onnx --cluster cpu:1 "${opts[@]}" -o p1.loomplan --quiet \
    --summary-json s1.json
  run=(--data input_ids=input_ids.npy --data target=target.npy --steps 10 --quiet)
  reference_runs p1.loomplan "${run[@]}"
  for spec in ${SPECS[$m]}; do
    force=${spec%:*} n=${spec#*:}
    micro=${force#*micro=} micro=${micro%%,*}
    echo "$m --force $force:"
    loomc model.onnx --cluster cpu:$n --force $force "${opts[@]}" --verify-plan \
      -o mb.loomplan --summary-json mb.json --quiet
    # The summary and the plan's data buffers: `micro` micro-batches of
    # 8 / (dp * micro) samples, each its own buffer of every input.
    $PY -c "import json, sys
s = json.load(open('mb.json'))
dp = s['mesh']['dp']
want = {'num_micro_batches': $micro, 'micro_batch': 8 // (dp * $micro)}
got = {k: s[k] for k in want}
sys.exit(0 if got == want else 'summary %s, expected %s' % (got, want))" ||
      fail "$m --force $force: summary"
    inputs=$("$LOOM_BIN/loomc" model.onnx --cluster cpu:$n --force $force "${opts[@]}" \
      --dump-plan --plan-only | grep -c 'binding: "input_ids"' || true)
    [ "$inputs" -eq "$micro" ] || fail "$m --force $force: $inputs input_ids buffers, expected $micro"
    loom_run_np $n mb.loomplan "${run[@]}" --metrics mmb.jsonl --export-onnx tmb.onnx </dev/null
    memory_as_planned mmb.jsonl mb.json
    $PY "$MODELS/compare.py" --metrics mmb.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
      --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl
    $PY "$MODELS/compare.py" --onnx tmb.onnx --reference-weights t1.onnx --initial model.onnx \
      --rtol ${WEIGHT_RTOL[$m]} --zero-gradient "${ZERO_GRAD[$m]}" \
      --sensitivity pert/t1.onnx@pert/model.onnx --sensitivity t1-threads2.onnx
  done
  cd ..
done

# A micro-batch size gives the count: 1 sample a micro-batch on 2 ranks is 4
# micro-batches, and trains like the forced count.
cd gpt2
loomc model.onnx --cluster cpu:2 --micro-batch 1 "${opts[@]}" -o size.loomplan \
  --summary-json size.json --quiet
$PY -c "import json, sys
s = json.load(open('size.json'))
sys.exit(0 if (s['micro_batch'], s['num_micro_batches']) == (1, 4) else
         'micro_batch %s, num_micro_batches %s' % (s['micro_batch'], s['num_micro_batches']))" ||
  fail "--micro-batch 1: summary"
loom_run_np 2 size.loomplan "${run[@]}" --metrics msize.jsonl </dev/null
$PY "$MODELS/compare.py" --metrics msize.jsonl --metrics2 m1.jsonl --rtol 1e-5 \
  --sensitivity pert/m1.jsonl --sensitivity m1-threads2.jsonl

# One micro-batch's activations live at a time: on one rank, 4 micro-batches
# need less than half the activation memory of the whole batch.
loomc model.onnx --cluster cpu:1 --force micro=4 "${opts[@]}" -o m4.loomplan \
  --summary-json m4.json --quiet
$PY -c "import json, sys
act = lambda f: json.load(open(f))['predicted']['memory_breakdown_bytes_per_device']['activations']
a1, a4 = act('s1.json'), act('m4.json')
sys.exit(0 if 2 * a4 < a1 else 'activations %d with 4 micro-batches, %d without' % (a4, a1))" ||
  fail "micro=4: activation memory"
# ZeRO-3 gathers each weight for each pass of each micro-batch, so its
# micro-batches shrink the plan too (8.1 MiB a rank whole, 6.5 MiB in 4).
for f in zero=3 zero=3,micro=4; do
  loomc model.onnx --cluster cpu:2 --force $f "${opts[@]}" --plan-only --summary-json "z-$f.json" --quiet
done
$PY -c "import json, sys
peak = lambda f: max(json.load(open(f))['predicted']['peak_memory_bytes_per_device'])
whole, micro = peak('z-zero=3.json'), peak('z-zero=3,micro=4.json')
sys.exit(0 if micro < 0.9 * whole else 'ZeRO-3: %d bytes in 4 micro-batches, %d whole' % (micro, whole))" ||
  fail "zero=3,micro=4: memory"
cd ..

# Refused with one line: a micro-batch that does not divide a rank's share.
expect_error "a micro-batch of 3 sample(s) does not divide the 4 samples of each dp rank" \
  loomc gpt2/model.onnx --cluster cpu:2 --micro-batch 3 "${opts[@]}" -o bad.loomplan
echo "micro-batch parity: ok"
