#!/usr/bin/env bash
# Acceptance 4: bad input ends with a one-line error saying what and where, a
# non-zero exit, and no core dump.
source "$(dirname "$0")/lib.sh"
ulimit -c unlimited 2>/dev/null || true

$PY "$MODELS/mlp.py" --out . --sizes 8,16,4 --samples 64 --seed 1
$PY "$MODELS/bad_inputs.py" --out bad --sizes 8,16,4 --samples 64

expect_error "cannot parse" loomc bad/truncated.onnx --cluster cpu:1 --global-batch 8 -o p.loomplan
# A model Loom does not support yet exits 2 (docs/loomc.md, "Exit codes").
expect_error_code 2 "unsupported ONNX op 'Hardmax' (opset 17) at node 'n3'" \
  loomc bad/unknown_op.onnx --cluster cpu:1 --global-batch 8 -o p.loomplan
# A node name of a megabyte is cut in the one error line.
expect_error_code 2 "unsupported ONNX op 'Hardmax' (opset 17) at node 'nnnn" \
  loomc bad/long_name.onnx --cluster cpu:1 --global-batch 8 -o p.loomplan
grep -qF "...(1048576 bytes)'" err.txt || fail "the long node name is not cut"
[ "$(wc -c < err.txt)" -lt 1000 ] || fail "the long node name's error is $(wc -c < err.txt) bytes"
expect_error "cannot expand to [-1, 2, 8] at node 'expand0': Expand's sizes are at least 0" \
  loomc bad/expand_negative.onnx --cluster cpu:1 --global-batch 2 --loss mse -o p.loomplan
expect_error "no such file" loomc missing.onnx --global-batch 8 -o p.loomplan
expect_error "not divisible by dp = 3" loomc model.onnx --cluster cpu:3 --global-batch 8 -o p.loomplan
expect_error "bad cluster spec" loomc model.onnx --cluster tpu:9 --global-batch 8 -o p.loomplan
expect_error "does not divide the 2 device(s)" loomc model.onnx --cluster cpu:2 --force tp=3 --global-batch 8 -o p.loomplan
expect_error "ZeRO stage 2 splits over dp, which is 1" loomc model.onnx --cluster cpu:1 --force zero=2 --global-batch 8 -o p.loomplan
expect_error "ZeRO stages are 0 to 3" loomc model.onnx --cluster cpu:2 --force zero=4 --global-batch 8 -o p.loomplan
expect_error "unknown --loss" loomc model.onnx --global-batch 8 --loss hinge -o p.loomplan
expect_error "bad --force item 'tp=0': must be at least 1" \
  loomc model.onnx --cluster cpu:2 --global-batch 8 --force tp=0 -o p.loomplan
expect_error "bad --force item 'dp=0': must be at least 1" \
  loomc model.onnx --cluster cpu:2 --global-batch 8 --force dp=0 -o p.loomplan
expect_error "bad --force item 'schedule=zb': expected gpipe, 1f1b, interleaved or zb-h1" \
  loomc model.onnx --cluster cpu:2 --global-batch 8 --force pp=2,schedule=zb -o p.loomplan
expect_error "schedule and virtual order pipeline stages; give pp=N" \
  loomc model.onnx --cluster cpu:2 --global-batch 8 --force schedule=gpipe -o p.loomplan
expect_error "--global-batch must be positive, got 0" \
  loomc model.onnx --cluster cpu:2 --global-batch 0 -o p.loomplan
expect_error "--micro-batch must be positive, got 0" \
  loomc model.onnx --cluster cpu:2 --global-batch 8 --micro-batch 0 -o p.loomplan
expect_error "--global-batch expects a whole number, got '1e3'" \
  loomc model.onnx --cluster cpu:2 --global-batch 1e3 -o p.loomplan
expect_error "--lr expects a number, got 'fast'" \
  loomc model.onnx --cluster cpu:2 --global-batch 8 --lr=fast -o p.loomplan
expect_error "--lr must be a non-negative number" loomc model.onnx --global-batch 8 --lr nan -o p.loomplan
expect_error "--weight-decay must be a non-negative number" \
  loomc model.onnx --global-batch 8 --weight-decay=-0.5 -o p.loomplan
expect_error "--momentum applies to --optimizer sgd only" \
  loomc model.onnx --global-batch 8 --momentum 0.9 -o p.loomplan
echo '{"nodes": 100000, "devices_per_node": 100000, "device": {"memory_gib": 80, "peak_tflops": {"fp32": 1, "bf16": 1}}, "intra_node": {"bandwidth_gbps": 1}, "inter_node": {"bandwidth_gbps": 1}}' > huge-cluster.json
expect_error "at most 2147483647" loomc model.onnx --cluster huge-cluster.json --global-batch 8 -o p.loomplan
expect_error "too large to address" loomc model.onnx --global-batch 4611686018427387904 -o p.loomplan
# A plan that does not fit exits 3: the default plan (the search, and the
# compile it chose) and a pinned mesh alike.
echo '{"nodes": 1, "devices_per_node": 2, "device": {"memory_gib": 0.00001, "peak_tflops": {"fp32": 1, "bf16": 1}, "hbm_gbps": 1}, "intra_node": {"bandwidth_gbps": 1}}' > small-cluster.json
expect_error_code 3 "per device" loomc model.onnx --cluster small-cluster.json --global-batch 8 -o p.loomplan
expect_error_code 3 "use more devices or a smaller batch" \
  loomc model.onnx --cluster small-cluster.json --global-batch 8 --force dp=2 -o p.loomplan
expect_error_code 3 "fits" loomc --model-spec gpt:l=2,h=64,a=4,s=16,v=128 \
  --cluster small-cluster.json --global-batch 8
$PY - <<'PY'
# A .npy header claiming 2^61 int64 values with no data behind it.
import struct
hdr = b"{'descr': '<i8', 'fortran_order': False, 'shape': (2305843009213693952,), }"
hdr += b" " * (63 - (10 + len(hdr)) % 64) + b"\n"
open("huge.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr)
PY

loomc model.onnx --cluster cpu:2 --global-batch 8 -o p2.loomplan --quiet
expect_error "x_wrong_shape.npy" loom_run_np 2 p2.loomplan --data x=bad/x_wrong_shape.npy \
  --data target=target.npy --steps 2
expect_error "not_npy.npy" loom_run_np 2 p2.loomplan --data x=bad/not_npy.npy \
  --data target=target.npy --steps 2
expect_error "plan is for 2 rank(s) but 3 were launched; run with mpirun -np 2" loom_run_np 3 p2.loomplan \
  --data x=x.npy --data target=target.npy --steps 2
expect_error "target" loom_run_np 2 p2.loomplan --data x=x.npy --steps 2
expect_error "huge.npy" loom_run_np 2 p2.loomplan --data x=x.npy --data target=huge.npy --steps 2
# Class ids equal to the class count, the first at sample 4: fed at step 1
# by rank 1 alone; rank 0 stops with it instead of waiting in the step's
# collectives.
expect_error "bad/target_out_of_range.npy: class id 4 at sample 4, element 0 is outside [0, 4)" \
  timeout 60 "${MPIRUN[@]}" -np 2 "$LOOM_BIN/loom-run" p2.loomplan --data x=x.npy \
  --data target=bad/target_out_of_range.npy --steps 2
grep -q "rank 1: " err.txt || fail "the class id error is not rank 1's"
# A stream that never ends is refused at once, not read: data files are
# mapped, so they must be regular files.
expect_error "'/dev/zero' is not a regular file" timeout 60 "${MPIRUN[@]}" -np 2 \
  "$LOOM_BIN/loom-run" p2.loomplan --data x=/dev/zero --data target=target.npy --steps 1
# Two runs exporting to one path at once leave one run's model whole, never
# a mix of both (each writes a temporary and renames it over the path).
loomc model.onnx --cluster cpu:1 --global-batch 8 --lr 0.5 -o fast.loomplan --quiet
loomc model.onnx --cluster cpu:1 --global-batch 8 -o slow.loomplan --quiet
run1=(--data x=x.npy --data target=target.npy --steps 3 --quiet)
loom_run fast.loomplan "${run1[@]}" --export-onnx fast.onnx
loom_run slow.loomplan "${run1[@]}" --export-onnx slow.onnx
for i in 1 2 3; do
  "$LOOM_BIN/loom-run" fast.loomplan "${run1[@]}" --export-onnx both.onnx &
  "$LOOM_BIN/loom-run" slow.loomplan "${run1[@]}" --export-onnx both.onnx
  wait
  cmp -s both.onnx fast.onnx || cmp -s both.onnx slow.onnx ||
    fail "two exports to one path mixed"
done
! ls both.onnx.tmp-* >/dev/null 2>&1 || fail "an export left its temporary"
expect_error "cannot open plan" loom_run missing.loomplan --data x=x.npy --steps 1
# A plan changed after loomc wrote it (one byte of a name: it still parses
# and validates).
$PY -c "
b = bytearray(open('p2.loomplan', 'rb').read()); b[b.find(b'fc1.weight')] ^= 1
open('edited.loomplan', 'wb').write(bytes(b))"
expect_error "edited.loomplan: the plan's checksum fnv1a64:" \
  loom_run edited.loomplan --data x=x.npy --data target=target.npy --steps 1
grep -qF "does not match its contents" err.txt || fail "the edited plan's error does not say why"
# The model beside a plan replaced after loomc read it: refused; --model
# takes that file's weights on purpose.
mkdir -p moved && $PY "$MODELS/mlp.py" --out moved --sizes 8,16,4 --samples 64 --seed 2
loomc moved/model.onnx --cluster cpu:1 --global-batch 8 -o moved/p.loomplan --quiet
$PY "$MODELS/mlp.py" --out moved --sizes 8,16,4 --samples 64 --seed 3
expect_error "moved/p.loomplan: its model '" \
  loom_run moved/p.loomplan --data x=x.npy --data target=target.npy --steps 1
grep -qF "changed after loomc compiled the plan" err.txt || fail "the changed model's error does not say why"
loom_run moved/p.loomplan --model moved/model.onnx --data x=x.npy \
  --data target=target.npy --steps 1 > /dev/null
# A string of invalid UTF-8 in a plan: protobuf's reason in the one line.
$PY -c "
b = open('p2.loomplan', 'rb').read(); i = b.find(b'fc1.weight')
open('utf.loomplan', 'wb').write(b[:i] + b'\\xff' + b[i + 1:])"
expect_error "utf.loomplan: not a valid .loomplan file (protobuf parse failed: String field 'loom.plan.Buffer.name' contains invalid UTF-8 data" \
  loom_run utf.loomplan --data x=x.npy --data target=target.npy --steps 1
head -c 100 p2.loomplan > cut.loomplan
expect_error "cut.loomplan" loom_run cut.loomplan --data x=x.npy --data target=target.npy --steps 1
expect_error "unknown_op.onnx" loom_run --forward bad/unknown_op.onnx --input x=x.npy --output-dir o
# Batch scripts (--emit-sbatch) run a written plan, and loom-elastic plans for presets.
expect_error "--emit-sbatch writes a script that runs the plan: give -o PLAN too" \
  loomc model.onnx --cluster cpu:2 --global-batch 8 --emit-sbatch job.sh --plan-only
expect_error "--sbatch-elastic shapes the script of --emit-sbatch FILE" \
  loomc model.onnx --cluster cpu:2 --global-batch 8 --sbatch-elastic -o p.loomplan
echo '{}' > c.json
expect_error "--sbatch-elastic runs loom-elastic, which plans for a preset" \
  loomc model.onnx --cluster c.json --global-batch 8 --emit-sbatch job.sh --sbatch-elastic
[ ! -e job.sh ] || fail "a refused --emit-sbatch wrote job.sh"
