#!/usr/bin/env bash
# loomc --emit-sbatch against a real Slurm (docs/elastic.md, "Slurm"): the
# test installs slurm-wlm and munge with scripts/install-deps.sh --slurm,
# starts munged, slurmctld and slurmd on this host (a one-node cluster of its
# own: private config, ports, sockets and state in the test's folder) and
# stops them when it ends. Then:
# - the script of a 2-rank GPT-2 plan, submitted with `sbatch --wait` and
#   loom-run's flags as its arguments, trains under srun: its losses equal
#   the same plan's under mpirun, bitwise;
# - submitted again with 6 more steps, it resumes from its checkpoint
#   (--resume added by the script) and continues the metrics file;
# - the --sbatch-elastic script runs loom-elastic on the allocation's 3
#   tasks: it plans for 3 and trains as a 3-rank plan does.
source "$(dirname "$0")/lib.sh"

bash "$LOOM_SRC/scripts/install-deps.sh" --slurm > install.log 2>&1 \
  || { cat install.log; fail "cannot install slurm-wlm and munge"; }

# --- A one-node cluster of our own --------------------------------------------
mkdir -p munge state spool
cp /etc/munge/munge.key munge/key && chmod 700 munge && chmod 400 munge/key
ports=($($PY -c "
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(('127.0.0.1', 0))
print(*[x.getsockname()[1] for x in s])"))
cat > slurm.conf <<CONF
ClusterName=loomtest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/sock
CredType=cred/munge
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=loomnode NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=loom Nodes=loomnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF=$WORK/slurm.conf
stop_cluster() { # TERM, up to 10 s to end, then KILL
  local pids=()
  for pidfile in slurmd.pid slurmctld.pid munge/pid; do
    [ -f "$WORK/$pidfile" ] && pids+=("$(cat "$WORK/$pidfile")")
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill "${pids[@]}" 2> /dev/null || true
  for _ in $(seq 1 50); do
    alive=0
    for pid in "${pids[@]}"; do
      [ "$(ps -o stat= -p "$pid" 2> /dev/null | cut -c1)" = "" ] \
        || [ "$(ps -o stat= -p "$pid" | cut -c1)" = Z ] || alive=1
    done
    [ $alive -eq 0 ] && return 0
    sleep 0.2
  done
  kill -9 "${pids[@]}" 2> /dev/null || true
}
trap stop_cluster EXIT
munged --force -S "$WORK/munge/sock" --key-file="$WORK/munge/key" \
  --log-file="$WORK/munge/log" --pid-file="$WORK/munge/pid" --seed-file="$WORK/munge/seed"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N loomnode
for _ in $(seq 1 100); do
  sinfo -h -o %t 2> /dev/null | grep -q idle && break
  sleep 0.2
done
sinfo -h -o %t | grep -q idle || { cat slurmctld.log slurmd.log; fail "the node never came up"; }
# mpirun (inside loom-elastic's allocation) refuses root unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# --- The model and its plans -------------------------------------------------
$PY "$MODELS/hf_models.py" --model gpt2 --out . --batch 12 > /dev/null
$PY - <<'PY'
import numpy as np
tokens = np.random.default_rng(3).integers(0, 512, 48 * 64 + 1).astype(np.uint16)
tokens.tofile("tokens.bin")
PY
opts=(--global-batch 12 --optimizer adamw --lr 1e-3 --quiet)
loomc model.onnx --cluster cpu:2 "${opts[@]}" -o p2.loomplan --emit-sbatch job.sh
grep -q "^#SBATCH --ntasks-per-node=2$" job.sh || { cat job.sh; fail "job.sh: tasks"; }
grep -q "^#SBATCH --requeue$" job.sh || fail "job.sh is not requeued"
loomc model.onnx --cluster cpu:3 "${opts[@]}" -o p3.loomplan
loomc model.onnx --cluster cpu:3 "${opts[@]}" --plan-only --emit-sbatch elastic.sh \
  --sbatch-elastic

same() { # A B: the losses of two metrics files, bitwise
  $PY - "$1" "$2" <<'PY' || fail "$1 and $2 differ"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:3])
assert a == b and len(a) > 0, (a, b)
print("%s = %s (%d steps)" % (sys.argv[1], sys.argv[2], len(a)))
PY
}
submit() { # SCRIPT ARGS...: sbatch --wait; the job's output shown on failure
  sbatch --wait --parsable "$@" > job.id 2> sbatch.err \
    || { cat sbatch.err loom-*.out 2> /dev/null; fail "sbatch $1 failed"; }
  echo "job $(cat job.id) ($1) done"
}

# --- srun loom-run -------------------------------------------------------------
loom_run_np 2 p2.loomplan --tokens tokens.bin --steps 12 --metrics ref2.jsonl
submit job.sh --tokens tokens.bin --steps 6 --metrics s.jsonl --checkpoint-dir ck \
  --checkpoint-every 3
[ -d ck/step-00000006 ] || fail "no checkpoint from the batch job"
submit job.sh --tokens tokens.bin --steps 12 --metrics s.jsonl --checkpoint-dir ck \
  --checkpoint-every 3
grep -q "resumed from ck/step-00000006 (step 6 of 12)" loom-model-*.out \
  || { cat loom-model-*.out; fail "the second job did not resume"; }
same s.jsonl ref2.jsonl

# --- loom-elastic on the allocation -----------------------------------------
loom_run_np 3 p3.loomplan --tokens tokens.bin --steps 6 --metrics ref3.jsonl
submit --ntasks=3 --nodes=1 elastic.sh --tokens tokens.bin --steps 6 --metrics e.jsonl \
  --checkpoint-dir eck
grep -q "planned for 3 device(s) (--cluster cpu:3)" loom-model-*.out \
  || { cat loom-model-*.out; fail "loom-elastic did not plan for the 3 tasks"; }
same e.jsonl ref3.jsonl
echo "slurm: ok"
