#!/usr/bin/env bash
# usage: train_under_launchers.sh openmpi|mpich|srun|torchrun PATH/TO/ouro-train PATH/TO/ouro-run
#
# Proves the one ouro-train binary trains the same bits whatever launcher starts its ranks. Two
# jobs of the same short ZeRO-2 run (784,32,10 MLP, batch 16 per rank, 6 SGD steps, seed 3):
#   reference   under ouro-run -n N
#   ENGINE      under the engine: mpirun.openmpi, mpirun.mpich, srun on a private Slurm
#               (slurm.sh), or torchrun (Debian's python3-torch: python3 -m torch.distributed.run)
# N is 2, except 3 under mpirun.mpich: 25450 parameters do not split evenly over 3 ranks, so
# that job also covers the padded last shard.
# Checks, for both jobs: every rank logged (OURO_DEBUG=info) that ouroCommInitFromEnv read
# "rank R of N from <the engine's own variables>" with R the engine's own rank for that process
# (taken from the engine's output labels, never from what ouro printed), and local rank R of N;
# the --json report says mode zero2, world_size N, 6 steps. Then the engine's --save file must be
# byte-identical to the reference's. A permuted rank mapping fails only the label check (ouro
# rank r computes the same bits whichever process holds it, measured at N=3); a duplicated or
# missing rank fails the rendezvous or hangs into the bounded wait.
# Every job is bounded (lib.sh JOB_TIMEOUT_S); the EXIT trap stops whatever is left by PID and
# removes the temp dir.
# Exit: 0 pass, 1 fail (with the job's output), 77 the engine is not installed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ENGINE=${1:-}
OURO_TRAIN=${2:-}
OURO_RUN=${3:-}
TEST_NAME="${ENGINE:-?}: ouro-train"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# shellcheck source-path=SCRIPTDIR source=slurm.sh
source "$HERE/slurm.sh"

# Debian's interpreter: the python3 first on PATH may be another one without torch.
readonly SYSTEM_PYTHON=/usr/bin/python3
readonly DATA_DIR=/usr/share/datasets/fashion-mnist
readonly STEPS=6
# Every rank runs exactly this; only --save and --json differ between the two jobs.
readonly -a TRAIN_ARGS=(--mode zero2 --layers "784,32,10" --batch-size 16 --steps "$STEPS" --seed 3
  --log-every 0 --data "$DATA_DIR")

case "$ENGINE" in
  openmpi) RANKS=2 SOURCE="Open MPI" ;;
  mpich) RANKS=3 SOURCE="MPICH" ;;
  srun) RANKS=2 SOURCE="Slurm" ;;
  torchrun) RANKS=2 SOURCE="torchrun" ;;
  *) fail "usage: $0 openmpi|mpich|srun|torchrun PATH/TO/ouro-train PATH/TO/ouro-run (got engine '$ENGINE')" ;;
esac
readonly RANKS SOURCE

require_engine() {
  case "$ENGINE" in
    openmpi) require_command mpirun.openmpi ;;
    mpich) require_command mpirun.mpich ;;
    srun) require_slurm ;;
    torchrun)
      [[ -x "$SYSTEM_PYTHON" ]] || skip "$SYSTEM_PYTHON is not installed (torchrun comes with Debian's python3-torch)"
      # find_spec does not import torch (seconds); the launch itself shows whether it works.
      "$SYSTEM_PYTHON" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' ||
        skip "torch is not installed for $SYSTEM_PYTHON (Debian package python3-torch)"
      ;;
  esac
}

require_executable() {
  local what=$1 path=$2
  [[ -n "$path" ]] || fail "usage: $0 $ENGINE PATH/TO/ouro-train PATH/TO/ouro-run ($what not given)"
  [[ -x "$path" ]] || fail "$what not found or not executable: $path"
}

# Reads one job's raw stdout and stderr, writes "LABEL TEXT" where LABEL is the rank the launcher
# itself gave the process that printed TEXT; unlabelled lines (launcher chatter) become "? LINE".
labelled_output() {
  local name=$1 engine=$2 expr
  case "$engine" in
    ouro-run) expr='s/^\[([0-9]+)\]: /\1 /' ;;              # ouro-run --tag-output
    openmpi) expr='s/^\[[0-9]+,([0-9]+)\]<std(out|err)>:/\1 /' ;;  # --tag-output
    mpich) expr='s/^\[([0-9]+)\] /\1 /' ;;                  # -prepend-rank
    srun) expr='s/^ *([0-9]+): /\1 /' ;;                    # --label
    torchrun) expr='s/^\[default([0-9]+)\]:/\1 /' ;;        # --tee (role "default", local rank)
  esac
  cat "$WORK/$name.out" "$WORK/$name.err" | sed -E "$expr;t;s/^/? /"
}

# check_ranks NAME ENGINE SOURCE: each launcher rank 0..RANKS-1 logged, once,
#   ouroCommInitFromEnv: rank R of RANKS from SOURCE, rendezvous ...
#   ouroCommInitFromEnv: rank R of RANKS ready (local rank R of RANKS on HOST) ...
# with R its launcher rank: ouro took rank, size and local rank from that launcher's variables.
check_ranks() {
  local name=$1 engine=$2 source=$3 label text r
  local -a seen_init=() seen_ready=()
  local re_init='ouroCommInitFromEnv: rank ([0-9]+) of ([0-9]+) from (.*), rendezvous '
  local re_ready='ouroCommInitFromEnv: rank ([0-9]+) of ([0-9]+) ready \(local rank ([0-9]+) of ([0-9]+) on '
  while read -r label text; do
    if [[ "$text" =~ $re_init ]]; then
      local rank=${BASH_REMATCH[1]} size=${BASH_REMATCH[2]} from=${BASH_REMATCH[3]}
      [[ "$label" =~ ^[0-9]+$ ]] || job_fail "$name" "ouro's start-up line has no $engine rank label: '$text'"
      ((rank == label)) || job_fail "$name" "$engine rank $label became ouro rank $rank (expected $label)"
      ((size == RANKS)) || job_fail "$name" "$engine rank $label: world size $size, expected $RANKS"
      [[ "$from" == "$source" ]] ||
        job_fail "$name" "$engine rank $label took its rank from $from, expected $source's variables"
      [[ -z "${seen_init[label]:-}" ]] || job_fail "$name" "$engine rank $label started ouro twice"
      seen_init[label]=1
    elif [[ "$text" =~ $re_ready ]]; then
      local rank=${BASH_REMATCH[1]} size=${BASH_REMATCH[2]} lrank=${BASH_REMATCH[3]} lcount=${BASH_REMATCH[4]}
      [[ "$label" =~ ^[0-9]+$ ]] || job_fail "$name" "ouro's ready line has no $engine rank label: '$text'"
      ((rank == label && size == RANKS)) ||
        job_fail "$name" "$engine rank $label: ready as rank $rank of $size, expected $label of $RANKS"
      # One host: the local rank is the rank and every rank is local.
      ((lrank == label && lcount == RANKS)) ||
        job_fail "$name" "$engine rank $label: local rank $lrank of $lcount, expected $label of $RANKS"
      [[ -z "${seen_ready[label]:-}" ]] || job_fail "$name" "$engine rank $label became ready twice"
      seen_ready[label]=1
    fi
  done < <(labelled_output "$name" "$engine")
  for ((r = 0; r < RANKS; r++)); do
    [[ -n "${seen_init[r]:-}" ]] || job_fail "$name" "no ouroCommInitFromEnv line from $engine rank $r"
    [[ -n "${seen_ready[r]:-}" ]] || job_fail "$name" "$engine rank $r never reported its communicator ready"
  done
  for r in "${!seen_init[@]}"; do
    ((r < RANKS)) || job_fail "$name" "$engine started rank $r, more than the $RANKS asked for"
  done
}

# check_report NAME: NAME.json exists and describes this run at RANKS ranks, NAME.safetensors exists.
check_report() {
  local name=$1 problem
  [[ -s "$WORK/$name.safetensors" ]] || job_fail "$name" "no --save file $WORK/$name.safetensors"
  [[ -s "$WORK/$name.json" ]] || job_fail "$name" "no --json report $WORK/$name.json"
  problem=$("$SYSTEM_PYTHON" - "$WORK/$name.json" "$RANKS" "$STEPS" <<'EOF'
import json, sys
path, ranks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    report = json.load(open(path))
except ValueError as e:
    print(f"{path} is not JSON: {e}")
    sys.exit()
want = {"mode": "zero2", "world_size": ranks, "steps": steps}
bad = [f"{k}={report.get(k)!r} (expected {v!r})" for k, v in want.items() if report.get(k) != v]
if bad:
    print(f"{path}: " + ", ".join(bad))
EOF
  ) || job_fail "$name" "could not read $WORK/$name.json with $SYSTEM_PYTHON"
  [[ -z "$problem" ]] || job_fail "$name" "$problem"
}

# train NAME CMD...: runs CMD (a launcher and its options) on ouro-train with TRAIN_ARGS, saving
# to WORK/NAME.safetensors and reporting to WORK/NAME.json.
train() {
  local name=$1
  shift
  run_job "$name" "$@" "$OURO_TRAIN" "${TRAIN_ARGS[@]}" \
    --save "$WORK/$name.safetensors" --json "$WORK/$name.json"
}

run_engine() {
  local name=$ENGINE
  case "$ENGINE" in
    openmpi)
      # Root needs --allow-run-as-root, more ranks than cores --oversubscribe; Open MPI passes
      # only what -x names to remote ranks, so name everything a multi-host job would need.
      export MASTER_ADDR=127.0.0.1 MASTER_PORT
      MASTER_PORT=$(free_port)
      train "$name" mpirun.openmpi --allow-run-as-root --oversubscribe --tag-output \
        -x MASTER_ADDR -x MASTER_PORT -x OURO_TIMEOUT_S -x OURO_DEBUG -n "$RANKS"
      ;;
    mpich)
      export MASTER_ADDR=127.0.0.1 MASTER_PORT
      MASTER_PORT=$(free_port)
      train "$name" mpirun.mpich -prepend-rank -genvlist MASTER_ADDR,MASTER_PORT,OURO_TIMEOUT_S,OURO_DEBUG \
        -n "$RANKS"
      ;;
    srun)
      export MASTER_ADDR=127.0.0.1 MASTER_PORT
      MASTER_PORT=$(free_port)
      # --overcommit: more tasks than the node's CPUs may be asked for; the whole step is killed
      # when one task fails, so a failing rank cannot leave the others waiting.
      train "$name" srun --job-name=ouro-train --nodes=1 --ntasks="$RANKS" --overcommit --label \
        --kill-on-bad-exit=1 --export=ALL
      ;;
    torchrun)
      # Rendezvous through torchrun's c10d backend on a free port: torchrun then picks another
      # free port for the workers' MASTER_PORT, where ouro's rank 0 serves its store. With
      # --master_addr/--master_port (static rendezvous) torchrun's own TCPStore keeps that port
      # for the whole job, and ouro's rank 0 cannot listen there ("the port is already in use").
      # --redirects/--tee: torch 1.13's default "0" breaks on Python 3.11 (Std.from_str("0")
      # finds no member and start_processes fails on None), so pass values that parse: stdout
      # to per-rank logs, stderr to them and to our stderr with "[defaultR]:" (R = local rank).
      # --monitor_interval: the agent notices its workers' exit this often (default 5 s).
      mkdir "$WORK/torchrun-logs"
      train "$name" "$SYSTEM_PYTHON" -m torch.distributed.run --nnodes 1 --nproc_per_node "$RANKS" \
        --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$(free_port)" --rdzv_id "ouro-train-$$" \
        --max_restarts 0 --monitor_interval 0.2 --redirects 1 --tee 2 --log_dir "$WORK/torchrun-logs" --no_python
      ;;
  esac
}

cleanup() {
  local rc=$?
  set +e
  # An interrupted job first (the launcher then stops its ranks), then the private Slurm if this
  # run has one, then any rank or slurmstepd that outlived them.
  stop_pid "$JOB_PID"
  stop_slurm
  stop_stragglers
  remove_workdir
  exit "$rc"
}

main() {
  require_engine
  require_executable ouro-train "$OURO_TRAIN"
  require_executable ouro-run "$OURO_RUN"
  # Tasks started by slurmd or torchrun do not share our idea of a relative path.
  OURO_TRAIN=$(realpath "$OURO_TRAIN")
  OURO_RUN=$(realpath "$OURO_RUN")
  [[ -d "$DATA_DIR" ]] || fail "Fashion-MNIST not found in $DATA_DIR (Debian package dataset-fashion-mnist)"
  scrub_launcher_env
  make_workdir "ouro-launch-train-$ENGINE"
  trap cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE
  # Each rank logs the rank, size and launcher its communicator came from, and its local rank.
  export OURO_DEBUG=info

  train reference "$OURO_RUN" -n "$RANKS" --tag-output
  check_ranks reference ouro-run "ouro-run (OURO_*)"
  check_report reference

  [[ "$ENGINE" != srun ]] || start_private_slurm
  run_engine
  check_ranks "$ENGINE" "$ENGINE" "$SOURCE"
  check_report "$ENGINE"
  cmp "$WORK/reference.safetensors" "$WORK/$ENGINE.safetensors" >&2 ||
    fail "the weights saved under $ENGINE differ from ouro-run's (same command, $RANKS ranks): the launcher changed the bits"

  echo "PASS ($TEST_NAME): $RANKS ranks of ouro-train --mode zero2 under $ENGINE saved the same bytes as under ouro-run -n $RANKS, each rank at its $SOURCE rank"
}

main "$@"
