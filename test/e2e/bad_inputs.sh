#!/usr/bin/env bash
# Acceptance 4: bad input ends with a one-line error saying what and where, a
# non-zero exit, and no core dump.
source "$(dirname "$0")/lib.sh"
ulimit -c unlimited 2>/dev/null || true

$PY "$MODELS/mlp.py" --out . --sizes 8,16,4 --samples 64 --seed 1
$PY "$MODELS/bad_inputs.py" --out bad --sizes 8,16,4 --samples 64

expect_error "cannot parse" loomc bad/truncated.onnx --cluster cpu:1 --global-batch 8 -o p.loomplan
expect_error "unsupported ONNX op 'Hardmax' (opset 17) at node 'n3'" \
  loomc bad/unknown_op.onnx --cluster cpu:1 --global-batch 8 -o p.loomplan
expect_error "no such file" loomc missing.onnx --global-batch 8 -o p.loomplan
expect_error "not divisible by dp = 3" loomc model.onnx --cluster cpu:3 --global-batch 8 -o p.loomplan
expect_error "bad cluster spec" loomc model.onnx --cluster tpu:9 --global-batch 8 -o p.loomplan
expect_error "unknown --loss" loomc model.onnx --global-batch 8 --loss hinge -o p.loomplan

loomc model.onnx --cluster cpu:2 --global-batch 8 -o p2.loomplan --quiet
expect_error "x_wrong_shape.npy" loom_run_np 2 p2.loomplan --data x=bad/x_wrong_shape.npy \
  --data target=target.npy --steps 2
expect_error "not_npy.npy" loom_run_np 2 p2.loomplan --data x=bad/not_npy.npy \
  --data target=target.npy --steps 2
expect_error "plan is for 2 rank(s) but 3 were launched; run with mpirun -np 2" loom_run_np 3 p2.loomplan \
  --data x=x.npy --data target=target.npy --steps 2
expect_error "target" loom_run_np 2 p2.loomplan --data x=x.npy --steps 2
expect_error "cannot open plan" loom_run missing.loomplan --data x=x.npy --steps 1
head -c 100 p2.loomplan > cut.loomplan
expect_error "cut.loomplan" loom_run cut.loomplan --data x=x.npy --data target=target.npy --steps 1
expect_error "unknown_op.onnx" loom_run --forward bad/unknown_op.onnx --input x=x.npy --output-dir o
